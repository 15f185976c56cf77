"""The critical batch (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training") from the
batch experiment: the samples each global batch B needed to reach the held-out target, E(B), fitted by

    E(B) = E_min (1 + B / B_crit)        equivalently  S(B) = E(B) / B = S_min (1 + B_crit / B)

with S_min = E_min / B_crit. Linear in (a, b) = (E_min, E_min / B_crit): E = a + b B, fitted by least
squares with a, b >= 0 (scipy's lsq_linear), so B_crit = a / b and S_min = b. Below B_crit a larger
batch needs about as many samples (fewer steps: more ranks pay); past it about as many steps (more
ranks buy faster steps and no sooner model). The interval: a two-stage bootstrap, the batches drawn
with replacement (at least 2 distinct per draw) and each drawn batch's repeats within it: repeats
with one seed reach the target after the same samples, so the spread the fit cannot explain (the
batches' scatter about the curve) is what makes the interval. Statuses:

    ok                      B_crit within a factor PLACED (4) of the batches tried, [B_min / 4, 4 B_max],
                            with its interval
    below the smallest batch tried
                            B_crit < B_min / 4: samples to target grow about in proportion to the batch,
                            so a larger batch never cut the steps (an upper bound, not a value)
    beyond the batches tried
                            B_crit > 4 B_max (b = 0 included: samples do not grow with the batch), so
                            a larger batch always cut the steps (a lower bound, not a value)
    not enough batches      fewer than 3 batches whose every repeat reached the target
    not reached             no batch reached the target

Why a factor 4, and on both sides: the law is symmetric, E / E_min = 1 + B / B_crit and
S / S_min = 1 + B_crit / B. With B_crit > 4 B_max, E is within 25% of E_min at every batch tried;
with B_crit < B_min / 4, S is within 25% of S_min at every batch tried. Either way the knee moves
no measured value by more than a quarter, so the fitted B_crit is an extrapolation, not a
measurement (samples growing exactly in proportion to the batch fitted B_crit 4.7e-14; nearly flat
samples over batches 64..256 fitted 63,936).

A point reaches the target at its first held-out evaluation that does (heldout.first_reach), so E
is known to the evaluation cadence (training.eval_every_samples): batches whose E differ by less than
one cadence are not told apart.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import lsq_linear

from ..common.fmt import plural, sig
from .heldout import clean_val_curves, first_reach, references

MIN_BATCHES = 3
# B_crit is placed ("ok") only within this factor of the batches tried (module docstring says why)
PLACED = 4.0
BELOW, BEYOND = "below the smallest batch tried", "beyond the batches tried"


def fit(batches: np.ndarray, samples: np.ndarray) -> tuple[float, float]:
    """(E_min, E_min / B_crit) by non-negative least squares of E = a + b B in relative error (each
    row divided by its E): E spans decades over the batches and its noise is a share of it, so the
    largest batch would otherwise decide E_min alone."""
    w = 1.0 / samples.astype(float)
    A = np.column_stack([w, batches.astype(float) * w])
    res = lsq_linear(A, np.ones_like(w), bounds=(0.0, np.inf))
    return float(res.x[0]), float(res.x[1])


def _grows(a: float, b: float, batches) -> bool:
    """Whether E grows with B by more than rounding over the batches measured (b B_max > 1e-6 a)."""
    return b * max(batches) > 1e-6 * max(a, 1e-300)


def _b_crit(a: float, b: float) -> float:
    return a / b if b > 1e-12 * max(a, 1e-300) else math.inf


def critical_batch(rows: list[tuple[int, float | None]], resamples: int = 500, seed: int = 0,
                   level: float = 0.95) -> dict:
    """rows: (global batch, samples to target or None = not reached) of every ok repeat."""
    by: dict[int, list[float | None]] = {}
    for b, e in rows:
        by.setdefault(int(b), []).append(e)
    usable = {b: [float(e) for e in es] for b, es in sorted(by.items()) if es and all(e is not None for e in es)}
    missed = sorted(b for b, es in by.items() if b not in usable)
    base = {"batches": sorted(by), "reached": sorted(usable), "not_reached": missed,
            "samples_to_target": {str(b): float(np.mean(es)) for b, es in usable.items()},
            "samples_to_target_repeats": {str(b): es for b, es in usable.items()}}
    if not usable:
        return {**base, "b_crit": None, "ci": None, "e_min": None, "s_min": None, "status": "not reached",
                "why": "no global batch reached the target in every repeat"}
    if len(usable) < MIN_BATCHES:
        return {**base, "b_crit": None, "ci": None, "e_min": None, "s_min": None, "status": "not enough batches",
                "why": f"{plural(len(usable), 'batch', 'batches')} reached the target in every repeat; the fit needs {MIN_BATCHES}"}
    B = np.array([b for b, es in usable.items() for _ in es])
    E = np.array([e for es in usable.values() for e in es])
    a, b = fit(B, E)
    lo_b, hi_b = min(usable), max(usable)
    tried = f"batches {lo_b}..{hi_b}"
    grows, bc = _grows(a, b, list(usable)), _b_crit(a, b)
    if not grows or bc > PLACED * hi_b:
        fitted = ("samples to target do not grow with the batch" if not grows
                  else f"the fit puts B_crit at {sig(bc, 4)}, more than {PLACED:g} x the largest batch")
        return {**base, "b_crit": None, "b_crit_lower_bound": hi_b, "ci": None, "e_min": a, "s_min": None,
                "status": BEYOND, "why": f"{fitted} over {tried}: samples to target grew by less than a quarter, "
                                         f"so every larger batch cut the steps about in proportion and B_crit is "
                                         f"beyond {hi_b:,} (measure larger batches to place it)"}
    if bc < lo_b / PLACED:
        return {**base, "b_crit": None, "b_crit_upper_bound": lo_b, "ci": None, "e_min": None, "s_min": b,
                "status": BELOW, "why": f"samples to target grow about in proportion to the batch over {tried} (the "
                                        f"fit puts B_crit at {sig(bc)}, below {lo_b:,} / {PLACED:g}): a larger batch "
                                        f"cut the steps by less than a quarter (about {sig(b, 4)} steps at every "
                                        f"batch), so B_crit is below {lo_b:,} (measure smaller batches to place it)"}
    rng = np.random.default_rng(seed)
    boots = []
    keys = list(usable)
    while len(boots) < resamples:
        drawn = rng.choice(keys, size=len(keys), replace=True)
        if len(set(drawn)) < 2:  # one batch fits no line
            continue
        rb, re = [], []
        for bb in drawn:
            es = usable[int(bb)]
            rb += [int(bb)] * len(es)
            re += list(rng.choice(es, size=len(es), replace=True))
        ba, bs = fit(np.array(rb), np.array(re))
        boots.append(_b_crit(ba, bs))
    lo, hi = (float(np.quantile(boots, q)) for q in ((1 - level) / 2, (1 + level) / 2))
    return {**base, "b_crit": bc, "ci": [lo, hi], "e_min": a, "s_min": b, "status": "ok",
            "why": f"E(B) = {sig(a, 4)} (1 + B / {sig(bc, 4)}) over {tried}",
            "resamples": resamples, "level": level}


def batch_goal(curves, target: dict, model: str) -> tuple[float, float] | None:
    """(target value, reference or NaN) for the batch points of `model`: a fixed value, or
    from_reference x the world-1 DDP point's final value in strong, else weak, else the batch
    experiment's smallest batch (its own one-rank reference)."""
    if "value" in target:
        return float(target["value"]), math.nan
    refs = references(curves[curves["model"] == model], target["metric"])
    for exp in ("strong", "weak"):
        if (exp, model) in refs:
            return target["from_reference"] * refs[(exp, model)], refs[(exp, model)]
    mine = curves[(curves["experiment"] == "batch") & (curves["model"] == model)]
    if mine.empty:
        return None
    small = mine[mine["global_batch"] == mine["global_batch"].min()]
    finals = [float(g.sort_values("step")[target["metric"]].dropna().iloc[-1])
              for _, g in small.groupby(["point_id", "rep"]) if g[target["metric"]].notna().any()]
    if not finals:
        return None
    ref = sum(finals) / len(finals)
    return target["from_reference"] * ref, ref


def critical_batches(curves, target: dict, resamples: int = 500, level: float = 0.95) -> dict:
    """{model: critical_batch(...) with the target it used} over val_curves.csv's batch rows."""
    curves = clean_val_curves(curves)
    curves["global_batch"] = curves["global_batch"].astype(float)
    out = {}
    for model in sorted(set(curves.loc[curves["experiment"] == "batch", "model"])):
        goal = batch_goal(curves, target, model)
        if goal is None:
            continue
        mine = curves[(curves["experiment"] == "batch") & (curves["model"] == model)]
        rows = []
        for (_, _), g in mine.groupby(["point_id", "rep"]):
            hit = first_reach(g, target["metric"], goal[0])
            rows.append((int(g["global_batch"].iloc[0]), None if hit is None else hit[1]))
        res = critical_batch(rows, resamples=resamples, level=level)
        out[model] = {**res, "target_metric": target["metric"], "target_value": goal[0], "reference_value": goal[1]}
    return out
