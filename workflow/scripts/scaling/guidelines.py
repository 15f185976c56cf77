"""Deployment guidelines: explicit rules over the scaling tables. Each guideline says what to do,
which rule produced it and the numbers it cites; when the data do not allow a rule it says what is
missing instead ("not enough data: needs ...").

Thresholds come from the config's `report:` section (passed in as `thresholds`).
"""

from __future__ import annotations

import math

import pandas as pd

GIB = 2**30
GB = 1e9
# memory budgets of common accelerators, for "a width fits in Y GB" (an extrapolation of the fit)
BUDGETS_GB = (16, 40, 80)


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _num(x, nd=4):
    """A JSON-able rounded number (None for NaN)."""
    if not _ok(x):
        return None
    return round(float(x), nd)


def _topo(row) -> str:
    return f"{int(row['nodes'])}x{int(row['gpus_per_node'])}"


NOISY_PCT = 20.0  # a 95% CI half-width above this % of the mean makes a guideline say it is noisy


def _ci_pct(rows: pd.DataFrame, metric: str) -> float:
    """Largest 95% CI half-width over the rows, as % of the mean (NaN when no row has a CI)."""
    if f"{metric}_ci_hi" not in rows:
        return float("nan")
    half = 100 * (rows[f"{metric}_ci_hi"] - rows[f"{metric}_mean"]) / rows[f"{metric}_mean"]
    half = half.dropna()
    return float(half.max()) if len(half) else float("nan")


def _noise_note(pct: float) -> str:
    if _ok(pct) and pct > NOISY_PCT:
        return (f" — caution: noisy, the 95% CI of the throughput reaches ±{pct:.0f}% of the mean; "
                f"add repeats before acting on this")
    return ""


def guideline(gid: str, topic: str, text: str, rule: str, numbers: dict, enough: bool = True) -> dict:
    return {"id": gid, "topic": topic, "status": "advice" if enough else "not_enough_data",
            "text": text if enough else f"Not enough data: {text}", "rule": rule, "numbers": numbers}


def strong_efficiency(strong: pd.DataFrame, threshold: float) -> list[dict]:
    """Largest world size whose strong-scaling efficiency is >= threshold (per model). At a world
    size measured in several placements the best placement counts."""
    rule = (f"largest world size p with efficiency(p) = speedup(p) / (p / p_base) >= {threshold:.0%}, "
            f"p_base = smallest measured world size")
    out = []
    models = sorted(strong["model"].unique()) if len(strong) else []
    for model in models or [None]:
        g = strong[(strong["model"] == model) & strong["efficiency"].notna()] if model else strong.iloc[0:0]
        gid = f"strong-efficiency-{model}" if model else "strong-efficiency"
        if g.empty or g["world_size"].nunique() < 2:
            out.append(guideline(gid, "strong", "strong-scaling points measured (status ok) at two or more world "
                                 f"sizes{' for ' + model if model else ''} to compute an efficiency.", rule,
                                 {"world_sizes_measured": sorted(int(p) for p in g["world_size"].unique())},
                                 enough=False))
            continue
        best = g.sort_values("efficiency", ascending=False).groupby("world_size", sort=True).head(1)
        best = best.sort_values("world_size")
        eff = {int(r["world_size"]): float(r["efficiency"]) for _, r in best.iterrows()}
        where = {int(r["world_size"]): _topo(r) for _, r in best.iterrows()}
        base = int(best["baseline_world_size"].iloc[0])
        passing = [p for p, e in eff.items() if p > base and e >= threshold]
        failing = [p for p, e in eff.items() if p > base and e < threshold]
        listing = ", ".join(f"{eff[p]:.1%} at {p} ({where[p]})" for p in eff)
        noise = _ci_pct(g, "samples_per_s")
        nums = {"threshold": threshold, "baseline_world_size": base, "max_ci_half_width_pct": _num(noise, 1),
                "efficiency_by_world_size": {str(p): _num(e) for p, e in eff.items()},
                "placement_by_world_size": {str(p): where[p] for p in eff}}
        if passing:
            chosen = max(passing)
            nums["chosen_world_size"] = chosen
            above = [p for p in failing if p > chosen]
            tail = (f"; beyond it efficiency drops below {threshold:.0%} (measure more world sizes between "
                    f"{chosen} and {min(above)} to narrow it)" if above
                    else "; that is the largest world size measured, so larger ones may still qualify")
            text = (f"{model}: largest world size with strong-scaling efficiency ≥ {threshold:.0%}: "
                    f"{chosen} ranks (efficiency {listing}){tail}{_noise_note(noise)}.")
        else:
            nums["chosen_world_size"] = base
            text = (f"{model}: no world size above {base} keeps strong-scaling efficiency ≥ {threshold:.0%} "
                    f"({listing}) → for a fixed problem of this size, use {base} rank(s) or a larger problem"
                    f"{_noise_note(noise)}.")
        out.append(guideline(gid, "strong", text, rule, nums))
    return out


