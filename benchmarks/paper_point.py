"""The seed paper's whole 1-GPU strong-scaling point through `python -m kan.train`:
[2, 64, 1], grid 10, cubic, 100K samples, 40 epochs, batch 512, Adam 1e-3, DDP at world size 1
(data generation, DDP wrapper and the measurement included). The paper: 900.6 s on an A100 (pykan).

    .venv/bin/python benchmarks/paper_point.py [--impl kanscale|mlp] [--threads 2] [--device auto]

Prints the command's wall time (interpreter start to exit), the training loop's time from the
record, and the throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAPER_S = 900.59  # workflow/report/reference/strong.csv, n1g1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", default="kanscale")
    ap.add_argument("--basis", default="bspline")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--torchrun", action="store_true", help="start it under torchrun (+ an agent process)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"]
        cmd = [*(launcher if a.torchrun else [sys.executable]), "-m", "kan.train", f"--impl={a.impl}",
               f"--basis={a.basis}", "--widths=2,64,1", "--grid-size=10", "--spline-order=3", "--grid-range=-2,2",
               "--samples=100000", f"--epochs={a.epochs}", "--batch-per-rank=512", "--lr=0.001",
               f"--device={a.device}", f"--threads-per-rank={a.threads}", f"--out={out}", "--progress-every-s=1000"]
        env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        rec = json.loads(out.read_text())
    t = rec["timing"]
    print(f"{'torchrun' if a.torchrun else 'python'} -m kan.train, DDP at world size 1 ({rec['backend']}); "
          f"impl {a.impl}/{a.basis}, device {rec['device_type']} ({rec['ranks'][0]['device_name']}), "
          f"threads {a.threads}, epochs {a.epochs}, steps {t['num_steps']}")
    print(f"command wall {wall:.1f} s; training loop {t['train_time_s']:.1f} s; "
          f"median step {t['step_time_s'] * 1e3:.3f} ms = {rec['throughput']['samples_per_s']:,.0f} samples/s; "
          f"final train loss {rec['loss']['final_train']:.4g}, test loss {rec['loss']['test']:.4g}")
    if a.epochs == 40:
        print(f"paper (A100, pykan): {PAPER_S} s -> {PAPER_S / wall:.1f}x faster end to end")


if __name__ == "__main__":
    main()
