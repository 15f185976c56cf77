"""Deployment guidelines: explicit rules over the scaling tables and the performance model. Each
guideline names its decisive quantity with its deciding interval and has a status:
- "advice": the CI lies on one side of the threshold and every point it rests on has at least
  report.min_repeats ok repeats;
- "inconclusive": the CI straddles the threshold or too few repeats succeeded; `settle` says what
  would decide it (e.g. "run 2 more repeats of 1x2"), and the text gives no advice;
- "not_enough_data": the rule cannot be evaluated at all; the text says what is missing.
A rule only compares points of one experiment. Points whose "nodes" all ran on one host over
loopback are labelled "simulated inter-node (one host)" and never give topology advice; points on
the emulated cluster ("emulated inter-node (one host, R Mbit/s link)") may, stated for that link.

Thresholds come from the config's `report:` section (passed in as `thresholds`). The deciding
interval is the CI at thresholds["decision_level"]: 95% with fixed repeats, 1 - alpha / looks with
adaptive repeats (scaling/sequential.py), read from the tables' <name>_dlo / <name>_dhi columns.
An inconclusive guideline lists, under `settle_points`, the configurations (tables.GROUP keys) whose
repeats would decide it and how many more each needs: what the adaptive looks add.
"""

from __future__ import annotations

import math

import pandas as pd

from .columns import REAL_PLACEMENTS, SIMULATED, is_emulated, model_family
from .stats import level_label, linear_fit
from .tables import GROUP

GIB = 2**30
GB = 1e9
# memory budgets of common accelerators, for "a model up to N parameters fits in Y GB"
BUDGETS_GB = (16, 40, 80)
MAX_EXTRAPOLATION = 4.0  # memory is never extrapolated beyond 4x the largest measured parameter count
MAX_MORE_REPEATS = 50  # beyond this many extra repeats the point is within noise of the threshold
CUDA_PEAK = "cuda_max_allocated"


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _num(x, nd=4):
    """A JSON-able rounded number (None for NaN)."""
    if not _ok(x):
        return None
    return round(float(x), nd)


class Decide:
    """How a guideline decides: the deciding intervals' level and the repeats a point needs."""

    def __init__(self, min_repeats: int = 3, level: float = 0.95) -> None:
        self.min_repeats, self.level = min_repeats, level
        self.label = level_label(level)


def key_of(row) -> dict:
    """The configuration a table row stands for (tables.GROUP), as plain JSON values."""
    out = {}
    for c in GROUP:
        v = row.get(c) if hasattr(row, "get") else row[c]
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out[c] = None
        elif c == "ddp":
            out[c] = bool(v)
        elif c in ("nodes", "gpus_per_node", "hidden_width"):
            out[c] = int(v)
        else:
            out[c] = str(v)
    return out


def deciding(row, name: str) -> tuple[float, float]:
    """(lo, hi) of the deciding interval of `name`: its _dlo/_dhi columns, or its 95% CI where a
    table has none (the levels agree then: fixed repeats decide at 95%)."""
    if f"{name}_dlo" in row:
        return float(row[f"{name}_dlo"]), float(row[f"{name}_dhi"])
    return float(row[f"{name}_ci_lo"]), float(row[f"{name}_ci_hi"])


def guideline(gid: str, topic: str, status: str, text: str, rule: str, numbers: dict, settle: str | None = None,
              targets: list | None = None) -> dict:
    """`targets`: (where, more repeats or None, configuration key) of what keeps it undecided."""
    assert status in ("advice", "inconclusive", "not_enough_data"), status
    prefix = {"advice": "", "inconclusive": "Inconclusive: ", "not_enough_data": "Not enough data: "}[status]
    out = {"id": gid, "topic": topic, "status": status, "text": prefix + text, "rule": rule, "numbers": numbers}
    if status == "inconclusive":
        out["settle"] = settle or "more repeats"
        out["settle_points"] = [{"where": w, "more": k, "key": key} for w, k, key in targets or [] if key]
    return out


