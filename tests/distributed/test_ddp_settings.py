"""DDP's own settings through the real trainer at 2 gloo ranks: each hook learns what `none` learns
(fp16 closely, PowerSGD more loosely), the bytes a rank sends per step follow the hook, the replicas
stay identical; settings gloo cannot run are failed points that name the config key."""

import json
import os
import subprocess
import sys

from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    r, rec = run(tmp_path_factory.mktemp("none"))
    assert r.returncode == 0 and rec["status"] == "ok", r.stdout + r.stderr
    return rec


@pytest.mark.parametrize("hook,flags,tolerance", [
    ("fp16", [], 0.05),                          # 16-bit gradients: the same curve within a few %
    ("powersgd", ["--powersgd-rank=2"], 0.5),    # rank-2 gradients with error feedback: looser
], ids=["fp16", "powersgd"])
def test_a_hook_learns_what_none_learns_and_sends_what_it_should(tmp_path, baseline, hook, flags, tolerance):
    r, rec = run(tmp_path, f"--comm-hook={hook}", *flags)
    assert r.returncode == 0 and rec["status"] == "ok", r.stdout[-3000:] + r.stderr[-3000:]
    assert rec["point"]["train"]["comm_hook"] == hook and rec["comm"]["comm_hook"] == hook
    assert f"-{hook}" in rec["point"]["id"] and rec["replicas_identical"] is True
    base, mine = baseline["loss"]["curve"], rec["loss"]["curve"]
    assert [c["step"] for c in base] == [c["step"] for c in mine]
    first, last = base[0]["train_loss"], base[-1]["train_loss"]
    assert last < 0.5 * first  # the baseline learns at all, so the comparison means something
    assert abs(mine[-1]["train_loss"] - last) <= tolerance * first, (mine[-1], base[-1])
    n = baseline["comm"]["bytes_per_step"]
    assert n == 4 * baseline["model"]["num_params"]
    sent = rec["comm"]["bytes_per_step"]
    if hook == "fp16":
        assert sent == pytest.approx(n / 2, rel=0.01)  # every gradient once, in 2 bytes
    else:
        # PowerSGD sends P and Q of rank 2 for the 2-D weights, the rest uncompressed: far less than n
        assert 0 < sent < 0.5 * n
    assert "counted" in rec["comm"]["bytes_per_step_source"]


@pytest.mark.parametrize("flag,key", [("--comm-hook=bf16", "training.comm_hook=bf16"),
                                      ("--nccl-algo=Ring", "training.nccl_algo=Ring")])
def test_what_gloo_cannot_run_fails_naming_the_key(tmp_path, flag, key):
    r, rec = run(tmp_path, flag)
    assert r.returncode != 0
    assert rec is not None and rec["status"] == "failed", r.stdout[-2000:] + r.stderr[-2000:]
    assert key in rec["reason"], rec["reason"]
