"""kan.train in one process (no launcher): argument errors and a failure that is recorded as data."""

import json

import pytest

from kan import train


def test_bad_arguments_name_the_flag(capsys):
    for argv, flag in ([["--widths", "2,x,1"], "--widths"], [["--grid-range=1,-1"], "--grid-range"],
                       [["--comm-probe-every", "1"], "--comm-probe-every"], [["--point", "{bad"], "--point"]):
        with pytest.raises(SystemExit):
            train.parse_args([*argv, "--out", "x.json"])
        assert flag in capsys.readouterr().err


def test_too_few_steps_is_a_failed_record(tmp_path):
    out = tmp_path / "r.json"
    rc = train.main(["--widths", "2,4,1", "--samples", "100", "--batch-per-rank", "64", "--out", str(out),
                     "--device", "cpu"])
    rec = json.loads(out.read_text())
    assert rc == 1 and rec["status"] == "failed" and "no timed step" in rec["reason"]


def test_single_process_record(tmp_path):
    out = tmp_path / "r.json"
    rc = train.main(["--widths", "2,4,1", "--samples", "1024", "--batch-per-rank", "64", "--warmup-steps", "2",
                     "--out", str(out), "--device", "cpu", "--point", '{"id": "x"}'])
    rec = json.loads(out.read_text())
    # no launcher: a one-rank group on an in-process store, DDP still wraps the model
    assert rc == 0 and rec["status"] == "ok" and rec["launcher"] == "none" and rec["backend"] == "gloo"
    assert rec["point"]["id"] == "x" and rec["timing"]["num_steps"] == 16
    assert rec["comm"]["probe_every"] == 2 and rec["comm"]["exposed_s"] is not None
    assert not list(tmp_path.glob(".r.json.*.tmp"))  # atomic write left no temp file


def test_no_ddp_baseline(tmp_path):
    out = tmp_path / "r.json"
    rc = train.main(["--widths", "2,4,1", "--samples", "1024", "--batch-per-rank", "64", "--warmup-steps", "2",
                     "--out", str(out), "--device", "cpu", "--no-ddp"])
    rec = json.loads(out.read_text())
    assert rc == 0 and rec["point"]["ddp"] is False
    assert rec["comm"]["probe_every"] == 0 and rec["comm"]["exposed_s"] is None  # nothing to measure