def topo(row) -> str:
    """'1x2', '2x1 (simulated inter-node (one host))' for ranks that shared one host over loopback,
    or '2x1 (emulated inter-node (one host, 100 Mbit/s link))'."""
    t = f"{int(row['nodes'])}x{int(row['gpus_per_node'])}"
    cls = row.get("placement_class")
    return f"{t} ({cls})" if cls == SIMULATED or is_emulated(cls) else t


def rests_on(g: dict, rows: list[tuple[str, int]]) -> dict:
    """g with the configurations it decided on and their ok repeats (the report: "decided with n")."""
    g["rests_on"] = [{"where": w, "n_ok": int(n)} for w, n in rows]
    return g


def _ci(value, lo, hi, fmt="{:.1%}", label="95%") -> str:
    txt = fmt.format(value)
    if _ok(lo) and _ok(hi):
        txt += f" [{label} CI {fmt.format(lo)}, {fmt.format(hi)}]"
    else:
        txt += " [no CI: one repeat]"
    return txt


def side(value, lo, hi, threshold) -> str:
    """'above' / 'below' when the whole CI is on one side of the threshold, else 'straddles'
    (also when there is no CI: one repeat says nothing about its spread)."""
    if not (_ok(lo) and _ok(hi)):
        return "straddles"
    if lo >= threshold:
        return "above"
    if hi < threshold:
        return "below"
    return "straddles"


def more_repeats(n_ok: int, value, lo, hi, threshold, min_repeats: int) -> int | None:
    """Extra repeats that would settle the point: at least up to min_repeats, and for a CI that
    straddles, enough to shrink its half-width h below the gap g = |value - threshold|; the
    half-width falls as 1/sqrt(n), so n_needed = n * (h / g)^2 (ignoring the smaller t quantile:
    it errs towards more repeats). None: the value sits on the threshold."""
    need = max(min_repeats - n_ok, 0)
    if _ok(lo) and _ok(hi) and side(value, lo, hi, threshold) == "straddles":
        gap, half = abs(value - threshold), (hi - lo) / 2
        if gap == 0:
            return None
        need = max(need, math.ceil(n_ok * (half / gap) ** 2) - n_ok, 1)
    elif not (_ok(lo) and _ok(hi)):
        need = max(need, 2 - n_ok, 1)
    return need