def inter_node(comm: pd.DataFrame, penalty_pct: float) -> list[dict]:
    """Inter- vs intra-node throughput at equal world size: loss > penalty_pct -> keep jobs in one node."""
    rule = (f"loss = 100 * (intra - inter) / intra samples/s at equal world size; loss > {penalty_pct:g}% "
            f"→ keep jobs within one node, else spreading over nodes is fine")
    pairs = comm[comm["inter_vs_intra_loss_pct"].notna()] if len(comm) else comm
    if pairs is None or pairs.empty:
        return [guideline("inter-node", "comm", "communication points at the same world size both within one node "
                          "(1 x p) and across nodes (n x p/n), both with status ok.", rule,
                          {"threshold_pct": penalty_pct}, enough=False)]
    out = []
    for _, r in pairs.sort_values(["model", "world_size", "nodes"]).iterrows():
        loss = float(r["inter_vs_intra_loss_pct"])
        p = int(r["world_size"])
        intra, inter = float(r["intra_samples_per_s"]), float(r["samples_per_s_mean"])
        above = loss > penalty_pct
        if above:
            verdict = f"above the {penalty_pct:g}% threshold → keep jobs within one node"
        elif loss > 0:
            verdict = f"within the {penalty_pct:g}% threshold → spreading over nodes is fine"
        else:
            verdict = "no inter-node penalty → spreading over nodes is fine"
        noise = _ci_pct(comm[(comm["model"] == r["model"]) & (comm["world_size"] == p)], "samples_per_s")
        change = f"loses {loss:.1f}%" if loss >= 0 else f"gains {-loss:.1f}%"
        text = (f"{r['model']}: inter-node placement {_topo(r)} {change} throughput vs intra-node 1x{p} at world "
                f"size {p} ({inter:,.0f} vs {intra:,.0f} samples/s) → {verdict}{_noise_note(noise)}.")
        out.append(guideline(f"inter-node-{r['model']}-{_topo(r)}", "comm", text, rule,
                             {"world_size": p, "placement": _topo(r), "loss_pct": _num(loss, 2),
                              "inter_samples_per_s": _num(inter, 1), "intra_samples_per_s": _num(intra, 1),
                              "threshold_pct": penalty_pct, "keep_within_node": above,
                              "max_ci_half_width_pct": _num(noise, 1)}))
    return out


def comm_share(tables: dict, share_pct: float) -> list[dict]:
    """Points (any study, world size > 1) whose median exposed communication exceeds share_pct of a step."""
    rule = (f"exposed_comm_pct (median over repeats; synced − no_sync step, as % of the synced step) "
            f"> {share_pct:g}% at a point with world size > 1")
    rows = []
    for study in ("strong", "weak", "comm"):
        t = tables.get(study)
        if t is None or t.empty:
            continue
        sub = t[(t["world_size"] > 1) & t["exposed_comm_pct_median"].notna()]
        for _, r in sub.iterrows():
            rows.append((study, r["model"], _topo(r), int(r["world_size"]), float(r["exposed_comm_pct_median"])))
    if not rows:
        return [guideline("comm-share", "comm", "points with world size > 1 and a measured exposed communication "
                          "(comm probe enabled, status ok).", rule, {"threshold_pct": share_pct}, enough=False)]
    over = [x for x in rows if x[4] > share_pct]
    cited = {f"{s} {m} {t}": _num(v, 2) for s, m, t, _, v in rows}
    if over:
        worst = max(over, key=lambda x: x[4])
        lst = ", ".join(f"{s} {t} ({v:.1f}%)" for s, _, t, _, v in sorted(over, key=lambda x: (x[3], x[0])))
        smallest = min(x[3] for x in over)
        text = (f"Exposed communication exceeds {share_pct:g}% of a step at {len(over)} of {len(rows)} multi-rank "
                f"points: {lst}; worst {worst[4]:.1f}% ({worst[0]} {worst[2]}), first seen at world size {smallest}. "
                f"There the all-reduce is not hidden behind the backward pass: grow the per-rank work (batch, "
                f"width) or expect the efficiency loss shown above.")
    else:
        worst = max(rows, key=lambda x: x[4])
        text = (f"Exposed communication stays ≤ {share_pct:g}% of a step at every multi-rank point "
                f"(worst {worst[4]:.1f}% at {worst[0]} {worst[2]}).")
    return [guideline("comm-share", "comm", text, rule,
                      {"threshold_pct": share_pct, "exposed_comm_pct_median": cited,
                       "num_points_over": len(over), "num_points": len(rows)})]


