"""DDP's communication hooks measured over loopback (1x2, one host) and over the emulated link (2x1,
100 Mbit/s; root): the comm-heavy KAN [64, 256, 256, 1] (3.3 MB of gradients), 3 repeats of every
setting, through the workflow (experiments.ddp). Prints per setting: step time, exposed
communication, bytes a rank all-reduced per synced step, final training loss, and the time to
reach 1.5 x the `none` setting's final loss, each as mean [95% CI], and the ratio to `none`.

    sudo .venv/bin/python benchmarks/ddp_hooks.py [--workdir DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
from scaling.target import time_to_target  # noqa: E402


def study(name: str, topology: dict, emulate: bool, repeats: int) -> dict:
    return {"study": name, "device": "cpu", "cpu_threads_per_rank": 1, "repeats": repeats,
            "network": {"emulate": emulate, "rates_mbit": [100]},
            "model": {"widths": [64, 256, 256, 1], "grid_size": 5},
            "training": {"epochs": 1, "warmup_steps": 2, "lr": 0.003, "loss_every_steps": 4, "comm_probe_every": 4},
            "experiments": {"ddp": {"samples": 4096, "batch_per_rank": 64, "topology": topology,
                                    "comm_hook": ["none", "fp16", "bf16", "powersgd"], "powersgd_rank": 2},
                            "allreduce": {"enabled": False}},
            "resources": {"runtime_min": 10, "mem_mb_per_rank": 2000, "cpus_per_rank": 1},
            "timeouts": {"pg_s": 60}}


def ci(x: np.ndarray) -> str:
    m = x.mean()
    if len(x) < 2:
        return f"{m:.3g}"
    h = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / len(x) ** 0.5
    return f"{m:.3g} [{m - h:.3g}, {m + h:.3g}]"


def table(work: Path, name: str) -> None:
    out = work / "results" / name
    m = pd.read_csv(out / "measurements.csv")
    curves = pd.read_csv(out / "loss_curves.csv")
    ok = m[m["status"] == "ok"]
    none = ok[ok["ddp_setting"] == "none"]
    target = 1.5 * none["final_train_loss"].mean()
    ttt = {r.point_id + str(r.rep): time_to_target(curves[(curves.point_id == r.point_id) & (curves.rep == r.rep)],
                                                    target) for r in ok.itertuples()}
    ok = ok.assign(ttt=[ttt[r.point_id + str(r.rep)] for r in ok.itertuples()])
    base = {c: ok[ok["ddp_setting"] == "none"][c].mean() for c in ("step_time_s", "ttt")}
    print(f"\n{name}: {ok['placement_class'].iloc[0]}, target loss {target:.4g} (1.5 x none's final)")
    print("| setting | step ms | / none | exposed comm % | bytes/step | final loss | time to target s | / none |")
    print("|---|---|---|---|---|---|---|---|")
    for setting, g in ok.groupby("ddp_setting", sort=False):
        print(f"| {setting} | {ci(1e3 * g['step_time_s'].to_numpy())} | {g['step_time_s'].mean() / base['step_time_s']:.2f} | "
              f"{ci(g['exposed_comm_pct'].to_numpy())} | {g['bytes_per_step'].mean():,.0f} | "
              f"{ci(g['final_train_loss'].to_numpy())} | {ci(g['ttt'].to_numpy())} | {g['ttt'].mean() / base['ttt']:.2f} |")
    for _, r in m[m["status"] != "ok"].drop_duplicates("ddp_setting").iterrows():
        print(f"| {r['ddp_setting']} | {r['status']}: {str(r['reason'])[:150]} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="kanscale-ddp-bench-"))
    for name in ("Snakefile", "workflow", "config", "profiles"):
        if not (work / name).exists():
            (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, work / name)
    runs = [("ddp_loopback", {"nodes": 1, "gpus_per_node": 2}, False),
            ("ddp_link100", {"nodes": 2, "gpus_per_node": 1}, True)]
    for name, topo, emulate in runs:
        (work / f"{name}.json").write_text(json.dumps(study(name, topo, emulate, a.repeats)))
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile",
                            f"{name}.json"], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit((r.stdout + r.stderr)[-4000:])
        print(f"{name}: study wall {time.monotonic() - t0:.0f} s")
        table(work, name)


if __name__ == "__main__":
    main()