def settle_text(items: list[tuple]) -> str:
    """'run 2 more repeats of 1x2; ...' from (where, more, ...) items."""
    parts = []
    for where, k, *_ in items:
        if k is None:
            parts.append(f"{where} sits on the threshold: no number of repeats decides it (it does not matter in practice)")
        elif k > MAX_MORE_REPEATS:
            parts.append(f"{where} is within noise of the threshold (> {MAX_MORE_REPEATS} more repeats needed): "
                         f"reduce the noise (exclusive nodes, longer runs) rather than repeat")
        else:
            parts.append(f"run {k} more repeat{'s' if k > 1 else ''} of {where}")
    return "; ".join(parts)


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
        listing = ", ".join(f"{_ci(r['efficiency'], *deciding(r, 'efficiency'), label=d.label)} at {int(p)} "
                            f"({topo(r)}, {int(r['n_ok'])} ok)" for p, r in best.iterrows() if p > base_p)
        nums = {"threshold": threshold, "baseline_world_size": base_p, "chosen_world_size": chosen,
                "decision_level": d.level,
                "efficiency_by_world_size": {str(int(p)): _num(r["efficiency"]) for p, r in best.iterrows()},
                "efficiency_ci_by_world_size": {str(int(p)): [_num(x) for x in deciding(r, "efficiency")]
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
                    f"({listing}) → for a fixed problem of this size, use {base_p} rank(s) or a larger problem.")
        out.append(rests_on(guideline(gid, "strong", "advice", text, rule, nums), rests))
    return out


def inter_node(comm: pd.DataFrame, penalty_pct: float, d: Decide) -> list[dict]:
    """Multi-node vs intra-node throughput at equal world size (comm experiment): a loss above
    penalty_pct -> keep jobs within one node. Simulated inter-node placements give no advice."""
    min_repeats = d.min_repeats
    rule = (f"loss = 100 × (1 − multi-node / intra-node samples/s) at equal world size (comm experiment); loss > "
            f"{penalty_pct:g}% → keep jobs within one node, else spreading over nodes is fine; advice only when the "
            f"loss's {d.label} CI is on one side of {penalty_pct:g}% and both placements have ≥ {min_repeats} ok "
            f"repeats; never from ranks that shared one host")
    pairs = comm[comm["inter_vs_intra_loss_pct"].notna()] if len(comm) else comm
    if pairs is None or pairs.empty:
        return [guideline("inter-node", "comm", "not_enough_data", "communication points at the same world size both "
                          "within one node (1 x p) and across nodes (n x p/n), both with status ok.", rule,
                          {"threshold_pct": penalty_pct})]
    out = []
    for _, r in pairs.sort_values(["model", "world_size", "nodes"]).iterrows():
        loss = float(r["inter_vs_intra_loss_pct"])
        lo, hi = deciding(r, "inter_vs_intra_loss_pct")
        p = int(r["world_size"])
        gid = f"inter-node-{r['model']}-{int(r['nodes'])}x{int(r['gpus_per_node'])}"
        loss_txt = _ci(loss, lo, hi, "{:.1f}%", d.label)
        nums = {"world_size": p, "placement": topo(r), "placement_class": r["placement_class"],
                "loss_pct": _num(loss, 2), "loss_pct_ci": [_num(lo, 2), _num(hi, 2)],
                "inter_samples_per_s": _num(r["samples_per_s_mean"], 1),
                "intra_samples_per_s": _num(r["intra_samples_per_s"], 1), "threshold_pct": penalty_pct,
                "n_ok": int(r["n_ok"]), "intra_n_ok": int(r["intra_n_ok"])}
        head = f"{r['model']}: {topo(r)} vs 1x{p} at world size {p}: throughput loss {loss_txt}"
        if r["placement_class"] == SIMULATED:
            out.append(guideline(gid, "comm", "not_enough_data",
                                 f"{head}; both 'nodes' ran on one host, so this measures process placement on one "
                                 f"machine, not a network: no topology advice. Measure on two real nodes.", rule, nums))
            continue
        s = side(loss, lo, hi, penalty_pct)
        unsure = []
        intra_key = {**key_of(r), "nodes": 1, "gpus_per_node": p, "link_mbit": str(0.0)}
        for where, n_ok, key in ((topo(r), int(r["n_ok"]), key_of(r)), (f"1x{p}", int(r["intra_n_ok"]), intra_key)):
            k = more_repeats(n_ok, loss, lo, hi, penalty_pct, min_repeats)
            if s == "straddles" or n_ok < min_repeats:
                unsure.append((where, k, key))
        rests = [(topo(r), r["n_ok"]), (f"1x{p}", r["intra_n_ok"])]
        if unsure:
            out.append(rests_on(guideline(gid, "comm", "inconclusive", f"{head} — the data do not decide whether it "
                                          f"exceeds the {penalty_pct:g}% threshold.", rule, nums, settle_text(unsure),
                                          unsure), rests))
            continue
        keep = s == "above"
        nums["keep_within_node"] = keep
        verdict = (f"above the {penalty_pct:g}% threshold → keep jobs within one node" if keep
                   else f"below the {penalty_pct:g}% threshold → spreading over nodes is fine")
        if is_emulated(r["placement_class"]):
            # a link whose rate we set, not a cluster's network: advice about that link only
            verdict += (" — over this emulated link (one host, its rate set by the study), not advice about a "
                        "real cluster's network")
        out.append(rests_on(guideline(gid, "comm", "advice", f"{head} ({float(r['samples_per_s_mean']):,.0f} vs "
                                      f"{float(r['intra_samples_per_s']):,.0f} samples/s) → {verdict}.", rule, nums),
                            rests))
    return out


def comm_share(table: pd.DataFrame, experiment: str, share_pct: float, d: Decide) -> list[dict]:
    """Points of one experiment (world size > 1) whose exposed communication exceeds share_pct of a step."""
    min_repeats = d.min_repeats
    rule = (f"exposed_comm_pct (synced − no_sync step, as % of the synced step; mean over repeats with {d.label} CI) > "
            f"{share_pct:g}% at a DDP point of the {experiment} experiment with world size > 1")
    gid = f"comm-share-{experiment}"
    t = table[(table["world_size"] > 1) & table["exposed_comm_pct_mean"].notna() & table["ddp"].astype(bool)]
    if t.empty:
        return [guideline(gid, "comm", "not_enough_data", f"{experiment} points with world size > 1 and a measured "
                          f"exposed communication (comm probe enabled, status ok).", rule, {"threshold_pct": share_pct})]
    over, under, unsure = [], [], []
    cited = {}
    for _, r in t.sort_values(["world_size", "nodes"]).iterrows():
        m = float(r["exposed_comm_pct_mean"])
        lo, hi = deciding(r, "exposed_comm_pct")
        where = f"{r['model']} {topo(r)}"
        cited[where] = [_num(m, 2), _num(lo, 2), _num(hi, 2)]
        s = side(m, lo, hi, share_pct)
        txt = f"{topo(r)} {_ci(m, lo, hi, '{:.1f}%', d.label)}"
        if s == "straddles" or r["n_ok"] < min_repeats:
            unsure.append((txt, (topo(r), more_repeats(int(r["n_ok"]), m, lo, hi, share_pct, min_repeats), key_of(r))))
        elif s == "above":
            over.append(txt)
        else:
            under.append(txt)
    rests = [(f"{r['model']} {topo(r)}", r["n_ok"]) for _, r in t.iterrows()]
    nums = {"threshold_pct": share_pct, "decision_level": d.level, "exposed_comm_pct_mean_ci": cited,
            "num_points_over": len(over),
            "num_points_under": len(under), "num_points_unsure": len(unsure)}
    parts = []
    if over:
        parts.append(f"exposed communication exceeds {share_pct:g}% of a step at {', '.join(over)}: there the "
                     f"all-reduce is not hidden behind the backward pass; grow the per-rank work (batch, width) or "
                     f"expect the efficiency loss shown above")
    if under:
        parts.append(f"it stays below {share_pct:g}% at {', '.join(under)}")
    if unsure:
        parts.append(f"undecided at {', '.join(u[0] for u in unsure)}")
        return [rests_on(guideline(gid, "comm", "inconclusive", f"{experiment}: " + "; ".join(parts) + ".", rule,
                                   nums, settle_text([u[1] for u in unsure]), [u[1] for u in unsure]), rests)]
    return [rests_on(guideline(gid, "comm", "advice", f"{experiment}: " + "; ".join(parts) + ".", rule, nums), rests)]


def _rel(a: pd.Series, b: pd.Series, metric: str) -> tuple[float, float, float]:
    """a/b of two configurations' means with a deciding interval combining their relative half-widths
    in quadrature (delta method on the two t intervals); NaN when either has one repeat."""
    r = a[f"{metric}_mean"] / b[f"{metric}_mean"]
    ha = (deciding(a, metric)[1] - a[f"{metric}_mean"]) / a[f"{metric}_mean"]
    hb = (deciding(b, metric)[1] - b[f"{metric}_mean"]) / b[f"{metric}_mean"]
    if not (_ok(ha) and _ok(hb)):
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
                "compute_samples_per_s_per_rank": {str(int(b)): _num(r[f"{metric}_mean"], 1) for b, r in by_b.iterrows()},
                "relative_to_best": {str(b): _num(v) for b, (v, _, _) in rel.items()},
                "relative_to_best_ci": {str(b): [_num(lo), _num(hi)] for b, (_, lo, hi) in rel.items()}}
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
                f"{_ci(v, lo, hi, '{:.0%}', d.label)} of the best (b={best_b})")
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


