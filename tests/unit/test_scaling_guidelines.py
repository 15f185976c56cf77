"""Guideline rules on hand-built measurements: each gives advice, says "inconclusive" with what would
settle it, or says what is missing; never mixes experiments; never draws topology advice from ranks
that shared one host."""

import pytest
from scaling.common.columns import clean, clean_allreduce
from scaling.decide.guidelines import compute_guidelines
from scaling.decide.rules import more_repeats, side
from scaling.model.perf_model import fit_performance_model
from scaling.tables.all_tables import compute_tables
from scaling_data import allreduce_sweep, frame, row, settings, study

TH = {"efficiency_threshold": 0.75, "inter_node_penalty_pct": 10, "comm_share_pct": 20, "min_repeats": 2,
      "bootstrap_samples": 20}


def by_prefix(gs, prefix):
    return [g for g in gs if g["id"].startswith(prefix)]


def guidelines(df, model=None, **th):
    th = settings(**{**TH, **th})
    return compute_guidelines(compute_tables(df, th), th, model)


def test_every_guideline_has_text_rule_numbers_status():
    for g in guidelines(study()):
        assert g["text"] and g["rule"] and isinstance(g["numbers"], dict)
        assert g["status"] in ("advice", "inconclusive", "not_enough_data")
        assert ("settle" in g) == (g["status"] == "inconclusive")


def test_strong_efficiency_chooses_world_size_with_its_ci():
    (g,) = by_prefix(guidelines(study()), "strong-efficiency")
    assert g["status"] == "advice" and g["numbers"]["chosen_world_size"] == 2
    assert g["numbers"]["efficiency_by_world_size"] == {"1": 1.0, "2": 0.9, "4": 0.6}
    assert "2 ranks" in g["text"] and "90.0% [95% CI" in g["text"] and "60.0% [95% CI" in g["text"]
    # a lower threshold admits 4 ranks (its CI [51.7%, 68.3%] is above 50%)
    (g,) = by_prefix(guidelines(study(), efficiency_threshold=0.5), "strong-efficiency")
    assert g["numbers"]["chosen_world_size"] == 4 and "largest world size measured" in g["text"]
    # 95% lies inside the CI at 2 ranks [76.9%, 103.1%]: the data do not decide
    (g,) = by_prefix(guidelines(study(), efficiency_threshold=0.95), "strong-efficiency")
    assert g["status"] == "inconclusive"
    # clearly below at every world size: stay at the baseline
    df = frame([row("strong", 1, 1, r, 1000.0 + r) for r in range(2)] + [row("strong", 1, 2, r, 1000.0 + r) for r in range(2)])
    (g,) = by_prefix(guidelines(df), "strong-efficiency")
    assert g["status"] == "advice" and g["numbers"]["chosen_world_size"] == 1 and "no world size above 1" in g["text"]


def test_wide_ci_makes_the_guideline_inconclusive():
    # repeats 1000 and 1900 at 2 ranks: efficiency 0.725 with a t-based CI of about +-0.6 straddles 75%
    df = frame([row("strong", 1, 1, 0, 1000.0), row("strong", 1, 1, 1, 1000.0),
                row("strong", 1, 2, 0, 1000.0), row("strong", 1, 2, 1, 1900.0)])
    (g,) = by_prefix(guidelines(df), "strong-efficiency")
    assert g["status"] == "inconclusive" and g["text"].startswith("Inconclusive:")
    assert "→" not in g["text"]  # no advice
    assert "more repeat" in g["settle"] and "1x2" in g["settle"]
    lo, hi = g["numbers"]["efficiency_ci_by_world_size"]["2"]
    assert lo < 0.75 < hi


def test_too_few_repeats_is_inconclusive_with_how_many_more():
    (g,) = by_prefix(guidelines(study(), min_repeats=3), "strong-efficiency")
    assert g["status"] == "inconclusive" and "run 1 more repeat of 1x2" in g["settle"]
    assert more_repeats(2, 0.9, 0.8, 1.0, 0.75, 3) == 1
    # CI half-width 0.2 around 0.8, gap 0.05: n grows by (0.2 / 0.05)^2 = 16 -> 4 * 16 - 4 = 60 more
    assert more_repeats(4, 0.8, 0.6, 1.0, 0.75, 3) == 60
    assert side(0.8, 0.6, 1.0, 0.75) == "straddles" and side(0.9, 0.8, 1.0, 0.75) == "above"


