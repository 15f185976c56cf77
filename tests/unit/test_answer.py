"""The answer's words and numbers (scaling/report/answer.py): intervals rounded to what they support,
one placement notation, and with a held-out target the verdicts a deployment is decided by (where each
model reaches the target soonest, and the KAN against its baseline) instead of the rule texts."""

from scaling.common.fmt import cost, interval, seconds
from scaling.report.answer import answer_context, comparison, imported_settle, to_target, where_text

TARGET = "val_loss ≤ 0.09236"
KAN, MLP = "kan-bspline [30,8,2] on t", "mlp_matched [30,8,2] on t"


def soonest(model: str, t: float, ci, ratio, rci, status="advice", settle=None) -> dict:
    g = {"id": f"time-to-accuracy-strong-{model}", "topic": "time-to-accuracy", "status": status,
         "text": "(the rule's own words)", "numbers": {
             "target": TARGET, "soonest": {"world_size": 1, "placement": "1x1", "time_to_target_s": t, "ci": ci},
             "others": [{"world_size": 2, "placement": "1x2", "ratio": ratio, "ci": rci, "decided": True}]}}
    return {**g, "settle": settle} if settle else g


def test_intervals_keep_the_digits_their_width_supports_and_two_of_their_own():
    assert interval(3.9312, 0.811, 19.0571, 1, "×") == "3.9 [0.81, 19]×"  # the low end must not round onto 1
    assert interval(1.6321, 1.6234, 1.6441, 1, "×") == "1.632 [1.623, 1.644]×"
    assert interval(0.08, 0.0106, 0.6026, 100, "%", floor=0.0) == "8.0% [1.1%, 60%]"
    assert interval(0.3, -0.2, 0.9, 100, "%", floor=0.0) == "30% [0%, 90%]"  # a share cannot be negative
    assert seconds(0.0434, 0.0387, 0.0498) == "43 [39, 50] ms" and seconds(12.34, 11.0, 13.9) == "12.3 [11.0, 13.9] s"
    assert interval(None) == "–" and seconds(float("nan")) == "–"


def test_one_placement_notation_and_the_cost_in_its_units():
    assert where_text(1, 1, 1, "GPU") == "1 GPU" and where_text(8, 2, 4, "GPU") == "2 nodes x 4 GPUs"
    assert where_text(2, 1, 2, "CPU") == "1 node x 2 CPU ranks" and where_text(4, device="GPU") == "4 GPUs"
    assert cost(2.5, "GPU") == "2.5 GPU-hours" and cost(1e-5, "CPU") == "0.000010 rank-hours"


def test_the_time_to_target_verdict_in_plain_words():
    a = to_target(soonest(KAN, 0.0736, [0.008, 0.139], 5.17, [1.26, 21.26], "inconclusive", "run 1 more repeat"),
                  "CPU")
    assert a["where"] == "1 CPU rank" and a["time"] == "74 [8.0, 139] ms"
    assert a["others"] == ["1 node x 2 CPU ranks take 5.2 [1.3, 21]× as long"]
    assert a["status"] == "inconclusive" and a["settle"] == "run 1 more repeat"
    assert to_target({"status": "not_enough_data", "numbers": {}}, "CPU") is None and to_target(None, "CPU") is None


def test_the_kan_against_its_baseline_comes_first_and_rule_texts_stay_in_their_section():
    vs = {"id": f"time-to-accuracy-strong-{KAN}-vs-{MLP}", "topic": "time-to-accuracy", "status": "inconclusive",
          "text": "(rule text)", "settle": "run 18 more repeats",
          "numbers": {"target": TARGET, "ratio_kan_over_mlp": 3.93, "ci": [0.81, 19.06],
                      "kan": {"world_size": 1, "time_to_target_s": 0.07}, "mlp": {"world_size": 1,
                                                                                "time_to_target_s": 0.02}}}
    guidelines = [soonest(KAN, 0.0736, [0.008, 0.139], 5.17, [1.26, 21.26]), vs]
    c = comparison(guidelines, "CPU")
    assert c["text"].startswith(f"To {TARGET}, {KAN} takes 3.9 [0.81, 19]× as long as {MLP}")
    assert c["status"] == "inconclusive" and c["settle"] == "run 18 more repeats"
    status = {"ok": 83, "planned": 84, "failed": 1, "failed_kinds": {"killed": 1}, "contended": [{}] * 3}
    ctx = answer_context({"model": None, "strong": None, "points": None}, guidelines, status)
    assert ctx["items"][0]["text"] == c["text"] and "(rule text)" not in str(ctx["items"])
    assert ctx["runs"] == {"text": "83 of 84 runs ok", "tiles": ["failed"], "contended": 3}


