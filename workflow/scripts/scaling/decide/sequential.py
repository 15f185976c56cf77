"""Adaptive repeats: look at the data while a study runs, and add repeats only where a guideline is
still undecided (config `repeats: {min, max, looks, budget_rank_hours}`; a plain integer is a fixed
number of repeats, as before).

Looks. Every point is measured `min` times. Then look 1 computes every guideline from what exists
(the same tables, performance model and rules as the report). An inconclusive guideline names the
configurations whose intervals keep it undecided and how many more repeats each needs
(decide/rules.py: settle_points); look 1 adds those repeats, and only those. Looks 2 .. K-1 do the same
with the data grown so far. The report is look K: no repeat is added after it. A study stops adding
when every guideline is decided, when a configuration has `max` repeats, when the budget is spent,
or after look K - 1. The looks are a chain of Snakemake checkpoints (workflow/rules/looks.smk), so
one `snakemake` command runs the whole study, locally and on Slurm.

Sizing. A configuration's batch is the largest request over the guidelines it decides
(rules.more_repeats: an interval of half-width h at a gap g from the threshold needs about
n (h / g)^2 repeats, since h falls as 1 / sqrt(n); at least report.min_repeats), capped so that it
never has more than `max` repeats, and trimmed to the budget: a repeat of a configuration costs
world size x the median wall time of its jobs (rank-hours), and the looks never plan beyond
`budget_rank_hours` in all.

The error rate. Looking K times at data that grow between the looks lets chance decide more often
than a single interval's alpha: five equally spaced looks at 95% intervals decide about 14% of the
time when the truth sits exactly on the threshold (Armitage, McPherson and Rowe 1969), these looks
(first at `min` repeats, then sized batches) about 11% with three looks (`simulate` below;
tests/unit/test_sequential.py, benchmarks/sequential_decisions.py). kanscale
splits alpha over the looks (Bonferroni): every deciding interval, at every look and in the report,
has level 1 - alpha / K, so P(some look decides wrongly) <= K * alpha / K = alpha, whatever the
looks did in between. With fixed repeats (K = 1) that is today's 95% interval at alpha = 0.05.
"""

from __future__ import annotations

import math

import numpy as np

from kan.contract.repeats import RepeatPlan, next_batch
from ..common.stats import ratio_ci, summarize
from ..tables.aggregate import GROUP
from .rules import key_of, more_repeats, side


def family_keys(measurements) -> dict[tuple, str]:
    """{configuration key (tables GROUP values) -> point family} of the planned points."""
    out = {}
    for _, row in measurements.drop_duplicates("family").iterrows():
        k = key_of(row)
        out[tuple(k[c] for c in GROUP)] = row["family"]
    return out


