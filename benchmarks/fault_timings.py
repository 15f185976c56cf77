"""How fast a point reacts when an operator (or the kernel) hits it: time from the fault to the
committed record, and to the last of the point's processes gone. Real processes (the launcher,
kan.train ranks on gloo), a 1x2 point that trains for minutes unless hit.

    .venv/bin/python benchmarks/fault_timings.py [--repeats 3]

Faults: SIGKILL of a rank (-> a `killed` record), SIGTERM of the launcher (-> `cancelled`), SIGKILL of
the launcher (ranks die by the parent-death signal; nothing committed), SIGKILL of the process the
launcher watches (the snakemake that started it: -> nothing committed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kan.contract import record as records
from kan.contract.point import LaunchSettings, ModelConfig, Placement, Point, TrainConfig


def ranks(point_id: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"kan.train .*--out=.*{point_id}"], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def until(cond, timeout_s: float = 120.0, poll_s: float = 0.02) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError
        time.sleep(poll_s)
    return time.monotonic() - t0


def one(fault: str, tmp: Path, rep: int) -> dict:
    p = Point(study="f", rep=rep, model=ModelConfig(widths=(2, 64, 1)),
              train=TrainConfig(samples=20000, epochs=50, batch_per_rank=64, warmup_steps=2),
              placement=Placement(device="cpu", gpus_per_node=2))
    out = tmp / fault / "results" / "f" / "points" / f"{p.id}.json"
    d = p.to_json()
    d.pop("limits")
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    launcher = subprocess.Popen([sys.executable, str(ROOT / "workflow/scripts/launch_point.py"), "--point", json.dumps(d),
                                 "--launch", json.dumps(LaunchSettings(runtime_min=5).to_json()), "--out", str(out),
                                 "--watch-pid", str(watched.pid)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    until(lambda: len(ranks(p.id)) == 2)
    time.sleep(3)  # inside the training loop
    t0, t0_wall = time.monotonic(), time.time()
    if fault == "SIGKILL a rank":
        os.kill(ranks(p.id)[-1], signal.SIGKILL)
    elif fault == "SIGTERM the launcher":
        launcher.send_signal(signal.SIGTERM)
    elif fault == "SIGKILL the launcher":
        launcher.kill()
    else:
        watched.kill()
    until(lambda: not ranks(p.id) and launcher.poll() is not None)
    gone = time.monotonic() - t0
    status = None
    try:
        status = records.read(out, p.id)["status"]
        committed = out.stat().st_mtime - t0_wall
    except records.InvalidRecord:
        committed = None
    watched.kill()
    return {"gone_s": gone, "record": status, "record_s": committed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    faults = ("SIGKILL a rank", "SIGTERM the launcher", "SIGKILL the launcher", "SIGKILL the watched snakemake")
    print(f"load average {os.getloadavg()[0]:.2f}; {a.repeats} repeats per fault; 1x2 point on gloo")
    print(f"{'fault':32} {'record':>10} {'record after s':>15} {'processes gone after s (median, max)':>38}")
    with tempfile.TemporaryDirectory() as tmp:
        for fault in faults:
            runs = [one(fault, Path(tmp), r) for r in range(a.repeats)]
            rec = {r["record"] for r in runs}
            rec_s = [r["record_s"] for r in runs if r["record_s"] is not None]
            gone = [r["gone_s"] for r in runs]
            rec_txt = f"{statistics.median(rec_s):.2f}" if rec_s else "-"
            print(f"{fault:32} {','.join(str(x) for x in rec):>10} {rec_txt:>15} "
                  f"{statistics.median(gone):19.2f} {max(gone):8.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