def test_strong_not_enough_data():
    df = frame([row("strong", 1, 1), row("strong", 1, 2, status="failed", reason="timeout")])
    (g,) = by_prefix(guidelines(df), "strong-efficiency")
    assert g["status"] == "not_enough_data" and g["text"].startswith("Not enough data")


def test_inter_node_rule_with_ci():
    (g,) = by_prefix(guidelines(study(), inter_node_penalty_pct=8), "inter-node")
    assert g["status"] == "advice" and g["numbers"]["loss_pct"] == pytest.approx(20.0)
    assert g["numbers"]["keep_within_node"] is True and "keep jobs within one node" in g["text"]
    lo, hi = g["numbers"]["loss_pct_ci"]
    assert 8 < lo < 20 < hi <= 100
    # a threshold inside the CI: inconclusive, no advice either way
    (g,) = by_prefix(guidelines(study(), inter_node_penalty_pct=25), "inter-node")
    assert g["status"] == "inconclusive" and "keep_within_node" not in g["numbers"]


def test_simulated_inter_node_is_labelled_and_gives_no_topology_advice():
    # two "nodes" whose ranks all ran on one host (num_hosts 1)
    df = frame([row("comm", 1, 2, r, 1700.0 + r) for r in range(2)]
               + [row("comm", 2, 1, r, 1000.0 + r, num_hosts=1, exposed_comm_pct=40.0) for r in range(2)])
    tables = compute_tables(df, settings(**TH))
    assert set(tables["comm"]["placement_class"]) == {"intra-node", "simulated inter-node (one host)"}
    gs = compute_guidelines(tables, settings(**TH))
    (g,) = by_prefix(gs, "inter-node")
    assert g["status"] == "not_enough_data" and "simulated inter-node (one host)" in g["text"]
    assert "keep jobs" not in g["text"] and "spreading" not in g["text"]
    (share,) = by_prefix(gs, "comm-share-comm")
    assert "2x1 (simulated inter-node (one host))" in share["text"]


def test_inter_node_not_enough_data():
    df = frame([row("comm", 1, 2), row("comm", 2, 1, status="oom", reason="out of memory")])
    (g,) = by_prefix(guidelines(df), "inter-node")
    assert g["status"] == "not_enough_data"


def test_comm_share_per_experiment():
    gs = guidelines(study())
    (strong,) = by_prefix(gs, "comm-share-strong")
    assert strong["numbers"]["num_points_over"] == 1 and "1x4 30.0%" in strong["text"]
    (comm,) = by_prefix(gs, "comm-share-comm")
    assert comm["numbers"]["num_points_over"] == 1 and "2x1" in comm["text"] and "1x4" not in comm["text"]
    (g,) = by_prefix(guidelines(frame([row("strong", 1, 1)])), "comm-share-strong")
    assert g["status"] == "not_enough_data"


def test_per_rank_batch_within_one_experiment():
    # strong scaling at a fixed global batch: per-rank batch 512, 256, 128 at 1, 2, 4 ranks; compute-only
    # per-rank throughput b / no_sync step = 1111, 1000, 667 -> 128 is 60% of the best (< 75%)
    (g,) = by_prefix(guidelines(study()), "per-rank-batch-strong")
    assert g["numbers"]["falls_off_at_batch"] == 128 and g["numbers"]["min_good_batch"] == 256
    assert g["numbers"]["relative_to_best"]["128"] == pytest.approx(0.6)
    assert "keep the per-rank batch ≥ 256" in g["text"]