def memory(model_size: pd.DataFrame, d: Decide) -> list[dict]:
    """Peak memory vs parameters over the width sweep. CUDA allocator peaks: a line peak = fixed +
    slope * params with its fit quality, extrapolated to common device memories at most 4x beyond the
    largest measured parameter count. CPU peak RSS (runtime, allocator caches, libraries): measured
    values only, never extrapolated."""
    min_repeats = d.min_repeats
    rule = (f"CUDA allocator peaks only: least-squares line of peak bytes vs parameters over the ok widths (slope with "
            f"95% CI, R²), parameters fitting in Y GB = (Y GB − fixed) / slope, reported only up to "
            f"{MAX_EXTRAPOLATION:g}x the largest measured parameter count; CPU RSS: measured values only")
    t = model_size[model_size["peak_mem_bytes_mean"].notna() & model_size["num_params"].notna()] \
        if len(model_size) else model_size
    if t is None or t.empty:
        return [guideline("memory", "model_size", "not_enough_data", "model-size points (status ok) with a "
                          "peak-memory measurement.", rule, {})]
    out = []
    for fam, g in t.assign(family=[model_family(m) for m in t["model"]]).groupby("family"):
        g = g.sort_values("num_params")
        gid = f"memory-{fam}"
        kinds = set(g["mem_kind"].dropna())
        measured = ", ".join(f"{float(r['peak_mem_bytes_mean']) / GIB:.3f} GiB at width {int(r['hidden_width'])} "
                             f"({int(r['num_params']):,} params)" for _, r in g.iterrows())
        nums = {"mem_kind": sorted(kinds), "peak_mem_gib_by_width": {str(int(r["hidden_width"])):
                _num(float(r["peak_mem_bytes_mean"]) / GIB) for _, r in g.iterrows()},
                "params_per_gb_by_width": {str(int(r["hidden_width"])): _num(r["params_per_gb"], 1) for _, r in g.iterrows()}}
        if kinds != {CUDA_PEAK}:
            out.append(guideline(gid, "model_size", "not_enough_data",
                                 f"{fam}: measured peak memory {measured} ({', '.join(sorted(kinds)) or 'kind unknown'}). "
                                 f"Process RSS includes the runtime and allocator caches, so no memory limit is "
                                 f"extrapolated from it; that needs CUDA allocator peaks ({CUDA_PEAK}).", rule, nums))
            continue
        thin = [(f"width {int(r['hidden_width'])}", min_repeats - int(r["n_ok"]), key_of(r)) for _, r in g.iterrows()
                if r["n_ok"] < min_repeats]
        if len(g) < 3:
            out.append(guideline(gid, "model_size", "inconclusive",
                                 f"{fam}: measured peak memory {measured}; a line through {len(g)} width(s) has no fit "
                                 f"quality, so nothing is extrapolated.", rule, nums,
                                 settle_text(thin) + ("; " if thin else "") + f"measure {3 - len(g)} more width(s)",
                                 thin))
            continue
        fit = linear_fit(g["num_params"].astype(float), g["peak_mem_bytes_mean"].astype(float))
        slope, fixed = fit["slope"], fit["intercept"]
        top = float(g["num_params"].max())
        nums.update(bytes_per_param=_num(slope, 3), bytes_per_param_ci=[_num(fit["slope_ci_lo"], 3),
                    _num(fit["slope_ci_hi"], 3)], fixed_gib=_num(fixed / GIB), r2=_num(fit["r2"], 4),
                    residual_se_gib=_num(fit["residual_se"] / GIB, 5), largest_params=int(top))
        head = (f"{fam}: peak memory grows by {_ci(slope, fit['slope_ci_lo'], fit['slope_ci_hi'], '{:,.1f}')} B per "
                f"parameter over a fixed {fixed / GIB:.3f} GiB (R² {fit['r2']:.3f}, residual "
                f"{fit['residual_se'] / GIB * 1024:.1f} MiB; measured {measured})")
        if thin or not fit["slope_ci_lo"] > 0:
            why = thin if thin else [("another width", 1, None)]
            out.append(guideline(gid, "model_size", "inconclusive", head + " — the slope is not established.",
                                 rule, nums, settle_text(why), thin))
            continue
        limit = MAX_EXTRAPOLATION * top
        fits = {}
        for b in BUDGETS_GB:
            cap = (b * GB - fixed) / slope
            fits[str(b)] = int(cap) if cap <= limit else None
        nums["max_params_fitting_gb"] = fits
        listed = [f"up to {v:,} parameters fit in {k} GB" for k, v in fits.items() if v is not None]
        beyond = [k for k, v in fits.items() if v is None]
        text = head + " → " + ("; ".join(listed) + "; " if listed else "")
        if beyond:
            text += (f"{', '.join(beyond)} GB hold more than {MAX_EXTRAPOLATION:g}x the largest measured model "
                     f"({int(limit):,} parameters): beyond what this line may extrapolate")
        out.append(guideline(gid, "model_size", "advice", text.rstrip("; ") + " (activations grow with the per-rank "
                             "batch).", rule, nums))
    return out


