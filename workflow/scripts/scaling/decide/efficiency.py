"""The strong- and weak-scaling guidelines: the largest world size that keeps efficiency >= the
threshold, and the per-rank batch below which compute throughput per rank falls off."""

from __future__ import annotations

import math

import pandas as pd

from ..common.stats import known
from .rules import (Decide, ci_text, deciding, guideline, key_of, more_repeats, ranks, rests_on, rounded, settle_text, side,
                    topo)


def strong_efficiency(strong: pd.DataFrame, threshold: float, d: Decide) -> list[dict]:
    """Largest world size whose strong-scaling efficiency (vs the DDP baseline) is >= threshold, per
    model. At a world size measured in several placements the best placement counts. Decisive: the
    chosen world size and the next larger one measured, and the baseline's repeats."""
    min_repeats = d.min_repeats
    rule = (f"largest world size p with efficiency(p) = speedup(p) / (p / p_base) >= {threshold:.0%} (DDP points of "
            f"the strong experiment; p_base = smallest DDP world size); advice only when the {d.label} CI of each "
            f"decisive efficiency is on one side of the threshold and each has >= {min_repeats} ok repeats")
    out = []
    t = strong[strong["ddp"].astype(bool)] if len(strong) and "ddp" in strong else strong
    models = sorted(t["model"].unique()) if len(t) else []
    for model in models or [None]:
        g = t[(t["model"] == model) & t["efficiency"].notna()] if model else t.iloc[0:0]
        gid = f"strong-efficiency-{model}" if model else "strong-efficiency"
        if g.empty or g["world_size"].nunique() < 2:
            out.append(guideline(gid, "strong", "not_enough_data",
                                 f"strong-scaling points measured (status ok) at two or more world sizes"
                                 f"{' for ' + model if model else ''} to compute an efficiency.", rule,
                                 {"world_sizes_measured": sorted(int(p) for p in g["world_size"].unique())}))
            continue
        best = g.sort_values("efficiency", ascending=False).groupby("world_size", sort=True).head(1)
        best = best.sort_values("world_size").set_index("world_size", drop=False)
        base_p = int(best["baseline_world_size"].iloc[0])
        base = best.loc[base_p] if base_p in best.index else None
        above = [int(p) for p, r in best.iterrows() if p > base_p and r["efficiency"] >= threshold]
        below = [int(p) for p, r in best.iterrows() if p > base_p and r["efficiency"] < threshold]
        chosen = max(above) if above else base_p
        nxt = min([p for p in below if p > chosen], default=None)
        listing = ", ".join(f"{ci_text(r['efficiency'], *deciding(r, 'efficiency'), label=d.label)} at {int(p)} "
                            f"({topo(r)}, {int(r['n_ok'])} ok)" for p, r in best.iterrows() if p > base_p)
        nums = {"threshold": threshold, "baseline_world_size": base_p, "chosen_world_size": chosen,
                "decision_level": d.level,
                "efficiency_by_world_size": {str(int(p)): rounded(r["efficiency"]) for p, r in best.iterrows()},
                "efficiency_ci_by_world_size": {str(int(p)): [rounded(x) for x in deciding(r, "efficiency")]
                                                for p, r in best.iterrows()},
                "placement_by_world_size": {str(int(p)): topo(r) for p, r in best.iterrows()},
                "n_ok_by_world_size": {str(int(p)): int(r["n_ok"]) for p, r in best.iterrows()}}
        decisive = [p for p in (chosen, nxt) if p is not None and p != base_p]
        unsure = []
        base_more = 0 if base is None else max(min_repeats - int(base["n_ok"]), 0)
        for p in decisive:
            r = best.loc[p]
            lo, hi = deciding(r, "efficiency")
            s = side(r["efficiency"], lo, hi, threshold)
            if s == "straddles" or r["n_ok"] < min_repeats:
                k = more_repeats(int(r["n_ok"]), r["efficiency"], lo, hi, threshold, min_repeats)
                unsure.append((topo(r), k, key_of(r)))
                if s == "straddles" and base is not None and k is not None:
                    # an efficiency's interval holds the baseline's spread too: both need the repeats
                    base_more = max(base_more, more_repeats(int(base["n_ok"]), r["efficiency"], lo, hi, threshold,
                                                            min_repeats) or 0)
        if base is not None and base_more:
            unsure.append((f"the baseline {topo(base)}", base_more, key_of(base)))
        rests = [(topo(best.loc[p]), best.loc[p]["n_ok"]) for p in decisive] + \
            ([(f"the baseline {topo(base)}", base["n_ok"])] if base is not None else [])
        if unsure:
            text = (f"{model}: strong-scaling efficiency {listing} — the data do not decide which world sizes keep "
                    f"efficiency ≥ {threshold:.0%}.")
            out.append(rests_on(guideline(gid, "strong", "inconclusive", text, rule, nums, settle_text(unsure), unsure),
                                rests))
            continue
        if above:
            tail = (f"; at {nxt} ranks it is below {threshold:.0%}" if nxt
                    else "; that is the largest world size measured, so larger ones may still qualify")
            text = (f"{model}: largest world size with strong-scaling efficiency ≥ {threshold:.0%}: {chosen} ranks "
                    f"(efficiency {listing}){tail}.")
        else:
            text = (f"{model}: no world size above {base_p} keeps strong-scaling efficiency ≥ {threshold:.0%} "
                    f"({listing}) → for a fixed problem of this size, use {ranks(base_p)} or a larger problem.")
        out.append(rests_on(guideline(gid, "strong", "advice", text, rule, nums), rests))
    return out


