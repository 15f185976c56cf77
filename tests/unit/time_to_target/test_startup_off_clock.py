"""The fair clock: one-time start-up costs (numba loading its kernels, thread
pools, first allocations) are paid on untimed steps whose effect is then undone, so they are
recorded apart (timing.startup_s) and neither the training time nor the time to a held-out target
holds them, while no sample is trained for free."""

import json

import numpy as np
import pandas as pd
import pytest
from fake_clock import on_loop_clock, ticking

from kan import loop, train
from scaling.tables.heldout import first_reach

SMALL = ["--widths=2,8,2", "--grid-size=5", "--samples=1024", "--epochs=2", "--batch-per-rank=32",
         "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1", "--eval-every-samples=128", "--lr=0.02",
         "--comm-probe-every=0"]
STEP_S, DELAY_S = 0.001, 0.6


def _table(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 2))
    label = (x[:, 0] + x[:, 1] > 0).astype(int)
    f = tmp_path / "t.csv"
    f.write_text("a,b,label\n" + "".join(f"{a:.5f},{b:.5f},{c}\n" for (a, b), c in zip(x, label)))
    return ["--data-kind=file", f"--data-path={f}", "--data-target=label", "--data-task=classification"]


def _run(tmp_path, name, factory=None, extra=()):
    out = tmp_path / f"{name}.json"
    assert train.main([*SMALL, *_table(tmp_path), *extra, "--out", str(out)], model_factory=factory) == 0
    return json.loads(out.read_text())


def test_a_one_time_delay_in_the_first_step_leaves_the_time_to_target_as_it_was(tmp_path, monkeypatch):
    """On a clock only the test moves (a step costs STEP_S): the first forward of `slow` costs
    DELAY_S more, like a kernel library that loads its compiled code on first use."""
    clock = on_loop_clock(monkeypatch)
    plain = _run(tmp_path, "plain", ticking(clock, STEP_S))
    slow = _run(tmp_path, "slow", ticking(clock, STEP_S, first_extra_s=DELAY_S))
    curves = [pd.DataFrame(r["validation"]["curve"]) for r in (plain, slow)]
    # the same model at every evaluation: the start-up trained nothing (weights and Adam restored)
    assert [c["val_loss"] for c in plain["validation"]["curve"]] == [c["val_loss"] for c in slow["validation"]["curve"]]
    assert plain["weights_checksum"] == slow["weights_checksum"]
    target = float(curves[0]["val_loss"].iloc[len(curves[0]) // 2])  # reached halfway through the run
    hits = [first_reach(c, "val_loss", target) for c in curves]
    assert hits[0] is not None and hits[0][1] == hits[1][1]  # same samples to target
    # the delay is on the start-up, not on the clock: were it counted, slow would be DELAY_S later
    assert slow["timing"]["startup_s"] >= DELAY_S
    first_steps = [r["timing"]["startup_parts"]["first_steps"] for r in (plain, slow)]
    assert first_steps[1] == pytest.approx(first_steps[0] + DELAY_S), first_steps
    assert hits[1][0] == pytest.approx(hits[0][0]) and hits[0][0] > 0, hits
    assert slow["timing"]["train_time_s"] == pytest.approx(plain["timing"]["train_time_s"])
    assert slow["timing"]["startup_steps"] == loop.STARTUP_STEPS


def test_the_start_up_trains_nothing(tmp_path):
    """The weights after the run equal those of a run whose start-up steps did nothing at all."""
    with_startup = _run(tmp_path, "a")
    real = loop._startup
    try:
        loop._startup = lambda *a, **k: 0.0
        without = _run(tmp_path, "b")
    finally:
        loop._startup = real
    assert with_startup["weights_checksum"] == pytest.approx(without["weights_checksum"], rel=0, abs=1e-9)
    assert with_startup["loss"]["test"] == without["loss"]["test"]
    parts = without["timing"]["startup_parts"], with_startup["timing"]["startup_parts"]
    assert parts[0]["first_steps"] == 0.0 and parts[1]["first_steps"] > 0  # the steps ran in one only
