"""The figure under the answer (scaling/report/plots_headline.py): time to the held-out target where the
study predicts it, step time otherwise, and a reason instead of a figure when nothing was measured."""

import pandas as pd
import pytest
from scaling.report import plotkit as kit
from scaling.report.plots_headline import NAME, TARGET_TITLE, formula, plot_headline

M = "kan-bspline [2,8,1]"


def strong(with_target: bool) -> pd.DataFrame:
    rows = []
    for p, cls in ((1, "single-rank"), (2, "intra-node")):
        r = {"model": M, "ddp": True, "world_size": p, "placement_class": cls, "nodes": 1, "gpus_per_node": p,
             "step_time_s_mean": 1e-3 * p, "step_time_s_ci_lo": 0.9e-3 * p, "step_time_s_ci_hi": 1.1e-3 * p}
        if with_target:
            r.update(target_metric="val_loss", time_to_target_s=0.05 * p, time_to_target_s_ci_lo=0.04 * p,
                     time_to_target_s_ci_hi=0.06 * p)
        rows.append(r)
    return pd.DataFrame(rows)


def predicted() -> list[dict]:
    preds = [{"world_size": p, "placement_class": "intra-node", "time_to_target_s": 0.05 * p,
              "band": [0.045 * p, 0.055 * p], "steps_to_target": 96.0, "clock_ratio": 1.29, "clock_start_s": 0.008}
             for p in (1, 2, 4)]
    return [{"id": f"time-to-accuracy-predicted-strong-{M}", "status": "inconclusive",
             "numbers": {"predictions": preds}}]


@pytest.fixture(autouse=True)
def theme():
    kit.theme()


def test_with_a_predicted_target_the_headline_is_time_to_target(tmp_path):
    m = plot_headline({"strong": strong(True), "model": None, "guidelines": predicted()}, tmp_path)[NAME]
    assert m["title"] == TARGET_TITLE and (tmp_path / m["file"]).stat().st_size > 10_000
    assert "val_loss" in m["caption"] and "beyond the largest world size measured" in m["caption"]


def test_without_one_it_is_step_time_and_without_data_it_says_why(tmp_path):
    m = plot_headline({"strong": strong(False), "model": None, "guidelines": None}, tmp_path)[NAME]
    assert m["title"].startswith("Step time") and "file" in m
    gone = plot_headline({"strong": pd.DataFrame(), "model": None}, tmp_path)[NAME]
    assert "missing" in gone and "file" not in gone


def test_the_fitted_formula_in_the_legend():
    model_json = {"models": {M: {"num_params": 1000, "compute": {"params": {
        "c0_s": {"value": 3.5e-4}, "per_sample_s": {"value": 5e-7}, "per_sample_param_s": {"value": 7e-10}}},
        "placements": {"intra-node": {"comm": {"exposure": {"value": 3.54}}}}}}}
    assert formula(model_json, M, "intra-node") == "0.35 ms + 1.2 µs·b + 3.5 × all-reduce(p)"
    assert formula(None, M, "intra-node") == "not fitted"
