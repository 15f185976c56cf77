"""Time to a target loss on hand-built curves."""

import math

import pandas as pd
import pytest
from scaling.tables.all_tables import compute_tables
from scaling.tables.target import rule_text, targets, time_to_target
from scaling_data import frame, loss_curves, row, settings


def curve(points):
    return pd.DataFrame({"step": range(len(points)), "elapsed_s": [t for t, _ in points],
                         "train_loss": [loss for _, loss in points]})


def test_time_to_target_interpolates_linearly():
    c = curve([(1.0, 1.0), (2.0, 0.6), (3.0, 0.2), (4.0, 0.1)])
    # target 0.4 lies between (2 s, 0.6) and (3 s, 0.2): t = 2 + 1 * (0.6 - 0.4) / (0.6 - 0.2) = 2.5 s
    assert time_to_target(c, 0.4) == pytest.approx(2.5)
    assert time_to_target(c, 0.2) == pytest.approx(3.0)  # reached exactly at an entry
    assert time_to_target(c, 2.0) == pytest.approx(1.0)  # already below at the first entry
    assert math.isnan(time_to_target(c, 0.05))  # never reached


def test_target_is_factor_times_world1_final_loss_unless_given():
    df = frame([row("strong", 1, 1, 0, 1000.0, batch_per_rank=512), row("strong", 1, 1, 1, 1000.0, batch_per_rank=512),
                row("strong", 1, 2, 0, 1800.0, batch_per_rank=256)])
    c = loss_curves(df)
    final = c[c["world_size"] == 1].sort_values("step").groupby("rep")["train_loss"].last().mean()
    key = ("strong", "kan-bspline [2,64,1]")
    assert targets(c, settings(target_loss_factor=1.5))[key] == pytest.approx(1.5 * final)
    assert targets(c, settings(target_loss=0.3))[key] == 0.3
    assert "1.5 ×" in rule_text(settings(target_loss_factor=1.5)) and "0.3" in rule_text(settings(target_loss=0.3))


def test_strong_table_gains_time_to_target_and_its_speedup():
    df = frame([row("strong", 1, 1, r, 1000.0, batch_per_rank=512) for r in (0, 1)]
               + [row("strong", 1, 2, r, 1800.0, batch_per_rank=256) for r in (0, 1)])
    t = compute_tables(df, settings(target_loss=0.5, bootstrap_samples=20), loss_curves(df))["strong"]
    one, two = (t[t["world_size"] == p].iloc[0] for p in (1, 2))
    assert one["target_loss"] == 0.5 and one["time_to_target_s"] > 0 and two["time_to_target_s"] > 0
    assert two["time_to_target_speedup"] == pytest.approx(one["time_to_target_s"] / two["time_to_target_s"])
    # an unreachable target: "not reached", no time, no speedup
    t = compute_tables(df, settings(target_loss=1e-6, bootstrap_samples=20), loss_curves(df))["strong"]
    assert (t["time_to_target_note"] == "not reached").all() and t["time_to_target_s"].isna().all()
    # no curves at all: the columns exist and say so
    t = compute_tables(df, settings(bootstrap_samples=20))["strong"]
    assert (t["time_to_target_note"] == "no loss curve").all()
