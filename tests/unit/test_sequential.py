"""Adaptive repeats (scaling/decide/sequential.py): simulated studies with a known truth keep the false-decision
rate at or below alpha over all looks, unadjusted looks do not, clear cases stop early; and what one
look adds, capped by max and trimmed to the budget."""

import pytest

from kan.contract.repeats import RepeatPlan, next_batch
from scaling.decide.sequential import plan_batch, simulate
from scaling.tables.aggregate import GROUP
from scaling_data import settings

# the report's own minimum of ok repeats for a decision (report.min_repeats at the schema's default)
MIN_REPEATS = settings().min_repeats

ALPHA = 0.05
N = 4000  # studies per case: the rate's standard error at 5% is 0.34 points


@pytest.mark.parametrize("kind,threshold", [("mean", 20.0), ("ratio", 0.75)])
@pytest.mark.parametrize("looks", [3, 5])
def test_false_decisions_stay_at_alpha_with_the_truth_on_the_threshold(kind, threshold, looks):
    """The hardest case: every decision is wrong, so the rate of deciding at all over the looks is the
    false-decision rate."""
    plan = RepeatPlan(min=3, max=12, looks=looks, alpha=ALPHA)
    r = simulate(plan, threshold, threshold, N, kind, cv=0.1, seed=looks, min_repeats=MIN_REPEATS)
    assert r["false_decision_rate"] <= ALPHA, r
    assert r["level"] == pytest.approx(1 - ALPHA / looks)


# half a repeat's sd from the threshold (mean), or 12% (a ratio of two noisy means: its sd is sqrt(2) x larger)
@pytest.mark.parametrize("kind,threshold,offset", [("mean", 20.0, -0.05), ("mean", 20.0, 0.05),
                                                   ("ratio", 0.75, -0.12), ("ratio", 0.75, 0.12)])
def test_false_decisions_stay_at_alpha_near_the_threshold(kind, threshold, offset):
    plan = RepeatPlan(min=3, max=12, looks=3, alpha=ALPHA)
    r = simulate(plan, threshold * (1 + offset), threshold, N, kind, cv=0.1, seed=7, min_repeats=MIN_REPEATS)
    assert r["false_decision_rate"] <= ALPHA, r
    assert r["decided_rate"] > 0.2  # and the looks do decide a good share of these near cases


def test_unadjusted_looks_decide_wrongly_more_often_than_alpha():
    """Why the split: the same looks with 95% intervals at every look exceed 5%."""
    plan = RepeatPlan(min=3, max=12, looks=5, alpha=ALPHA)
    r = simulate(plan, 20.0, 20.0, N, "mean", cv=0.1, seed=1, level=0.95, min_repeats=MIN_REPEATS)
    assert r["false_decision_rate"] > 1.5 * ALPHA, r


def test_a_clear_case_stops_at_the_first_look_and_costs_less_than_fixed_repeats():
    plan = RepeatPlan(min=3, max=12, looks=3, alpha=ALPHA)
    r = simulate(plan, 30.0, 20.0, 2000, "mean", cv=0.1, seed=3, min_repeats=MIN_REPEATS)  # 5 sd above the threshold
    assert r["decided_rate"] > 0.99 and r["false_decision_rate"] == 0
    assert r["mean_repeats"] < 4 < plan.max


def test_fixed_repeats_are_one_look_at_95():
    plan = RepeatPlan.from_config(3, ALPHA)
    assert not plan.adaptive and plan.num_looks == 1 and plan.level == pytest.approx(0.95)
    assert RepeatPlan.from_config({"min": 3, "max": 3, "looks": 4}, ALPHA).level == pytest.approx(0.95)  # max = min


def test_next_batch_is_capped_by_max():
    plan = RepeatPlan(min=3, max=6, looks=3, alpha=ALPHA)
    assert next_batch(10, 3, plan) == 3 and next_batch(2, 3, plan) == 2
    assert next_batch(None, 3, plan) == 0 and next_batch(4, 6, plan) == 0


KEY_A = {"experiment": "strong", "model": "m", "nodes": 1, "gpus_per_node": 2, "link_mbit": "0.0", "hidden_width": None,
         "ddp": True, "ddp_setting": "none"}
KEY_B = {**KEY_A, "gpus_per_node": 1}
FAMILIES = {tuple(KEY_A[c] for c in GROUP): "famA", tuple(KEY_B[c] for c in GROUP): "famB"}


def undecided(gid, *targets):
    return {"id": gid, "status": "inconclusive", "settle_points": [{"where": w, "more": k, "key": key}
                                                                   for w, k, key in targets]}


def test_a_look_adds_the_largest_request_per_point_and_only_to_undecided_ones():
    gl = [undecided("g1", ("1x2", 2, KEY_A)), undecided("g2", ("1x2", 5, KEY_A), ("1x1", 1, KEY_B)),
          {"id": "g3", "status": "advice"}, undecided("g4", ("model", None, None))]
    plan = RepeatPlan(min=3, max=6, looks=3, alpha=ALPHA)
    b = plan_batch(gl, FAMILIES, {"famA": 3, "famB": 3}, plan, {"famA": 0.01, "famB": 0.01}, 0.0)
    assert b["added"] == {"famA": {"more": 3, "why": ["g1", "g2"]}, "famB": {"more": 1, "why": ["g2"]}}  # 5 capped
    assert b["undecided"] == ["g1", "g2", "g4"] and b["not_by_repeats"] == ["g4"]
    b = plan_batch(gl, FAMILIES, {"famA": 6, "famB": 3}, plan, {}, 0.0)
    assert "famA" not in b["added"] and b["at_max"]["famA"] == ["g1", "g2"]


def test_a_look_stays_within_the_budget_cheapest_first():
    gl = [undecided("g", ("1x2", 4, KEY_A), ("1x1", 4, KEY_B))]
    plan = RepeatPlan(min=3, max=12, looks=3, budget_rank_hours=1.0, alpha=ALPHA)
    b = plan_batch(gl, FAMILIES, {"famA": 3, "famB": 3}, plan, {"famA": 0.2, "famB": 0.1}, spent_rank_hours=0.3)
    # 0.7 left: famB (0.1 each) gets its 4 (0.4), famA (0.2 each) the 1 that still fits (0.2)
    assert b["added"]["famB"]["more"] == 4 and b["added"]["famA"]["more"] == 1
    assert b["over_budget"] == {"famA": 4}
