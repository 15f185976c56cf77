"""Validate the exposed-communication measurement: inject a known delay into DDP's all-reduce
(a comm hook that waits N ms after each bucket) and check the measured exposed communication
grows by about N ms per step. Runs real torchrun jobs (gloo on CPU, NCCL on GPU).

    .venv/bin/python benchmarks/validate_comm.py --delays 0,5,20,50 --nproc 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def run_point(delay_ms: float, nproc: int, steps: int, widths: str, batch: int, device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "--max-restarts=0", "-m", "kan.train", "--widths", widths, "--grid-size", "10",
               "--grid-range=-2,2", "--samples", str(batch * nproc * steps), "--epochs", "1",
               "--batch-per-rank", str(batch), "--warmup-steps", "5", "--device", device, "--threads", "1",
               "--inject-comm-delay-ms", str(delay_ms), "--out", str(out), "--progress-every-s", "1000"]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delays", default="0,5,20,50", help="injected delay per bucket, ms")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--widths", default="2,64,1")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--device", default="auto")
    a = ap.parse_args()
    rows = []
    for d in (float(x) for x in a.delays.split(",")):
        r = run_point(d, a.nproc, a.steps, a.widths, a.batch, a.device)
        rows.append((d, r["timing"]["step_time_s"] * 1e3, r["timing"]["nosync_step_time_s"] * 1e3,
                     r["comm"]["exposed_s"] * 1e3, r["comm"]["exposed_pct"]))
    base = rows[0][3]
    print(f"world {a.nproc}, widths {a.widths}, batch/rank {a.batch}, {a.steps} steps, backend per record")
    print(f"{'injected ms':>11} {'step ms':>8} {'no_sync ms':>10} {'exposed ms':>10} {'exposed %':>9} {'delta vs 0 ms':>13}")
    for d, step, nos, exp, pct in rows:
        print(f"{d:11.1f} {step:8.2f} {nos:10.2f} {exp:10.2f} {pct:9.1f} {exp - base:13.2f}")


if __name__ == "__main__":
    main()
