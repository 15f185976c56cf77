"""Validate the exposed-communication measurement: inject a known delay into DDP's all-reduce (a comm
hook that waits N ms after each bucket) and check what the measured exposed communication reports.
Runs real multi-rank jobs (gloo on CPU, NCCL on GPU), two ranks started with torchrun's environment.

    .venv/bin/python benchmarks/validate_comm.py --delays 0,5,20,50                      # one bucket
    .venv/bin/python benchmarks/validate_comm.py --delays 0,5,20 --widths 2,64,64,64,1 --bucket-cap-mb 0.001

One bucket ([2,64,1] has two parameter tensors in one 25 MB bucket): the delay sits after the whole
backward pass, nothing can hide it, and exposed comm must grow by about N ms. Several buckets (a
deeper model, a tiny bucket_cap_mb): DDP starts each bucket's all-reduce while the backward pass
still computes earlier layers, so part of each bucket's delay hides behind compute. Exposed comm
then grows by less than N x buckets: it measures what the step loses, not how long the all-reduce
took, which is what an efficiency figure needs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_point(delay_ms: float, nproc: int, steps: int, widths: str, batch: int, device: str,
              bucket_cap_mb: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        cmd = [sys.executable, "-m", "kan.train", f"--widths={widths}", "--grid-size=10", "--grid-range=-2,2",
               f"--samples={batch * nproc * steps}", "--epochs=1", f"--batch-per-rank={batch}", "--warmup-steps=5",
               f"--device={device}", f"--gpus-per-node={nproc}", f"--bucket-cap-mb={bucket_cap_mb}",
               f"--inject-comm-delay-ms={delay_ms}", f"--out={out}", "--progress-every-s=1000"]
        port = str(free_port())
        procs = []
        for r in range(nproc):
            env = {**os.environ, "OMP_NUM_THREADS": "1", "RANK": str(r), "LOCAL_RANK": str(r),
                   "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": port}
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate()
            if p.returncode:
                raise RuntimeError(f"rank failed: {err.decode()[-2000:]}")
        return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delays", default="0,5,20,50", help="injected delay per bucket, ms")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--widths", default="2,64,1")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--device", default="auto")
    a = ap.parse_args()
    rows = []
    for d in (float(x) for x in a.delays.split(",")):
        r = run_point(d, a.nproc, a.steps, a.widths, a.batch, a.device, a.bucket_cap_mb)
        c = r["comm"]
        rows.append((d, c["num_buckets"], r["timing"]["step_time_s"] * 1e3, r["timing"]["nosync_step_time_s"] * 1e3,
                     c["exposed_s"] * 1e3, c["exposed_pct"]))
    base = rows[0][4]
    print(f"world {a.nproc}, widths {a.widths}, batch/rank {a.batch}, {a.steps} steps, bucket_cap_mb {a.bucket_cap_mb}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'injected ms':>11} {'buckets':>7} {'x buckets':>9} {'step ms':>8} {'no_sync ms':>10} {'exposed ms':>10} "
          f"{'exposed %':>9} {'delta vs 0':>10}")
    for d, nb, step, nos, exp, pct in rows:
        total = d * (nb or 1)
        print(f"{d:11.1f} {nb or '?':>7} {total:9.1f} {step:8.2f} {nos:10.2f} {exp:10.2f} {pct:9.1f} {exp - base:10.2f}")


if __name__ == "__main__":
    main()