def per_rank_batch(strong: pd.DataFrame, weak: pd.DataFrame, threshold: float) -> list[dict]:
    """Per-rank batch below which per-rank throughput falls off: at each world size and placement,
    compare the per-rank throughput of the strong (per-rank batch = global / p) and weak (fixed per-rank
    batch) points; a batch whose per-rank throughput is below threshold x the best at that world size
    is too small."""
    rule = (f"at equal world size and placement, per-rank batch b is too small when its per-rank samples/s "
            f"< {threshold:.0%} of the best per-rank samples/s over the measured batches")
    frames = [t.assign(study=s) for s, t in (("strong", strong), ("weak", weak)) if t is not None and not t.empty]
    pts = pd.concat(frames) if frames else pd.DataFrame()
    if not pts.empty:
        pts = pts[pts["samples_per_s_per_rank_mean"].notna()]
    groups = []
    if not pts.empty:
        for key, g in pts.groupby(["model", "world_size", "nodes", "gpus_per_node"]):
            by_b = g.groupby("batch_per_rank")["samples_per_s_per_rank_mean"].mean().sort_index()
            if len(by_b) >= 2:
                groups.append((key, by_b, _ci_pct(g, "samples_per_s_per_rank")))
    if not groups:
        return [guideline("per-rank-batch", "weak", "strong- and weak-scaling points at the same world size with "
                          "different per-rank batches (e.g. strong scaling with a fixed global_batch).", rule,
                          {"threshold": threshold}, enough=False)]
    out = []
    for (model, p, n, g), by_b, noise in groups:
        best_b = int(by_b.idxmax())
        best = float(by_b.max())
        rel = {int(b): float(v) / best for b, v in by_b.items()}
        # only batches below the best one can be "too small"; a larger batch that is slower is a
        # different effect (caches, memory) and is reported as such
        too_small = [b for b, r in rel.items() if b < best_b and r < threshold]
        too_large = [b for b, r in rel.items() if b > best_b and r < threshold]
        listing = ", ".join(f"{v:,.0f} at {int(b)}" for b, v in by_b.items())
        where = f"{model} at world size {int(p)} ({int(n)}x{int(g)})"
        nums = {"world_size": int(p), "placement": f"{int(n)}x{int(g)}", "threshold": threshold,
                "per_rank_samples_per_s_by_batch": {str(int(b)): _num(v, 1) for b, v in by_b.items()},
                "relative_to_best": {str(b): _num(r) for b, r in rel.items()}, "best_batch": best_b,
                "max_ci_half_width_pct": _num(noise, 1)}
        parts = []
        if too_small:
            cutoff = max(too_small)
            keep = min(b for b in rel if b > cutoff)
            nums.update({"falls_off_at_batch": cutoff, "min_good_batch": keep})
            parts.append(f"per-rank throughput falls to {rel[cutoff]:.0%} of the best at per-rank batch {cutoff} → "
                         f"keep the per-rank batch ≥ {keep}; in strong scaling the per-rank batch is global batch / p, "
                         f"so scale the global batch with the ranks")
        else:
            nums.update({"falls_off_at_batch": None, "min_good_batch": min(rel)})
            parts.append(f"per-rank throughput stays ≥ {threshold:.0%} of the best down to per-rank batch {min(rel)} "
                         f"→ per-rank batches ≥ {min(rel)} are fine (smaller ones were not measured)")
        if too_large:
            nums["slower_larger_batches"] = too_large
            parts.append(f"larger per-rank batches ({', '.join(map(str, too_large))}) ran slower per sample than "
                         f"{best_b} ({', '.join(f'{rel[b]:.0%}' for b in too_large)} of it): no gain from going above "
                         f"{best_b} here")
        text = f"{where}: " + "; ".join(parts) + f" (samples/s per rank: {listing}){_noise_note(noise)}."
        out.append(guideline(f"per-rank-batch-{model}-p{int(p)}-{int(n)}x{int(g)}", "weak", text, rule, nums))
    return out


def _linfit(x: list[float], y: list[float]) -> tuple[float, float]:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx
    return slope, my - slope * mx