def _rel(a: pd.Series, b: pd.Series, metric: str) -> tuple[float, float, float]:
    """a/b of two configurations' means with a deciding interval combining their relative half-widths
    in quadrature (delta method on the two t intervals); NaN when either has one repeat."""
    r = a[f"{metric}_mean"] / b[f"{metric}_mean"]
    ha = (deciding(a, metric)[1] - a[f"{metric}_mean"]) / a[f"{metric}_mean"]
    hb = (deciding(b, metric)[1] - b[f"{metric}_mean"]) / b[f"{metric}_mean"]
    if not (known(ha) and known(hb)):
        return r, math.nan, math.nan
    half = r * math.sqrt(ha ** 2 + hb ** 2)
    return r, r - half, r + half


def per_rank_batch(table: pd.DataFrame, experiment: str, threshold: float, d: Decide) -> list[dict]:
    """Per-rank batch below which compute throughput per rank falls off, within one experiment:
    per-rank samples/s of the no_sync step (b / no_sync step time: compute only, no all-reduce), so
    that points at different world sizes compare on their per-rank work alone."""
    metric, min_repeats = "compute_samples_per_s_per_rank", d.min_repeats
    rule = (f"within the {experiment} experiment: per-rank batch b is too small when its compute-only per-rank "
            f"samples/s (b / no_sync step time) < {threshold:.0%} of the best over the measured batches; on a shared "
            f"CPU host, ranks also compete for cores, so a smaller batch at a larger world size is not only a batch "
            f"effect")
    gid = f"per-rank-batch-{experiment}"
    t = table[table[f"{metric}_mean"].notna() & table["ddp"].astype(bool)]
    out = []
    groups = [(m, g) for m, g in t.groupby("model") if g["batch_per_rank"].nunique() >= 2]
    if not groups:
        return [guideline(gid, "weak" if experiment == "weak" else "strong", "not_enough_data",
                          f"{experiment} points of one model at two or more per-rank batches with a no_sync step time "
                          f"(points of different experiments are not compared).", rule, {"threshold": threshold})]
    for model, g in groups:
        # one row per batch: the configuration with the highest compute throughput at that batch
        by_b = g.sort_values(f"{metric}_mean", ascending=False).groupby("batch_per_rank").head(1)
        by_b = by_b.sort_values("batch_per_rank").set_index("batch_per_rank", drop=False)
        best = by_b.loc[by_b[f"{metric}_mean"].idxmax()]
        best_b = int(best["batch_per_rank"])
        rel = {int(b): _rel(r, best, metric) for b, r in by_b.iterrows()}
        small = [b for b, (v, _, _) in rel.items() if b < best_b and v < threshold]
        listing = ", ".join(f"{float(r[f'{metric}_mean']):,.0f} at b={int(b)} ({topo(r)})" for b, r in by_b.iterrows())
        nums = {"threshold": threshold, "best_batch": best_b,
                "compute_samples_per_s_per_rank": {str(int(b)): rounded(r[f"{metric}_mean"], 1) for b, r in by_b.iterrows()},
                "relative_to_best": {str(b): rounded(v) for b, (v, _, _) in rel.items()},
                "relative_to_best_ci": {str(b): [rounded(lo), rounded(hi)] for b, (_, lo, hi) in rel.items()}}
        cutoff = max(small) if small else None
        keep = min((b for b in rel if cutoff is not None and b > cutoff), default=min(rel))
        decisive = cutoff if cutoff is not None else min(rel)
        v, lo, hi = rel[decisive]
        r = by_b.loc[decisive]
        unsure = []
        straddles = decisive != best_b and side(v, lo, hi, threshold) == "straddles"
        if decisive != best_b and (straddles or r["n_ok"] < min_repeats):
            unsure.append((topo(r), more_repeats(int(r["n_ok"]), v, lo, hi, threshold, min_repeats), key_of(r)))
        if straddles or best["n_ok"] < min_repeats:  # a ratio's interval holds the best batch's spread too
            unsure.append((f"{topo(best)} (best batch)", more_repeats(int(best["n_ok"]), v, lo, hi, threshold,
                                                                      min_repeats) if straddles
                           else min_repeats - int(best["n_ok"]), key_of(best)))
        head = (f"{model}, {experiment}: compute-only samples/s per rank {listing}; at b={decisive} it is "
                f"{ci_text(v, max(lo, 0.0) if lo is not None else lo, hi, '{:.0%}', d.label)} of the best "
                f"(b={best_b})")  # a throughput ratio cannot be negative: the delta method's lower end is cut at 0
        nums.update(falls_off_at_batch=cutoff, min_good_batch=keep)
        rests = [(topo(r), r["n_ok"]), (f"{topo(best)} (best batch)", best["n_ok"])]
        topic = "strong" if experiment != "weak" else "weak"
        if unsure:
            out.append(rests_on(guideline(f"{gid}-{model}", topic, "inconclusive", head + f" — the data do not decide "
                                          f"whether it is below {threshold:.0%}.", rule, nums, settle_text(unsure),
                                          unsure), rests))
            continue
        if cutoff is not None:
            text = (head + f" → keep the per-rank batch ≥ {keep}; in strong scaling with a fixed global batch the "
                    f"per-rank batch is global / p, so scale the global batch with the ranks.")
        else:
            text = head + f" → per-rank batches ≥ {min(rel)} keep ≥ {threshold:.0%} of the best (smaller ones were not measured)."
        out.append(rests_on(guideline(f"{gid}-{model}", topic, "advice", text, rule, nums), rests))
    return out
