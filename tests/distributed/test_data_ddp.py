"""Two real gloo ranks on a user's table: the held-out rows are the same on every rank
(their checksums agree), and the validation curve comes back in rank 0's record."""

import json
import os
import subprocess
import sys

import numpy as np

SMALL = ["--widths=2,8,1", "--grid-size=5", "--samples=2048", "--epochs=2", "--batch-per-rank=64",
         "--max-steps=24", "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1", "--pg-timeout-s=60"]


def torchrun(nproc, args, cwd):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "--max-restarts=0", "-m", "kan.train", *args]
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300)


def test_two_ranks_hold_out_the_same_rows_and_record_the_curve(tmp_path, root):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 2))
    f = tmp_path / "t.csv"
    f.write_text("a,b,y\n" + "".join(f"{a:.5f},{b:.5f},{a * a - b:.5f}\n" for a, b in x))
    out = tmp_path / "rec.json"
    args = [*SMALL, "--gpus-per-node=2", "--data-kind=file", f"--data-path={f}", "--data-target=y",
            "--eval-every-samples=512", "--out", str(out)]
    r = torchrun(2, args, root)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(out.read_text())
    assert rec["status"] == "ok" and rec["world_size"] == 2
    assert rec["data"]["val_identical"] is True and rec["data"]["num_val"] == 80
    curve = rec["validation"]["curve"]
    # 24 steps x 64 per rank x 2 ranks = 3072 samples: an evaluation every 512
    assert [c["samples_seen"] for c in curve] == [512 * k for k in range(1, 7)]
    assert all(c["val_accuracy"] is None and c["val_loss"] > 0 for c in curve)
    assert rec["replicas_identical"] is True