def plan_batch(guidelines: list[dict], families: dict[tuple, str], requested: dict[str, int], plan: RepeatPlan,
               cost_rank_hours: dict[str, float], spent_rank_hours: float) -> dict:
    """What one look adds. {'added': {family: {'more', 'why'}}, 'at_max': {family: [guideline ids]},
    'over_budget': {family: repeats wanted}, 'undecided': [ids], 'not_by_repeats': [ids]}."""
    want: dict[str, int] = {}
    why: dict[str, list[str]] = {}
    at_max: dict[str, list[str]] = {}
    undecided, not_by_repeats = [], []
    for g in guidelines:
        if g["status"] != "inconclusive":
            continue
        undecided.append(g["id"])
        targets = [t for t in g.get("settle_points", []) if t.get("key")]
        if not any(t["more"] for t in targets):
            not_by_repeats.append(g["id"])  # a model error, a missing width: more repeats do not settle it
            continue
        for t in targets:
            fam = families.get(tuple(t["key"].get(c) for c in GROUP))
            if fam is None or not t["more"]:
                continue
            k = next_batch(t["more"], requested.get(fam, 0), plan)
            if k == 0:
                at_max.setdefault(fam, []).append(g["id"])
                continue
            if k > want.get(fam, 0):
                want[fam] = k
            why.setdefault(fam, []).append(g["id"])
    added, over = {}, {}
    left = math.inf if plan.budget_rank_hours is None else plan.budget_rank_hours - spent_rank_hours
    for fam in sorted(want, key=lambda f: (cost_rank_hours.get(f, 0.0), f)):  # cheapest first: more decided
        cost = cost_rank_hours.get(fam, 0.0)
        k = want[fam] if cost <= 0 or math.isinf(left) else min(want[fam], int(max(left, 0) // cost))
        if k < want[fam]:
            over[fam] = want[fam]
        if k > 0:
            added[fam] = {"more": k, "why": sorted(set(why[fam]))}
            left -= k * cost
    return {"added": added, "at_max": at_max, "over_budget": over, "undecided": undecided,
            "not_by_repeats": not_by_repeats}


# ---- the error-rate proof: simulated studies with a known truth (no training) ---------------------

def _decide_mean(values, threshold, level):
    st = summarize(values, level)
    return st["mean"], st["ci_lo"], st["ci_hi"], side(st["mean"], st["ci_lo"], st["ci_hi"], threshold)


def _decide_ratio(num, den, threshold, level):
    r = ratio_ci(num, den, level)
    return r["ratio"], r["ci_lo"], r["ci_hi"], side(r["ratio"], r["ci_lo"], r["ci_hi"], threshold)


def simulate(plan: RepeatPlan, truth: float, threshold: float, n_studies: int, kind: str = "mean",
             cv: float = 0.1, seed: int = 0, level: float | None = None, *, min_repeats: int) -> dict:
    """Run `n_studies` simulated studies of one guideline with a known true value and report how
    often they decide, how often wrongly, and their mean repeats.

    kind "mean": one configuration whose repeats are normal with mean `truth` and sd cv * threshold
    (an exposed-communication share against its threshold). kind "ratio": an efficiency, the ratio
    of two configurations' means (a point and its baseline), each repeat lognormal with a relative
    sd of cv, the point's mean truth x the baseline's. Both use the workflow's own interval
    (stats.summarize / ratio_ci at `level`, default plan.level), decision (rules.side), sizing
    (rules.more_repeats) and cap (next_batch), look after look.

    A decision is wrong when it puts the truth on the wrong side: "above" when truth < threshold,
    "below" when truth >= threshold (rules.side's convention); with the truth exactly on the
    threshold, "below" is the wrong one and "above" is right only by the >= convention, so both are
    counted as errors there ("any decision"), which is the strictest reading."""
    level = plan.level if level is None else level
    rng = np.random.default_rng(seed)
    wrong = decided = 0
    repeats = []
    for _ in range(n_studies):
        draw = _drawer(rng, kind, truth, threshold, cv)
        data = [draw() for _ in range(plan.min)]
        for look in range(1, plan.num_looks + 1):
            if kind == "mean":
                value, lo, hi, s = _decide_mean([d[0] for d in data], threshold, level)
            else:
                value, lo, hi, s = _decide_ratio([d[0] for d in data], [d[1] for d in data], threshold, level)
            if s != "straddles" and len(data) >= min_repeats:
                decided += 1
                on_threshold = truth == threshold
                wrong += on_threshold or (s == "above") != (truth >= threshold)
                break
            if look == plan.num_looks:
                break
            k = next_batch(more_repeats(len(data), value, lo, hi, threshold, min_repeats), len(data), plan)
            if k == 0:
                break
            data += [draw() for _ in range(k)]
        repeats.append(len(data))
    return {"kind": kind, "truth": truth, "threshold": threshold, "studies": n_studies, "level": level,
            "decided_rate": decided / n_studies, "false_decision_rate": wrong / n_studies,
            "mean_repeats": float(np.mean(repeats)), "max_repeats": int(max(repeats))}


def _drawer(rng, kind, truth, threshold, cv):
    if kind == "mean":
        return lambda: (rng.normal(truth, cv * threshold), None)
    if kind == "ratio":
        s = math.sqrt(math.log(1 + cv ** 2))  # lognormal with relative sd cv and mean 1
        return lambda: (truth * rng.lognormal(-s * s / 2, s), rng.lognormal(-s * s / 2, s))
    raise ValueError(f"kind must be 'mean' or 'ratio', got {kind!r}")


# ---- what the report says about the looks ----------------------------------------------------------

def _repeats_text(rests: list[dict]) -> str:
    ns = sorted({int(r["n_ok"]) for r in rests})
    if not ns:
        return ""
    return f" with {ns[0]} ok repeats" if len(ns) == 1 else f" with {ns[0]}–{ns[-1]} ok repeats"


def history_context(look: dict | None, guidelines: list[dict], plan: RepeatPlan) -> dict:
    """For the report: per guideline when it was decided (or why it is still open), per look what it
    added, per configuration its repeats and why they were added. `look`: the last look's file
    (look.py), None before any look or with fixed repeats; the report itself is look K."""
    history = (look or {}).get("history", [])
    k_final = len(history) + 1
    last = history[-1] if history else {}
    per = {}
    for g in guidelines:
        statuses = [next((x["status"] for x in e["guidelines"] if x["id"] == g["id"]), None) for e in history]
        statuses.append(g["status"])
        if g["status"] == "advice":
            j = len(statuses)
            while j > 1 and statuses[j - 2] == "advice":
                j -= 1
            rests = g.get("rests_on", []) if j == k_final else next(
                (x.get("rests_on", []) for x in history[j - 1]["guidelines"] if x["id"] == g["id"]), [])
            per[g["id"]] = f"decided at look {j} of {plan.num_looks}{_repeats_text(rests)}"
        elif g["status"] == "inconclusive":
            if not plan.adaptive:
                why = f"fixed repeats ({plan.min}): no look adds any"
            elif g["id"] in last.get("not_by_repeats", []):
                why = "more repeats do not settle it"
            elif any(g["id"] in ids for ids in last.get("at_max", {}).values()):
                why = f"its points reached max = {plan.max} repeats"
            elif last.get("over_budget"):
                why = f"the budget ({plan.budget_rank_hours:g} rank-hours) is spent"
            else:
                why = f"after the last look ({plan.num_looks})"
            per[g["id"]] = f"inconclusive at look {k_final}{_repeats_text(g.get('rests_on', []))}: {why}"
    configs: dict[str, list] = {}
    for e in history:
        for fam, a in e["added"].items():
            configs.setdefault(fam, []).append({"look": e["look"], "more": a["more"], "why": a["why"]})
    requested = (look or {}).get("requested", {})
    return {
        "adaptive": plan.adaptive, "plan": plan.to_json(), "num_looks": plan.num_looks,
        "per_guideline": per,
        "looks": [{"look": e["look"], "decided": sum(x["status"] == "advice" for x in e["guidelines"]),
                   "undecided": sum(x["status"] == "inconclusive" for x in e["guidelines"]),
                   "added": sum(a["more"] for a in e["added"].values()), "configs": len(e["added"]),
                   "spent_rank_hours": e["spent_rank_hours"], "stop": e["stop"]} for e in history],
        "configs": [{"family": fam, "repeats": requested.get(fam, plan.min), "added": adds}
                    for fam, adds in sorted(configs.items())],
    }
