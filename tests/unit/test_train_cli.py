"""kan.train in one process (no launcher): argument errors name the flag, everything before the
training loop is inside the recorded region, a failure is a record."""

import json

import pytest

from kan.contract import record as records
from kan import train

SMALL = ["--widths=2,4,1", "--grid-size=5", "--samples=1024", "--batch-per-rank=64", "--warmup-steps=2",
         "--epochs=1", "--device=cpu"]


@pytest.mark.parametrize("argv, flag", [
    (["--widths=2,x,1"], "--widths"), (["--grid-range=1,-1"], "--grid-range"),
    (["--comm-probe-every=1"], "--comm-probe-every"), (["--grid-size=0"], "--grid-size"),
    (["--epochs=1.5"], "--epochs"), (["--lr=nan"], "--lr"), (["--device=tpu"], "--device"),
    (["--widths=2,8,3"], "--widths"), (["--pg-timeout-s=0"], "--pg-timeout-s"),
])
def test_bad_arguments_name_the_flag(argv, flag, tmp_path, monkeypatch, capsys):
    err = tmp_path / "rank0.error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))
    assert train.main([*argv, "--out", str(tmp_path / "r.json")]) == 2
    assert f"argument {flag}:" in capsys.readouterr().err
    assert f"argument {flag}:" in json.loads(err.read_text())["message"]["message"]
    assert not (tmp_path / "r.json").exists()


