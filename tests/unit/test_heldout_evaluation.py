"""The trainer's held-out evaluation, off the clock: the held-out curve in the record, its accuracy for a
classification table, and an evaluation that takes long leaving the step times and the training
time as they were (it runs between two steps' timers, and its time is counted apart)."""

import json

import numpy as np
import pytest
from fake_clock import on_loop_clock, ticking

from kan import loop, train
from kan.contract import record as records
from scaling.tables.tidy import collect

SMALL = ["--widths=2,8,2", "--grid-size=5", "--samples=1024", "--epochs=1", "--batch-per-rank=32",
         "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1"]


def _table(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 2))
    label = (x[:, 0] + x[:, 1] > 0).astype(int)  # a separable task: accuracy well above chance
    f = tmp_path / "t.csv"
    f.write_text("a,b,label\n" + "".join(f"{a:.5f},{b:.5f},{c}\n" for (a, b), c in zip(x, label)))
    return ["--data-kind=file", f"--data-path={f}", "--data-target=label", "--data-task=classification"]


def test_classification_records_a_held_out_curve_with_accuracy(tmp_path):
    out = tmp_path / "r.json"
    assert train.main([*SMALL, *_table(tmp_path), "--eval-every-samples=256", "--lr=0.02", "--out", str(out)]) == 0
    rec = records.read(out)  # still a valid record for the existing readers
    v = rec["validation"]
    assert v["every_samples"] == 256 and v["eval_time_s"] > 0
    assert [c["samples_seen"] for c in v["curve"]] == [256, 512, 768, 1024]
    assert all(0 <= c["val_accuracy"] <= 1 and c["val_loss"] > 0 for c in v["curve"])
    assert v["curve"][-1]["val_accuracy"] > 0.8, v["curve"]
    times = [c["train_time_s"] for c in v["curve"]]
    assert times == sorted(times) and times[-1] <= rec["timing"]["train_time_s"]
    assert rec["data"]["num_val"] == 60 and rec["data"]["classes"] == ["0", "1"] and rec["data"]["val_identical"]
    assert rec["loss"]["test_accuracy"] == v["curve"][-1]["val_accuracy"]
    # the tidy layer carries the curve to val_curves.csv
    vals = collect([rec["point"]], {rec["point"]["id"]: str(out)})["val_curves"]
    assert list(vals["samples_seen"]) == [256, 512, 768, 1024] and list(vals["val_accuracy"]) == [
        c["val_accuracy"] for c in v["curve"]]
    assert set(vals["data"]) == {"file t.csv:label"} and set(vals["global_batch"]) == {32}
    assert set(vals["model"]) == {"kan-bspline [2,8,2] on file t.csv:label"}  # the data are part of the model label


def test_default_records_have_no_validation_curve(tmp_path):
    out = tmp_path / "r.json"
    assert train.main([*SMALL, "--widths=2,8,1", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert "validation" not in rec and rec["data"]["kind"] == "synthetic" and rec["loss"]["test_accuracy"] is None


def test_a_slow_evaluation_leaves_step_and_training_time_unchanged(tmp_path, monkeypatch):
    """On a clock only the test moves: a training step costs 1 ms, each evaluation 50 ms. Were an
    evaluation inside a timed step, that step would take 51 ms; were it on the training clock,
    train_time_s would hold the 16 x 50 ms."""
    step_s, eval_s = 0.001, 0.05
    clock = on_loop_clock(monkeypatch)
    real = loop.evaluate

    def slow(*args, **kw):
        clock.advance(eval_s)
        return real(*args, **kw)

    monkeypatch.setattr(loop, "evaluate", slow)
    out = tmp_path / "r.json"
    assert train.main([*SMALL, "--widths=2,8,1", "--eval-every-samples=64", "--comm-probe-every=0",
                       "--out", str(out)], model_factory=ticking(clock, step_s)) == 0
    rec = json.loads(out.read_text())
    n = len(rec["validation"]["curve"])
    assert n == 16 and rec["validation"]["eval_time_s"] == pytest.approx(eval_s * n)
    assert rec["timing"]["step_time_s"] == pytest.approx(step_s), rec["timing"]["step_s"]
    assert rec["timing"]["step_s"]["p90"] == pytest.approx(step_s)
    num_steps = 1024 // 32  # every step of the one epoch, warm-up steps included
    assert rec["timing"]["train_time_s"] == pytest.approx(step_s * num_steps), rec["timing"]
    # each evaluation sees the training time so far: one step per 32 samples, no evaluation in it
    assert [c["train_time_s"] for c in rec["validation"]["curve"]] == pytest.approx(
        [step_s * c["samples_seen"] / 32 for c in rec["validation"]["curve"]])
