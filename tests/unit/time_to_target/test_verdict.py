"""The time-to-accuracy verdict (decide/accuracy.py) on held-out curves of known truth: the soonest
world size, decided or not, world sizes that never reach the target, the KAN against its MLP at one
common target, and that common target (the worst reference of an experiment's models)."""

import pandas as pd
import pytest

from scaling.common.columns import VAL_CURVE_COLUMNS
from scaling.decide.accuracy import time_to_accuracy
from scaling.decide.guidelines import compute_guidelines
from scaling.decide.rules import Decide
from scaling.tables.all_tables import compute_tables
from scaling_data import frame, row, settings

KAN, MLP = "kan-bspline [2,64,1]", "mlp_matched [2,8,1]"
WIDTH = {KAN: 64, MLP: 8}  # row() names a point by its hidden width: the two models' ids differ
REACH = [0.6, 0.92, 0.95, 0.95]  # held-out accuracy at evaluations 1..4 (every 1000 samples)
MISS = [0.6, 0.7, 0.8, 0.85]


def curves_and_rows(spec: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """spec: {(model, world size): (accuracies or one list per repeat, seconds per 1000 samples per repeat)}."""
    rows, curves = [], []
    for (model, p), (acc, secs) in spec.items():
        for rep, s in enumerate(secs):
            r = row("strong", 1, p, rep, 1000.0 * p, model=model, hidden_width=WIDTH[model],
                    batch_per_rank=128 // p)
            rows.append(r)
            accs = acc[rep] if isinstance(acc[0], list) else acc
            for k, a in enumerate(accs, 1):
                curves.append({"point_id": r["point_id"], "experiment": "strong", "model": model,
                               "data": "csv", "world_size": p, "nodes": 1, "gpus_per_node": p,
                               "placement_class": "", "ddp": True, "rep": rep, "global_batch": 128,
                               "step": 10 * k, "samples_seen": 1000 * k, "train_time_s": k * s,
                               "val_loss": 1 - a, "val_accuracy": a, "eval_time_s": 0.1})
    return frame(rows), pd.DataFrame(curves, columns=VAL_CURVE_COLUMNS)


def verdict(spec: dict, target: dict, min_repeats: int = 3) -> dict:
    df, curves = curves_and_rows(spec)
    tables = compute_tables(df, settings(target=target, bootstrap_samples=20), val_curves=curves)
    return {g["id"]: g for g in time_to_accuracy(tables, Decide(min_repeats, 0.95))}


CLEAR = {(KAN, 1): (REACH, [1.0, 1.01, 1.02]), (KAN, 2): (REACH, [0.5, 0.505, 0.51]),
         (KAN, 4): (MISS, [0.3, 0.3, 0.3]),
         (MLP, 1): (REACH, [0.2, 0.202, 0.204]), (MLP, 2): (REACH, [0.3, 0.303, 0.306])}


def test_the_soonest_world_size_is_decided_and_one_that_never_reaches_is_named():
    g = verdict(CLEAR, {"metric": "val_accuracy", "value": 0.9})
    kan = g[f"time-to-accuracy-strong-{KAN}"]
    # reached at the 2nd evaluation: 2 x 0.5 s at 2 ranks, 2 x 1.0 s at 1 rank (2x as long)
    assert kan["status"] == "advice" and kan["numbers"]["soonest"]["world_size"] == 2
    assert kan["numbers"]["soonest"]["time_to_target_s"] == pytest.approx(1.01)
    (other,) = kan["numbers"]["others"]
    assert other["world_size"] == 1 and other["ratio"] == pytest.approx(2.0, rel=1e-3) and other["ci"][0] > 1
    # 4 ranks were faster a step but never reached 0.9: not a candidate, and said
    assert "4 ranks (1x4): not reached" in kan["text"] and "2 ranks (1x2) is soonest" in kan["text"]
    mlp = g[f"time-to-accuracy-strong-{MLP}"]
    assert mlp["status"] == "advice" and mlp["numbers"]["soonest"]["world_size"] == 1
    vs = g[f"time-to-accuracy-strong-{KAN}-vs-{MLP}"]
    # KAN at 2 ranks (1.01 s) against MLP at 1 rank (0.404 s): 2.5x slower, the interval above 1
    assert vs["status"] == "advice" and vs["numbers"]["ratio_kan_over_mlp"] == pytest.approx(2.5, rel=1e-3)
    assert vs["numbers"]["ci"][0] > 1 and "slower than" in vs["text"]
    assert vs["numbers"]["kan"]["world_size"] == 2 and vs["numbers"]["mlp"]["world_size"] == 1


def test_overlapping_times_are_inconclusive_with_what_would_settle_them():
    spec = {(KAN, 1): (REACH, [1.0, 0.9, 1.1]), (KAN, 2): (REACH, [0.85, 0.95, 0.8])}
    g = verdict(spec, {"metric": "val_accuracy", "value": 0.9})[f"time-to-accuracy-strong-{KAN}"]
    assert g["status"] == "inconclusive" and "Inconclusive" in g["text"]
    assert g["settle"].startswith("run ") and g["settle_points"]
    # the soonest is the least mean: 2 ranks (0.867 x 2 s) before 1 rank (1.0 x 2 s)
    assert g["numbers"]["soonest"]["world_size"] == 2 and not g["numbers"]["others"][0]["decided"]


def test_too_few_repeats_do_not_decide_and_a_model_that_never_reaches_has_no_verdict():
    spec = {(KAN, 1): (REACH, [1.0, 1.01]), (KAN, 2): (REACH, [0.5, 0.505]), (MLP, 1): (MISS, [0.2, 0.2])}
    g = verdict(spec, {"metric": "val_accuracy", "value": 0.9}, min_repeats=3)
    assert g[f"time-to-accuracy-strong-{KAN}"]["status"] == "inconclusive"
    assert g[f"time-to-accuracy-strong-{MLP}"]["status"] == "not_enough_data"
    assert f"time-to-accuracy-strong-{KAN}-vs-{MLP}" not in g  # nothing to set the KAN against


def test_the_kan_sooner_than_the_mlp_reads_as_sooner():
    spec = {(KAN, 1): (REACH, [0.1, 0.101, 0.102]), (MLP, 1): (REACH, [0.3, 0.303, 0.306])}
    vs = verdict(spec, {"metric": "val_accuracy", "value": 0.9})[f"time-to-accuracy-strong-{KAN}-vs-{MLP}"]
    assert vs["status"] == "advice" and "3.00× [95% CI" in vs["text"] and "sooner than" in vs["text"]
    assert vs["numbers"]["ratio_kan_over_mlp"] == pytest.approx(1 / 3, rel=1e-3)


def test_from_reference_gives_every_model_of_an_experiment_the_worse_reference():
    # the KAN ends at 0.95 (one rank), the MLP at 0.99: both get 0.9 x 0.95 = 0.855
    spec = {(KAN, 1): (REACH, [1.0, 1.0, 1.0]), (MLP, 1): ([0.6, 0.8, 0.9, 0.99], [0.2, 0.2, 0.2])}
    df, curves = curves_and_rows(spec)
    t = compute_tables(df, settings(target={"metric": "val_accuracy", "from_reference": 0.9}, bootstrap_samples=20),
                       val_curves=curves)["strong"]
    assert set(t["target_value"].round(6)) == {0.855} and set(t["target_reference_value"].round(6)) == {0.95}
    # the MLP reaches 0.855 at its 3rd evaluation (0.6 s), not at 0.9 x 0.99 = 0.891 (also the 3rd)
    mlp = t[t["model"] == MLP].iloc[0]
    assert mlp["time_to_target_s"] == pytest.approx(0.6)
    # a loss target: the worse reference is the higher loss
    t = compute_tables(df, settings(target={"metric": "val_loss", "from_reference": 1.5}, bootstrap_samples=20),
                       val_curves=curves)["strong"]
    assert set(t["target_reference_value"].round(6)) == {0.05}


def test_the_guidelines_stage_carries_the_verdict_and_none_without_a_target():
    df, curves = curves_and_rows(CLEAR)
    target = {"metric": "val_accuracy", "value": 0.9}
    with_target = compute_guidelines(compute_tables(df, settings(target=target, bootstrap_samples=20),
                                                    val_curves=curves), settings(target=target))
    assert sum(g["id"].startswith("time-to-accuracy") for g in with_target) == 3
    plain = compute_guidelines(compute_tables(df, settings(bootstrap_samples=20), val_curves=curves), settings())
    assert not any(g["id"].startswith("time-to-accuracy") for g in plain)


def _model_json(steps_s: dict, loo=5.0) -> dict:
    """model.json's strong-work predictions of KAN's intra-node step time: {world size: (s, lo, hi)}."""
    preds = [{"world_size": p, "step_time_s": {"value": v, "lo": lo, "hi": hi}, "extrapolated": p > 2}
             for p, (v, lo, hi) in steps_s.items()]
    return {"models": {KAN: {"work": {"batch_rule": "fixed global batch", "global_batch": 128},
                             "placements": {"intra-node": {"validation": {"loo_mape_pct": loo},
                                                           "predictions": preds}}}}}


def predicted(steps_s: dict, loo=5.0, clock: dict | None = None) -> dict:
    """The predicted guideline; `clock`: {world size: (k, start s)} sets the strong table's clock fit
    (rate = k x the median step); None: k = 1 and no start, the bare S x step arithmetic."""
    spec = {(KAN, 1): (REACH, [1.0, 1.01, 1.02]), (KAN, 2): (REACH, [0.5, 0.505, 0.51])}
    df, curves = curves_and_rows(spec)
    tables = compute_tables(df, settings(target={"metric": "val_accuracy", "value": 0.9}, bootstrap_samples=20),
                            val_curves=curves)
    t = tables["strong"]
    for i, r in t.iterrows():
        k, start = (clock or {}).get(int(r["world_size"]), (1.0, 0.0))
        t.at[i, "clock_step_s_mean"], t.at[i, "clock_start_s_mean"] = k * r["step_time_s_mean"], start
    out = {g["id"]: g for g in time_to_accuracy(tables, Decide(3, 0.95), _model_json(steps_s, loo))}
    return out[f"time-to-accuracy-predicted-strong-{KAN}"]


def test_the_fixtures_clock_is_fitted_from_the_curves():
    """tables/heldout.clock_line: the curves above run 1000 samples (10 steps) in s seconds with no
    start, so the strong table's clock is s / 10 a step and starts at 0."""
    df, curves = curves_and_rows({(KAN, 1): (REACH, [1.0, 1.0, 1.0]), (KAN, 2): (REACH, [0.5, 0.5, 0.5])})
    t = compute_tables(df, settings(target={"metric": "val_accuracy", "value": 0.9}, bootstrap_samples=20),
                       val_curves=curves)["strong"].sort_values("world_size")
    assert list(t["clock_step_s_mean"]) == [pytest.approx(0.1), pytest.approx(0.05)]
    assert list(t["clock_start_s_mean"]) == [pytest.approx(0.0, abs=1e-12)] * 2


def test_the_clock_ratio_and_start_enter_the_prediction_from_the_nearest_measured_world_size():
    # the clock ran 1.2x the median step at 1 rank (single-rank, no model class here) and 1.5x with a
    # 0.2 s start at 2 ranks (intra-node): 4 ranks intra-node take 2's terms
    g = predicted({2: (0.032, 0.03, 0.034), 4: (0.08, 0.07, 0.09)}, clock={1: (1.2, 0.1), 2: (1.5, 0.2)})
    four = next(p for p in g["numbers"]["predictions"] if p["world_size"] == 4)
    assert four["time_to_target_s"] == pytest.approx(0.2 + 15.625 * 1.5 * 0.08, abs=1e-5)
    assert four["band"] == [pytest.approx(0.2 + 15.625 * 1.5 * 0.07, abs=1e-5),
                            pytest.approx(0.2 + 15.625 * 1.5 * 0.09, abs=1e-5)]
    assert four["clock_ratio"] == pytest.approx(1.5) and four["clock_from"] == "2 ranks, intra-node"
    assert "1.50x the median step with a 200 ms start at 2 ranks, intra-node" in g["text"]


def test_a_class_never_measured_takes_the_smallest_multi_rank_clock_ratio():
    from scaling.decide.totarget import clock_for
    terms = [{"world_size": 1, "placement_class": "single-rank", "k": 1.0, "start_s": 0.0},
             {"world_size": 2, "placement_class": "intra-node", "k": 1.8, "start_s": 0.01},
             {"world_size": 4, "placement_class": "intra-node", "k": 2.5, "start_s": 0.02}]
    assert clock_for(terms, 8, "inter-node")["k"] == 1.8  # the one that predicts its ranks soonest
    assert clock_for(terms, 3, "intra-node")["world_size"] == 2  # nearest below
    assert clock_for(terms, 16, "intra-node")["world_size"] == 4
    assert clock_for([], 4, "intra-node") is None


def test_predicted_time_to_target_is_steps_times_the_models_step_time_and_says_when_more_ranks_stop_paying():
    # the target is reached at 2000 samples = 15.625 steps of the global batch 128, at every world size;
    # 2 ranks measured 1.01 s. 4 ranks predicted at 0.08 s a step: 1.25 s [1.09, 1.41], slower
    g = predicted({1: (0.064, 0.06, 0.07), 2: (0.032, 0.03, 0.034), 4: (0.08, 0.07, 0.09)})
    assert g["status"] == "advice" and "predicted" in g["text"] and "not measured" in g["text"]
    assert g["numbers"]["steps_to_target"][0] == pytest.approx(15.62, abs=0.01)
    four = next(p for p in g["numbers"]["predictions"] if p["world_size"] == 4)
    assert four["time_to_target_s"] == pytest.approx(1.25) and four["extrapolated"]
    assert four["band"] == [pytest.approx(15.625 * 0.07), pytest.approx(15.625 * 0.09)]
    # at the measured 2 ranks the prediction (0.5 s) is checked against the measured 1.01 s: -50%
    two = next(p for p in g["numbers"]["predictions"] if p["world_size"] == 2)
    assert two["error_vs_measured_pct"] == pytest.approx(100 * (0.5 / 1.01 - 1), abs=0.1)
    assert "more ranks make training to this target slower" in g["text"]


def test_a_sooner_prediction_or_an_unvalidated_model_is_inconclusive_and_asks_for_the_measurement():
    # 4 ranks predicted at 0.04 s a step: 0.625 s [0.55, 0.70] < 1.01 s measured at 2: measure it
    g = predicted({2: (0.032, 0.03, 0.034), 4: (0.04, 0.035, 0.045)})
    assert g["status"] == "inconclusive" and g["settle"].startswith("measure 4 ranks (intra-node)")
    assert "sooner than the measured soonest" in g["text"]
    # slower, but the model's communication term was never validated (no leave-one-out error)
    g = predicted({2: (0.032, 0.03, 0.034), 4: (0.08, 0.07, 0.09)}, loo=None)
    assert g["status"] == "inconclusive" and "not validated" in g["text"]


def test_a_model_that_overshoots_everywhere_cannot_turn_its_bias_into_advice():
    # the model puts 2 ranks at 0.08 s a step (1.25 s, above the 1.01 s measured) and 4 ranks at 0.085 s
    # (1.33 s [1.17, 1.48]): above the measured 1.01 s, but inside its own band at 2 ranks [1.17, 1.41]
    g = predicted({2: (0.08, 0.075, 0.09), 4: (0.085, 0.075, 0.095)})
    assert g["status"] == "inconclusive", g["text"]


def test_weak_steps_follow_the_critical_batch_curve_anchored_at_the_largest_measured_world_size():
    """E(B) = E_a (1 + B / B_crit) / (1 + B_a / B_crit), S = E / B: with B_crit 128 and 2 ranks of 64
    (B_a = 128) needing 2,560 samples, 4 ranks (B = 256) need 2,560 x 3 / 2 = 3,840 samples, 15 steps;
    the band takes E's CI and both ends of B_crit's interval; an unbounded end is E flat."""
    from scaling.decide.totarget import weak_steps
    reached = pd.DataFrame({"world_size": [1, 2], "batch_per_rank": [64, 64], "samples_to_target": [2048.0, 2560.0],
                            "samples_to_target_ci_lo": [2048.0, 2400.0], "samples_to_target_ci_hi": [2048.0, 2700.0]})
    crit = {"status": "ok", "b_crit": 128.0, "ci": [64.0, 256.0]}
    steps, text = weak_steps(reached, crit)
    s, lo, hi = steps(4)
    assert s == pytest.approx(3840 / 256)
    # B_crit 64: f = (1 + 4) / (1 + 2) = 5/3; 256: (1 + 1) / (1 + 0.5) = 4/3
    assert lo == pytest.approx(2400 * 4 / 3 / 256) and hi == pytest.approx(2700 * 5 / 3 / 256)
    assert steps(2)[0] == pytest.approx(2560 / 128)  # the anchor itself
    assert "anchored at 2 ranks: 2560 samples at global batch 128" in text
    _, lo, hi = weak_steps(reached, {**crit, "ci": [64.0, None]})[0](4)
    assert lo == pytest.approx(2400 / 256)  # no growth: the same samples in fewer steps
    assert "add experiments.batch" in weak_steps(reached, None)
    assert weak_steps(reached, {"status": "not enough batches", "why": "2 batch(es)"}).startswith(
        "the critical batch is not enough batches")


def test_a_weak_study_with_a_target_but_no_batch_experiment_is_told_what_to_add():
    from scaling.decide.totarget import predicted_guideline
    reached = pd.DataFrame({"world_size": [1], "batch_per_rank": [64], "samples_to_target": [2048.0],
                            "time_to_target_s": [1.0]})
    model_json = {"models": {KAN: {"weak_work": {"batch_rule": "fixed per-rank batch", "batch_per_rank": 64},
                                   "placements": {}}}}
    g = predicted_guideline("weak", KAN, reached, reached.iloc[0], model_json, None)
    assert g["status"] == "not_enough_data" and "experiments.batch" in g["text"]