def test_too_few_steps_is_refused_before_training(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = train.main(["--widths=2,4,1", "--samples=100", "--batch-per-rank=64", "--out", str(out), "--device=cpu",
                     "--warmup-steps=5", "--epochs=1"])
    assert rc == 2 and "argument --warmup-steps: no timed step would remain" in capsys.readouterr().err


def test_a_missing_cuda_device_is_a_failed_record_naming_it(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "r.json"
    assert train.main([*SMALL, "--device=cuda", "--out", str(out)]) == 1
    rec = records.read(out)
    assert rec["status"] == "failed" and "no usable CUDA device" in rec["reason"]


def test_single_process_record(tmp_path):
    out = tmp_path / "r.json"
    rc = train.main([*SMALL, "--out", str(out), "--loss-every-steps=4"])
    rec = records.read(out)
    # no launcher: a one-rank group on an in-process store, DDP still wraps the model
    assert rc == 0 and rec["status"] == "ok" and rec["launcher"] == "none" and rec["backend"] == "gloo"
    assert rec["point"]["id"].startswith("strong-kanscale_bspline-2x4x1-n1g1-r0-")
    assert rec["timing"]["num_steps"] == 16
    assert rec["comm"]["probe_every"] == 2 and rec["comm"]["exposed_s"] is not None
    curve = rec["loss"]["curve"]
    assert [c["step"] for c in curve] == [4, 8, 12, 16] and curve[-1]["samples_seen"] == 1024
    assert all(a["elapsed_s"] < b["elapsed_s"] for a, b in zip(curve, curve[1:]))
    assert not list(tmp_path.glob(".r.json.*.tmp"))  # atomic write left no temp file


def test_no_ddp_baseline(tmp_path):
    out = tmp_path / "r.json"
    rc = train.main([*SMALL, "--out", str(out), "--no-ddp"])
    rec = records.read(out)
    assert rc == 0 and rec["point"]["train"]["ddp"] is False and "_noddp-" in rec["point"]["id"]
    assert rec["comm"]["probe_every"] == 0 and rec["comm"]["exposed_s"] is None  # nothing to measure


def test_allreduce_point(tmp_path):
    out = tmp_path / "r.json"
    assert train.main(["--experiment=allreduce", "--sizes-bytes=4096,65536", "--iters=3", "--warmup=1",
                       "--device=cpu", "--out", str(out)]) == 0
    rec = records.read(out)
    sizes = rec["allreduce"]["sizes"]
    assert [s["size_bytes"] for s in sizes] == [4096, 65536] and all(s["time_s"] > 0 for s in sizes)
    assert all(s["busbw_gbps"] == 0 for s in sizes)  # one rank: nothing crosses a link
    corun = rec["corun"]  # the co-run measurement: one rank, its own alone and together rates
    assert len(corun["per_rank"]) == 1 and corun["slowdown"] == corun["per_rank"][0] > 0


HANGS_WHEN_RELEASED = """
import sys, time
from kan import train

class Stuck:
    def __del__(self):  # what a destructor waiting on a lost peer does
        time.sleep(3600)

class Lost(RuntimeError):
    pass

def factory(model, seed):
    e = Lost("the peer is gone")
    e.stuck = Stuck()  # released when the except block that caught it ends
    raise e

train.exit_now(train.main(sys.argv[1:], model_factory=factory))
"""


def test_a_failed_rank_whose_teardown_hangs_writes_its_record_and_leaves(tmp_path):
    import os
    import subprocess
    import sys

    out = tmp_path / "r.json"
    # a rank that stayed in its hung teardown would outlive the timeout (TimeoutExpired fails the test)
    run = subprocess.run([sys.executable, "-c", HANGS_WHEN_RELEASED, *SMALL, "--out", str(out)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "KANSCALE_FAILED_EXIT_S": "2"})
    # the record first, then 2 s for the teardown: the rank leaves with 1 and the stack of where it hung
    assert run.returncode == 1, run.stderr[-2000:]
    rec = records.read(out)
    assert rec["status"] == "failed" and rec["reason"] == "Lost: the peer is gone"
    assert "Timeout (0:00:02)!" in run.stderr and "in __del__" in run.stderr


def test_a_step_time_point_stops_at_its_tolerance_and_says_so(tmp_path):
    """training.step_tolerance_pct: the point stops once its mean step's interval is within the
    tolerance (checked at each loss entry), well before its 40 epochs, and its record says why; no
    epoch was timed whole, so it has no epoch time."""
    out = tmp_path / "r.json"
    argv = ["--widths=2,4,1", "--grid-size=5", "--samples=1024", "--batch-per-rank=64", "--warmup-steps=2",
            "--epochs=40", "--device=cpu", "--loss-every-steps=10"]
    assert train.main([*argv, "--step-tolerance-pct=50", "--out", str(out)]) == 0
    rec = records.read(out)
    stop, steps = rec["timing"]["stop"], rec["timing"]["num_steps"]
    assert stop["reason"] == "tolerance" and stop["tolerance_pct"] == 50 and 0 <= stop["interval_pct"] <= 50
    # at least MIN_TIMED synced steps were timed (every second step is a comm probe), at a loss entry
    assert rec["timing"]["step_s"]["n"] >= 50 and steps % 10 == 0 and steps < 40 * 16
    assert rec["timing"]["epoch_time_s"] is None and "step_tolerance_pct" in rec["point"]["train"]


def test_a_step_time_point_that_cannot_meet_its_tolerance_stops_at_its_cap(tmp_path):
    out = tmp_path / "r.json"
    assert train.main([*SMALL[:-2], "--epochs=40", "--device=cpu", "--step-tolerance-pct=0.000001",
                       "--max-steps=30", "--out", str(out)]) == 0
    rec = records.read(out)
    assert rec["timing"]["stop"]["reason"] == "cap" and rec["timing"]["num_steps"] == 30
    plain = tmp_path / "p.json"
    assert train.main([*SMALL, "--out", str(plain)]) == 0
    rec = records.read(plain)  # a point without a tolerance: the whole work, and its id as before
    assert rec["timing"]["stop"] == {"reason": "work", "tolerance_pct": None, "interval_pct": None}
    assert "step_tolerance_pct" not in rec["point"]["train"]


def test_help_lists_every_flag_with_its_text(capsys):
    """--help formats every field's help: a literal % (the step tolerance's "95% interval") is text."""
    with pytest.raises(SystemExit) as e:
        train.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--step-tolerance-pct" in out and "95% interval" in out