def test_per_rank_batch_refuses_to_mix_experiments():
    # the old rule compared these two (strong b = 64 vs weak b = 256 at 2 ranks); one batch per
    # experiment leaves nothing to compare
    df = frame([row("strong", 1, 2, samples_per_s=800.0, batch_per_rank=64),
                row("weak", 1, 2, samples_per_s=2000.0, batch_per_rank=256),
                row("weak", 1, 1, samples_per_s=1000.0, batch_per_rank=256)])
    gs = by_prefix(guidelines(df), "per-rank-batch")
    assert [g["status"] for g in gs] == ["not_enough_data", "not_enough_data"]
    assert all("not compared" in g["text"] for g in gs)


def _cuda_sweep(widths, peak, reps=2):
    return frame([row("model_size", 1, 1, r, 1000.0, hidden_width=w, num_params=84 * w, peak_mem_bytes=peak(w) + r,
                      mem_kind="cuda_max_allocated") for w in widths for r in range(reps)])


def test_memory_extrapolates_cuda_peaks_at_most_4x():
    # peak = 1e6 B + 400 B per parameter (84 params per unit width); largest measured 84 * 256 = 21,504 params
    (g,) = by_prefix(guidelines(_cuda_sweep((32, 64, 128, 256), lambda w: 1e6 + 400 * 84 * w)), "memory")
    n = g["numbers"]
    assert g["status"] == "advice" and n["bytes_per_param"] == pytest.approx(400, rel=1e-3)
    assert n["r2"] == pytest.approx(1.0) and n["largest_params"] == 21504
    # 16 GB would hold ~40M parameters, far beyond 4 x 21,504: not extrapolated
    assert n["max_params_fitting_gb"] == {"16": None, "40": None, "80": None}
    assert "beyond what this line may extrapolate" in g["text"] and "R²" in g["text"]
    # a slope steep enough that 16 GB is reached within 4x: the number is given
    (g,) = by_prefix(guidelines(_cuda_sweep((32, 64, 128, 256), lambda w: 1e6 + 2e5 * 84 * w)), "memory")
    assert g["numbers"]["max_params_fitting_gb"]["16"] == pytest.approx((16e9 - 1e6) / 2e5, abs=2)


def test_memory_two_widths_or_cpu_rss_are_not_extrapolated():
    (g,) = by_prefix(guidelines(_cuda_sweep((32, 128), lambda w: 1e6 + 400 * 84 * w)), "memory")
    assert g["status"] == "inconclusive" and "measure 1 more width" in g["settle"]
    (g,) = by_prefix(guidelines(study()), "memory")  # the study's peaks are CPU RSS
    assert g["status"] == "not_enough_data" and "no memory limit is extrapolated" in g["text"]
    assert "max_params_fitting_gb" not in g["numbers"] and "0.242 GiB at width 128" in g["text"]
    (g,) = by_prefix(guidelines(frame([row("model_size", 1, 1, status="missing")])), "memory")
    assert g["status"] == "not_enough_data"


def test_deployment_recommendation_from_the_model():
    df = study()
    df = df[df["experiment"] != "comm"]  # intra-node only, with a sweep at 2 and 4 ranks: every class validated
    sweep = allreduce_sweep(topologies=((1, 2, "intra-node"), (1, 4, "intra-node")))
    th = settings(**{**TH, "model_max_mape_pct": 1000})
    model = fit_performance_model(clean(df), clean_allreduce(sweep), th)
    (g,) = by_prefix(compute_guidelines(compute_tables(df, th), th, model), "deploy")
    assert g["id"] == "deploy-kan-bspline [2,64,1]" and g["status"] == "advice"
    assert "fastest with predicted efficiency ≥ 75%" in g["text"] and "lowest cost" in g["text"]
    # the study ran on CPUs: its cost is rank-hours, never GPU-hours, and never in e-notation
    assert "rank-hours" in g["text"] and "GPU-h" not in g["text"] and "e-0" not in g["text"]
    assert "model error: LOO MAPE" in g["text"]
    # a model whose held-out error exceeds the limit gives no advice
    th = settings(**{**TH, "model_max_mape_pct": 0.001})
    (g,) = by_prefix(compute_guidelines(compute_tables(df, th), th, model), "deploy")
    assert g["status"] == "inconclusive" and "LOO MAPE" in g["settle"]