def _fmt_time(s: float) -> str:
    return f"{s:,.1f} s" if s < 3600 else f"{s / 3600:,.2f} h"


def recommendation(model_json: dict | None, max_mape_pct: float) -> list[dict]:
    """Per model: where to run the configured strong-scaling work, from the performance model."""
    rule = (f"performance model (model.json): least predicted time with predicted efficiency ≥ the threshold, and "
            f"fewest GPU-hours, over the real placement classes; advice only when the model's leave-one-world-size-"
            f"out MAPE is known and ≤ {max_mape_pct:g}% for every placement class it compares")
    models = (model_json or {}).get("models") or {}
    if not models:
        reason = (model_json or {}).get("reason", "no performance model was fitted")
        return [guideline("deploy", "deploy", "not_enough_data", f"a performance model ({reason}).", rule, {})]
    out = []
    for model, m in sorted(models.items()):
        if m.get("work") is None:
            continue  # not in the strong experiment: no configured work to place
        rec = m.get("recommendation")
        gid = f"deploy-{model}"
        if not rec or rec.get("reason") or "cheapest" not in rec:
            why = (rec or {}).get("reason") or m.get("reason") or "no prediction"
            out.append(guideline(gid, "deploy", "not_enough_data", f"{model}: a validated prediction ({why}).", rule, {}))
            continue
        w = rec["work"]
        batch = (f"global batch {w['global_batch']}" if w["batch_rule"] == "fixed global batch"
                 else f"per-rank batch {w['batch_per_rank']}")
        work = f"{w['samples']:,} samples × {w['epochs']} epochs, {batch}"

        def pick(c):
            t = c["time_s"]
            band = f" [{_fmt_time(t['lo'])}, {_fmt_time(t['hi'])}]" if t["lo"] is not None else ""
            extra = ", extrapolated" if c["extrapolated"] else ""
            return (f"{c['world_size']} rank(s), {c['placement_class']}: {_fmt_time(t['value'])}{band}, "
                    f"{c['gpu_hours']:.3g} GPU-h, efficiency {c['efficiency']['value']:.0%}{extra} (model error: "
                    f"{c['validation']})")

        fastest, cheapest = rec.get("fastest"), rec["cheapest"]
        nums = {"work": w, "efficiency_threshold": rec["efficiency_threshold"],
                "fastest": {k: fastest[k] for k in ("world_size", "placement_class", "gpu_hours")} if fastest else None,
                "cheapest": {k: cheapest[k] for k in ("world_size", "placement_class", "gpu_hours")}}
        text = (f"{model}, {work}: fastest with predicted efficiency ≥ {rec['efficiency_threshold']:.0%}: "
                f"{pick(fastest) if fastest else 'none'}; fewest GPU-hours: {pick(cheapest)}.")
        if rec.get("not_considered"):
            text += " Not considered: " + "; ".join(rec["not_considered"]) + "."
        # every class the choice compared, not only the winners': an untested prediction for 8 ranks
        # decides "1 rank is fastest" as much as the 1-rank prediction does
        vals = {cls: e["validation"] for cls, e in m["placements"].items()
                if e.get("predictions") and cls in REAL_PLACEMENTS}
        bad = [(cls, v) for cls, v in vals.items() if v.get("loo_mape_pct") is None or v["loo_mape_pct"] > max_mape_pct]
        if bad:
            settle = "; ".join(
                f"{cls}: " + (f"LOO MAPE {v['loo_mape_pct']:.1f}% > {max_mape_pct:g}%: more repeats or world sizes"
                              if v.get("loo_mape_pct") is not None else
                              f"{v.get('reason', 'not validated')} — measure three or more world sizes there")
                for cls, v in bad)
            out.append(guideline(gid, "deploy", "inconclusive", text, rule, nums, settle))
            continue
        out.append(guideline(gid, "deploy", "advice", text, rule, nums))
    if not out:
        out.append(guideline("deploy", "deploy", "not_enough_data", "strong-scaling points: the recommendation "
                             "places the configured strong-scaling work.", rule, {}))
    return out


