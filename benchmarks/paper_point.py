"""The seed paper's whole 1-GPU strong-scaling point through `python -m kan.train`:
[2, 64, 1], grid 10, cubic, 100K samples, 40 epochs, batch 512, Adam 1e-3, DDP at world size 1
(data generation, DDP wrapper and the measurement included). The paper: 900.6 s on an A100 (pykan).

    .venv/bin/python benchmarks/paper_point.py [--impl kanscale|mlp] [--threads 2] [--device auto]
        [--cuda-graphs] [--json summary.json]

Prints the command's wall time (interpreter start to exit), the training loop's time from the
record, the throughput, the held-out loss and the step's anatomy (fixed cost, operators or kernels
per step, bound); --cuda-graphs replays the whole step as one CUDA graph (training.cuda_graphs);
--json writes those numbers for benchmarks/device_check.sh's summary table.
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
    ap.add_argument("--cuda-graphs", action="store_true", help="capture the whole step as a CUDA graph")
    ap.add_argument("--json", type=Path, help="write the summary numbers here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec.json"
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"]
        cmd = [*(launcher if a.torchrun else [sys.executable]), "-m", "kan.train", f"--impl={a.impl}",
               f"--basis={a.basis}", "--widths=2,64,1", "--grid-size=10", "--spline-order=3", "--grid-range=-2,2",
               "--samples=100000", f"--epochs={a.epochs}", "--batch-per-rank=512", "--lr=0.001",
               f"--device={a.device}", f"--threads-per-rank={a.threads}", f"--out={out}", "--progress-every-s=1000",
               *(["--cuda-graphs"] if a.cuda_graphs else [])]
        env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        rec = json.loads(out.read_text())
    if rec["status"] != "ok":  # a failed point is data: say why, and keep it for the summary
        print(f"failed (exit {done.returncode}): {rec.get('reason')}")
        if a.json:
            a.json.write_text(json.dumps({"status": rec["status"], "reason": rec.get("reason"),
                                          "cuda_graphs": a.cuda_graphs}))
        sys.exit(1)
    t = rec["timing"]
    print(f"{'torchrun' if a.torchrun else 'python'} -m kan.train, DDP at world size 1 ({rec['backend']}); "
          f"impl {a.impl}/{a.basis}, device {rec['device_type']} ({rec['ranks'][0]['device_name']}), "
          f"threads {a.threads}, epochs {a.epochs}, steps {t['num_steps']}")
    print(f"command wall {wall:.1f} s; training loop {t['train_time_s']:.1f} s; "
          f"median step {t['step_time_s'] * 1e3:.3f} ms = {rec['throughput']['samples_per_s']:,.0f} samples/s; "
          f"final train loss {rec['loss']['final_train']:.4g}, test loss {rec['loss']['test']:.4g}")
    an = rec.get("anatomy") or {}
    if an:
        # a captured record keeps the eager step's profile under eager_ names: said as the eager step's
        eager = an.get("ops_per_step") is None and an.get("eager_ops_per_step") is not None
        ops, busy = (an.get("eager_ops_per_step"), an.get("eager_gpu_busy_pct")) if eager else \
            (an.get("ops_per_step"), an.get("gpu_busy_pct"))
        print(f"anatomy ({an['step']} step): fixed {an['eager_fixed_step_ms']:.3f} ms eager, "
              f"{an['per_sample_us']:.3f} us a sample, {ops} {an['ops_kind']} per {'eager ' if eager else ''}step, "
              f"GPU busy {busy if busy is not None else '-'}%{' (eager step)' if eager else ''}, bound {an['bound']}"
              + (", dispatch clamped to 0 (the eager compute exceeds the replayed step)" if an.get("dispatch_clamped") else ""))
    kern = rec.get("kernels") or {}
    print(f"kernels: {kern.get('path')} ({kern.get('why')})")
    if a.json:
        a.json.write_text(json.dumps({"kernels": kern,
            "status": "ok", "cuda_graphs": a.cuda_graphs, "capture": rec.get("cuda_graphs"), "epochs": a.epochs,
            "device": rec["ranks"][0]["device_name"], "step_ms": t["step_time_s"] * 1e3, "steps": t["num_steps"],
            "steps_per_epoch": t["steps_per_epoch"], "probe_every": rec["comm"]["probe_every"],
            "optimizer": ("Adam(capturable=True), its rate a device tensor" if a.cuda_graphs else
                          "Adam(fused=True)" if rec["device_type"] == "cuda" else "Adam"),
            "train_time_s": t["train_time_s"], "startup_s": t.get("startup_s"), "wall_s": wall,
            "final_train_loss": rec["loss"]["final_train"], "test_loss": rec["loss"]["test"], "anatomy": an}))
    if a.epochs == 40:
        print(f"paper (A100, pykan): {PAPER_S} s -> {PAPER_S / wall:.1f}x faster end to end")


if __name__ == "__main__":
    main()
