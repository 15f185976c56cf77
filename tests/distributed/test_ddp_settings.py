"""DDP's own settings through the real trainer at 2 gloo ranks: a setting gloo cannot run is a
failed point that names the config key. (Each hook learning what `none` learns, the bytes a rank
sends per hook, identical replicas and bf16's failure run once, as points of the ddp study:
tests/e2e/test_ddp_study.py.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--widths=2,16,1", "--grid-size=5", "--samples=4096", "--epochs=3", "--batch-per-rank=64",
        "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1", "--pg-timeout-s=60", "--lr=0.01",
        "--loss-every-steps=8", "--gpus-per-node=2", "--experiment=ddp"]


def run(tmp_path, *extra):
    out = tmp_path / f"rec{len(list(tmp_path.iterdir()))}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=0",
           "-m", "kan.train", *ARGS, *extra, "--out", str(out)]
    r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                       timeout=300)
    return r, (json.loads(out.read_text()) if out.exists() else None)


def test_nccl_algo_on_gloo_fails_naming_the_key(tmp_path):
    r, rec = run(tmp_path, "--nccl-algo=Ring")
    assert r.returncode != 0
    assert rec is not None and rec["status"] == "failed", r.stdout[-2000:] + r.stderr[-2000:]
    assert "training.nccl_algo=Ring" in rec["reason"], rec["reason"]