def memory(model_size: pd.DataFrame) -> list[dict]:
    """Params per GB at the largest width, and a linear fit peak = fixed + slope * width (and per
    parameter) over the width sweep, extrapolated to common device memories (a model, not a measurement)."""
    rule = ("params per GB = num_params / peak bytes × 1e9 at the largest measured width; linear least-squares "
            "fit of peak memory vs hidden width (and vs parameters) over the ok widths; width fitting in Y GB = "
            "(Y GB − fixed) / bytes per unit width")
    t = model_size[model_size["peak_mem_bytes_mean"].notna() & model_size["num_params"].notna()] \
        if len(model_size) else model_size
    if t is None or t.empty:
        return [guideline("memory", "model_size", "model-size points (status ok) with a peak-memory measurement.",
                          rule, {}, enough=False)]
    out = []
    for model_group, g in t.assign(base=t["model"].str.replace(r"\[.*\]", "", regex=True).str.strip()).groupby("base"):
        g = g.sort_values("hidden_width")
        top = g.iloc[-1]
        peak_gib = float(top["peak_mem_bytes_mean"]) / GIB
        nums = {"largest_width": int(top["hidden_width"]), "num_params": int(top["num_params"]),
                "peak_mem_gib": _num(peak_gib), "params_per_gb": _num(top["params_per_gb"], 1),
                "mem_kind": top.get("mem_kind")}
        head = (f"{model_group}: {float(top['params_per_gb']):,.0f} params per GB of peak memory; the largest width "
                f"measured ({int(top['hidden_width'])}, {int(top['num_params']):,} params) peaks at {peak_gib:.3f} GiB")
        if top.get("mem_kind") == "cpu_peak_rss":
            head += " (CPU: process peak RSS, includes the runtime's fixed footprint)"
        if len(g) < 2:
            text = head + ". Needs two or more widths to fit how memory grows with width."
            out.append(guideline(f"memory-{model_group}", "model_size", text, rule, nums))
            continue
        w = g["hidden_width"].astype(float).tolist()
        mem = g["peak_mem_bytes_mean"].astype(float).tolist()
        slope_w, fixed = _linfit(w, mem)
        slope_p, _ = _linfit(g["num_params"].astype(float).tolist(), mem)
        nums.update({"bytes_per_unit_width": _num(slope_w, 1), "bytes_per_param": _num(slope_p, 2),
                     "fixed_gib": _num(fixed / GIB)})
        if slope_w <= 0:
            text = (head + f". Peak memory does not grow measurably with width over widths "
                    f"{int(w[0])}–{int(w[-1])} (fit slope {slope_w:,.0f} B per unit width): the fixed footprint "
                    f"({fixed / GIB:.3f} GiB) dominates, so memory does not limit the width in this range.")
        else:
            fits = {str(b): int((b * GB - fixed) / slope_w) for b in BUDGETS_GB}
            nums["max_width_fitting_gb"] = fits
            text = (head + f". Peak grows by {slope_w:,.0f} B per unit of hidden width ({slope_p:,.1f} B per parameter) "
                    f"over a fixed {fixed / GIB:.3f} GiB → by this linear fit a width up to "
                    + ", ".join(f"{v:,} fits in {k} GB" for k, v in fits.items())
                    + " (extrapolated; activations grow with the per-rank batch).")
        out.append(guideline(f"memory-{model_group}", "model_size", text, rule, nums))
    return out


def compute_guidelines(tables: dict, thresholds: dict) -> list[dict]:
    """All guidelines, in report order. `tables` as tables.compute_tables returns (or read back from
    CSV); `thresholds` = the config's report section (efficiency_threshold, inter_node_penalty_pct,
    comm_share_pct)."""
    eff = float(thresholds.get("efficiency_threshold", 0.75))
    empty = pd.DataFrame(columns=["model", "world_size", "nodes", "gpus_per_node"])

    def get(name):
        t = tables.get(name)
        return empty.copy() if t is None else t.copy()

    strong, weak, comm, ms = get("strong"), get("weak"), get("comm"), get("model_size")
    for name, t, col in (("strong", strong, "efficiency"), ("comm", comm, "inter_vs_intra_loss_pct"),
                         ("model_size", ms, "peak_mem_bytes_mean"), ("model_size", ms, "num_params"),
                         ("model_size", ms, "params_per_gb"), ("weak", weak, "samples_per_s_per_rank_mean"),
                         ("strong", strong, "samples_per_s_per_rank_mean"), ("strong", strong, "batch_per_rank"),
                         ("weak", weak, "batch_per_rank")):
        if col not in t:
            t[col] = pd.Series(dtype=float)
    for t in (strong, weak, comm):
        if "exposed_comm_pct_median" not in t:
            t["exposed_comm_pct_median"] = pd.Series(dtype=float)
    out = []
    out += strong_efficiency(strong, eff)
    out += inter_node(comm, float(thresholds.get("inter_node_penalty_pct", 10)))
    out += comm_share({"strong": strong, "weak": weak, "comm": comm}, float(thresholds.get("comm_share_pct", 20)))
    out += per_rank_batch(strong, weak, eff)
    out += memory(ms)
    return out