def test_model_error_keeps_two_digits_below_ten_percent():
    from scaling.common.fmt import error_text
    assert [error_text(x) for x in (0.49, 3.14159, 12.4, None)] == ["0.49%", "3.1%", "12%", "not validated"]


def test_imported_runs_get_a_short_line_and_a_note_after_the_verdicts():
    from scaling.report.run_summary import imported_text, placement_text
    prov = {"imported": {"num_records": 21, "paths": ["runs/"], "citations": ["arXiv 2609.07740"],
                         "hardware": ["NVIDIA A100"], "lacks": ["repeats (one run per point)"]}}
    assert placement_text(prov) == "NVIDIA A100 elsewhere, not by kanscale: 21 imported runs"
    assert imported_text(prov) == ("The 21 runs were imported from runs/ (arXiv 2609.07740), not measured by "
                                   "kanscale. The analysis could not use what they lack: repeats (one run per point).")
    assert imported_text({"hostnames": ["h"]}) is None


def test_why_sooner_gives_the_model_totals_without_a_model_only_interval():
    from scaling.report.answer import _sooner_why
    rec = {"fastest": {"world_size": 8, "time_s": {"value": 146.57, "lo": 146.51, "hi": 146.62}},
           "cheapest": {"world_size": 1, "time_s": {"value": 890.9, "lo": 890.3, "hi": 891.6}},
           "work": {"samples": 100000, "epochs": 40, "batch_rule": "fixed per-rank batch"}}
    text = _sooner_why(rec, 1, "GPU")
    # the bootstrap of the model alone was narrower than the runs' spread: the measured totals fell outside it
    assert "147 s against 891 s here (predicted from the median step; time outside the steps not counted)" in text
    assert "[" not in text


def test_a_row_decided_by_a_measured_time_does_not_show_the_model_error_as_its_gate():
    """The realdata answer once gave model error 87% beside "advice" and "advice needs <= 25%": its
    verdict came from a measured time to the target, which the model's error does not gate."""
    pick = {"world_size": 1, "placement_class": "single-rank", "time_s": {"value": 1.0}, "step_time_s": {"value": 0.01},
            "efficiency": {"value": 1.0}, "speedup": {"value": 1.0}, "gpu_hours": 1e-4}
    model = {"models": {KAN: {"recommendation": {"fastest": pick, "work": {"samples": 100, "epochs": 1}},
                              "placements": {"intra-node": {"validation": {"loo_mape_pct": 87.0}}}}}}
    deploy = {"id": f"deploy-{KAN}", "status": "inconclusive", "settle": "LOO MAPE 87% > 25%", "numbers": {}}
    measured = answer_context({"model": model, "strong": None}, [deploy, soonest(KAN, 0.07, [0.06, 0.08], 2.0,
                                                                                  [1.5, 2.5])], {"ok": 1, "planned": 1})
    (row,) = measured["rows"]
    assert row["verdict"] == "advice" and row["error"] == "– (measured)"
    predicted = answer_context({"model": model, "strong": None}, [deploy], {"ok": 1, "planned": 1})
    (row,) = predicted["rows"]
    assert row["verdict"] == "inconclusive" and row["error"].startswith("87")


def test_imported_runs_are_told_where_repeats_come_from_once():
    ask = "run 2 more repeats of 4x2"
    once = imported_settle(ask)
    assert once.startswith(ask) and "the runs were imported" in once
    assert imported_settle(once) == once  # the answer and the sections both apply it
    assert imported_settle("measure 1x4") == "measure 1x4" and imported_settle(None) is None


def test_a_one_rank_bound_names_the_ddp_step_it_was_probed_on():
    from scaling.report.answer import _bound_why
    g = {"numbers": {"world_size": 1, "bound": "dispatch", "step_ms": 1.3827, "dispatch_ms": 0.9033}}
    assert _bound_why(g, 1) == ("on 1 rank under DDP its step is dispatch-bound: 0.9 ms of 1.4 ms is fixed cost "
                                "(dispatch, launches, Python)")
    g2 = {"numbers": {"world_size": 2, "bound": "communication", "step_ms": 2.2, "communication_ms": 1.0}}
    assert _bound_why(g2, 2).startswith("at 2 ranks its step is communication-bound")