def test_recommendation_is_inconclusive_while_a_compared_class_is_untested():
    # the study's inter-node class has one world size (2) and its sweep only there: holding p = 2 out
    # leaves no inter-node data, so its predictions are untested and the choice between classes is too
    df = study()
    th = settings(**{**TH, "model_max_mape_pct": 1000})
    model = fit_performance_model(clean(df), clean_allreduce(allreduce_sweep()), th)
    (g,) = by_prefix(compute_guidelines(compute_tables(df, th), th, model), "deploy")
    assert g["status"] == "inconclusive" and "inter-node" in g["settle"] and "three or more world sizes" in g["settle"]


def test_empty_tables():
    gs = compute_guidelines({}, settings(**TH))
    assert gs and all(g["status"] == "not_enough_data" for g in gs)


def test_durations_read_in_the_unit_that_fits():
    from scaling.common.fmt import seconds
    from scaling.decide.rules import ranks
    # a tiny study's predicted training read "0.0 s [0.0 s, 0.0 s]"
    assert seconds(0.0434) == "43.4 ms" and seconds(0.0004) == "0.400 ms"
    assert seconds(12.34) == "12.3 s" and seconds(4500) == "1.25 h"
    assert (ranks(1), ranks(8.0)) == ("1 rank", "8 ranks")


def test_a_pick_past_what_was_measured_needs_its_interval_to_clear_the_threshold():
    """The placement model's pick past the measured nodes is advice only when its efficiency interval
    clears the threshold; inside what was measured, its left-out error gates it as before."""
    from scaling.decide.deploy import recommendation
    pick = {"world_size": 32, "placement_class": "inter-node", "placement": "8x4", "gpu_hours": 1.0,
            "time_s": {"value": 100.0, "lo": 80.0, "hi": 150.0}, "efficiency": {"value": 0.8, "lo": 0.55, "hi": 1.0},
            "extrapolated": True, "extrapolation": "extrapolates: 8 nodes, past the 4 measured",
            "validation": "leave one placement out: 5.0% over p = 2, 4"}
    work = {"samples": 1000, "epochs": 1, "batch_rule": "fixed per-rank batch", "batch_per_rank": 12}
    model = {"models": {"m": {"work": work, "placements": {"inter-node": {
        "predictions": [pick], "validation": {"loo_mape_pct": 5.0, "world_sizes_validated": [2, 4]}}},
        "recommendation": {"efficiency_threshold": 0.75, "work": work, "fastest": pick, "cheapest": pick}}}}
    (g,) = recommendation(model, 25)
    assert g["status"] == "inconclusive" and "straddles 75% (extrapolates: 8 nodes" in g["settle"]
    inside = {**pick, "extrapolated": False, "extrapolation": None}
    model["models"]["m"]["recommendation"].update(fastest=inside, cheapest=inside)
    (g,) = recommendation(model, 25)
    assert g["status"] == "advice"


def test_a_single_rank_error_asks_for_what_could_settle_it():
    """The single-rank class has one world size: its left-out error is the compute of the DDP runs
    carried to one rank, which neither repeats nor more world sizes of that class can settle."""
    from scaling.decide.deploy import recommendation
    pick = {"world_size": 1, "placement_class": "single-rank", "gpu_hours": 1.0, "extrapolated": False,
            "time_s": {"value": 1.0, "lo": 0.9, "hi": 1.1}, "efficiency": {"value": 1.0},
            "validation": "LOO MAPE 76.2% over p = 1"}
    work = {"samples": 1000, "epochs": 1, "batch_rule": "fixed global batch", "global_batch": 128}
    placements = {"single-rank": {"predictions": [pick], "validation": {"loo_mape_pct": 76.2}},
                  "intra-node": {"predictions": [pick], "validation": {"loo_mape_pct": 30.0}}}
    model = {"models": {"m": {"work": work, "placements": placements,
                              "recommendation": {"efficiency_threshold": 0.75, "work": work, "fastest": pick,
                                                 "cheapest": pick}}}}
    (g,) = recommendation(model, 25)
    single, intra = g["settle"].split("; intra-node: ")
    assert g["status"] == "inconclusive" and "more repeats will not settle it" in single
    assert "more repeats or world sizes" not in single and intra.endswith("more repeats or world sizes")
