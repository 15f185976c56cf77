"""How often a two-rank gloo run of kan.train dies after measuring, leaving through kan.train.exit_now
(os._exit after atexit hooks) against leaving through plain interpreter exit (sys.exit(main())), the
two interleaved in one run so the machine's load falls on both alike:

    .venv/bin/python benchmarks/rank_exit.py --runs 100 [--weights-out]

--weights-out saves each rank's weights as tests/distributed/test_ddp.py's two-rank test does (the
run CI saw abort): the file write before the final gather changes the ranks' timing at exit.

Plain exit can abort a rank with SIGABRT ("terminate called without an active exception"): gloo's
worker thread frees the last collective's tensors while the interpreter finalizes (kan/train.py,
exit_now). Prints per way: runs, non-zero exits, of them SIGABRT, and seconds per run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--widths=2,8,1", "--grid-size=5", "--samples=2048", "--epochs=2", "--batch-per-rank=64", "--max-steps=24",
        "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1", "--pg-timeout-s=60", "--gpus-per-node=2"]
PLAIN = "import sys\nfrom kan.train import main\nsys.exit(main())\n"


def one(entry: list[str], out: Path, weights: bool) -> tuple[int, bool, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=0",
           *entry, *ARGS, "--out", str(out), *(["--weights-out", str(out.with_suffix(".w"))] if weights else [])]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                       capture_output=True, text=True, timeout=300)
    return r.returncode, "SIGABRT" in r.stdout + r.stderr, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100, help="runs of each way")
    ap.add_argument("--weights-out", action="store_true", help="each rank saves its weights, as the test does")
    args = ap.parse_args()
    n = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain_exit.py"
        plain.write_text(PLAIN)
        ways = {"exit_now": ["-m", "kan.train"], "plain sys.exit": [str(plain)]}
        stats = {w: [0, 0, 0.0] for w in ways}
        for i in range(n):
            for w, entry in ways.items():
                rc, abrt, s = one(entry, Path(tmp) / f"rec{i}.json", args.weights_out)
                stats[w][0] += rc != 0
                stats[w][1] += abrt
                stats[w][2] += s
        for w, (bad, abrt, s) in stats.items():
            print(f"{w}{' (--weights-out)' if args.weights_out else ''}: {n} runs, {bad} non-zero, {abrt} SIGABRT, {s / n:.2f} s per run")


if __name__ == "__main__":
    main()