def compute_guidelines(tables: dict, thresholds: dict, model_json: dict | None = None) -> list[dict]:
    """All guidelines, in report order. `tables` as tables.compute_tables returns (or read back from
    CSV); `thresholds` = the config's report section; `model_json` = perfmodel.build_model's output."""
    eff = float(thresholds.get("efficiency_threshold", 0.75))
    d = Decide(int(thresholds.get("min_repeats", 3)), float(thresholds.get("decision_level", 0.95)))
    empty = pd.DataFrame(columns=["model", "world_size", "nodes", "gpus_per_node", "ddp", "placement_class",
                                  "batch_per_rank", "n_ok"])

    def get(name):
        t = tables.get(name)
        return empty.copy() if t is None else t.copy()

    strong, weak, comm, ms = get("strong"), get("weak"), get("comm"), get("model_size")
    need = {"strong": ["efficiency", "efficiency_ci_lo", "efficiency_ci_hi", "baseline_world_size"],
            "comm": ["inter_vs_intra_loss_pct", "inter_vs_intra_loss_pct_ci_lo", "inter_vs_intra_loss_pct_ci_hi",
                     "intra_samples_per_s", "intra_n_ok", "samples_per_s_mean"],
            "model_size": ["peak_mem_bytes_mean", "num_params", "params_per_gb", "mem_kind", "hidden_width"]}
    for name, t in (("strong", strong), ("comm", comm), ("model_size", ms), ("weak", weak)):
        for col in need.get(name, []) + [f"exposed_comm_pct_{s}" for s in ("mean", "ci_lo", "ci_hi")] + [
                f"compute_samples_per_s_per_rank_{s}" for s in ("mean", "ci_lo", "ci_hi")]:
            if col not in t:
                t[col] = pd.Series(dtype=float)
        if "ddp" not in t or t["ddp"].isna().all():
            t["ddp"] = True
        t["ddp"] = t["ddp"].fillna(True).astype(bool)
    out = []
    out += strong_efficiency(strong, eff, d)
    out += inter_node(comm, float(thresholds.get("inter_node_penalty_pct", 10)), d)
    for name, t in (("strong", strong), ("weak", weak), ("comm", comm)):
        out += comm_share(t, name, float(thresholds.get("comm_share_pct", 20)), d)
    for name, t in (("strong", strong), ("weak", weak)):
        out += per_rank_batch(t, name, eff, d)
    out += memory(ms, d)
    from .ddp_guideline import ddp_settings  # it builds on this module's helpers

    out += ddp_settings(tables.get("ddp"), float(thresholds.get("ddp_loss_tolerance_pct", 5)), d, model_json)
    out += recommendation(model_json, float(thresholds.get("model_max_mape_pct", 25)))
    return out
