"""Per-point launch overhead of a local study: job wall time (Snakemake's benchmark of the point's
shell command) minus the training loop's own time (the record's train_time_s). What is left is the
interpreter, imports (torch, its lazily imported torch._dynamo that DDP's constructor pulls in,
numba), the process group, the data, the held-out loss and the record.

    .venv/bin/python benchmarks/point_overhead.py                     # the demo study (config/local.yaml)
    .venv/bin/python benchmarks/point_overhead.py --config tests/configs/tiny.yaml
    .venv/bin/python benchmarks/point_overhead.py --results results/local   # an existing study's records
    .venv/bin/python benchmarks/point_overhead.py --imports   # the floor: a fresh interpreter's imports
    .venv/bin/python benchmarks/point_overhead.py --compare-warm   # the study twice: warm start off, on

Locally, CPU trainers are forked by the warm-start server (workflow/scripts/launch/warm_server.py, config resources.warm_start):
the first point of a run starts the server and pays the imports once; the others fork in milliseconds.

Runs the study in a fresh temporary folder (nothing of yours is touched) unless --results is given.
Prints the median and range per launch kind and overall.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]


def kind(row) -> str:
    started = f", {row['started']}" if isinstance(row.get("started"), str) else ""
    if row["world_size"] == 1:
        return f"one rank{started}"
    if row["nodes"] == 1:
        return f"one node, ranks started directly{started}"
    return f"several nodes (torchrun agents){started}"


def run_study(config: Path, work: Path, warm_start: bool | None = None) -> Path:
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = ROOT / name
        shutil.copytree(src, work / name) if src.is_dir() else shutil.copy(src, work / name)
    if warm_start is not None:  # the same config with resources.warm_start set
        cfg = yaml.safe_load(config.read_text())
        cfg.setdefault("resources", {})["warm_start"] = warm_start
        config = work / f"warm-{str(warm_start).lower()}.yaml"
        config.write_text(yaml.safe_dump(cfg))
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--profile", "profiles/local", "--configfile",
           str(config.resolve())]
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"study wall {time.monotonic() - t0:.0f} s ({config})")
    study = next((work / "results").iterdir())
    return study


IMPORTS = ("pass", "import torch", "import torch, numba", "import torch, torch._dynamo",
           "import torch, torch._dynamo, numba, kan.loop, kan.train")


def import_floor(repeats: int = 3) -> None:
    """The part of a point's start-up no launcher can remove: a fresh interpreter's imports. DDP's
    constructor reads torch._dynamo.utils, which imports torch._dynamo (sympy, torch.fx) on first use."""
    print(f"{'fresh interpreter':58} {'median s':>8}")
    for code in IMPORTS:
        walls = []
        for _ in range(repeats):
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-c", code], check=True)
            walls.append(time.monotonic() - t0)
        print(f"python -c '{code}'"[:58].ljust(58) + f" {statistics.median(walls):8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "local.yaml"))
    ap.add_argument("--results", default=None, help="results/<study> of a finished study (no new run)")
    ap.add_argument("--imports", action="store_true", help="only time the imports a trainer starts with")
    ap.add_argument("--compare-warm", action="store_true",
                    help="run the study with resources.warm_start false, then true, and report both")
    a = ap.parse_args()
    if a.imports:
        print(f"load average {os.getloadavg()[0]:.2f}")
        import_floor()
        return
    for warm_start in ((False, True) if a.compare_warm else (None,)):
        if warm_start is not None:
            print(f"\n== resources.warm_start: {str(warm_start).lower()}")
        report(a, warm_start)


def report(a, warm_start: bool | None) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="kanscale-overhead-") as tmp:
        folder = Path(a.results) if a.results else run_study(Path(a.config), Path(tmp), warm_start)
        m = pd.read_csv(folder / "measurements.csv")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    m = m[(m["status"] == "ok") & (m["experiment"] != "allreduce") & m["overhead_s"].notna()]
    m = m.assign(kind=[kind(r) for _, r in m.iterrows()])
    print(f"{'launch kind':36} {'points':>6} {'median s':>9} {'min s':>7} {'max s':>7}  (job wall - training loop)")
    for k, g in list(m.groupby("kind")) + [("all training points", m)]:
        v = g["overhead_s"].tolist()
        print(f"{k:36} {len(v):6d} {statistics.median(v):9.2f} {min(v):7.2f} {max(v):7.2f}")
    print(f"median training loop {m['train_time_s'].median():.2f} s, median job wall {m['job_wall_s'].median():.2f} s")


if __name__ == "__main__":
    main()
