"""Operator speed vs scaling: how a faster KAN operator changes what data parallelism buys.

A faster operator shrinks the compute of a step while the gradient all-reduce stays the same size
(same parameters, same bytes), so the exposed all-reduce becomes a larger share of the step and DDP's
efficiency drops. The seed paper calls operator-level and data-parallel optimisations
"complementary"; measuring two implementations of the same model on the same machine tests that.

Per implementation (model family: kan-bspline is kanscale's KAN, pykan the seed paper's) and world
size of the strong experiment: the compute share of the step (no_sync step / synced step), the exposed
communication share (exposed / synced step), throughput and strong-scaling efficiency. At one rank
there is nothing to all-reduce: compute is the whole step by definition (the measured difference is
noise); elsewhere a share outside [0, 100] from timing noise is shown at its bound.

The crossover: the per-rank batch above which adding ranks pays off (speedup > 1 at p = 2 against one
rank, fixed global batch B = 2 b). From the performance model (model.json), where it was fitted:
    compute(b, P) = c0 + k_b b + k_bP b P;  2 ranks win when compute(2b) > compute(b) + exposed(2)
    <=> (k_b + k_bP P) b > exposed(2)  <=>  b > b* = exposed(2) / (k_b + k_bP P)
with exposed(2) = exposure x ring(2, n) of the intra-node link class. From the measured points
otherwise: the smallest measured per-rank batch at p = 2 whose speedup CI lies above 1 ("pays off"),
or the largest whose CI lies below 1 ("does not pay off at or below"); inconclusive in between.
"""

from __future__ import annotations

import pandas as pd

from ..common.columns import INTRA, SIMULATED, model_family
from ..common.fmt import about, error_text
from ..common.stats import as_number


def shares(strong: pd.DataFrame | None) -> pd.DataFrame:
    """One row per model x world size x placement of the strong experiment (DDP points)."""
    cols = ["family", "model", "world_size", "nodes", "gpus_per_node", "placement_class", "batch_per_rank", "step_ms",
            "compute_share_pct",
            "exposed_share_pct", "samples_per_s", "efficiency", "efficiency_ci_lo", "efficiency_ci_hi"]
    if strong is None or strong.empty:
        return pd.DataFrame(columns=cols)
    t = strong[[str(d) != "False" for d in strong.get("ddp", [True] * len(strong))]]
    rows = []
    for _, r in t.iterrows():
        step, nosync = as_number(r.get("step_time_s_mean")), as_number(r.get("nosync_step_time_s_mean"))
        exposed = as_number(r.get("exposed_comm_s_mean"))
        world = int(r["world_size"])
        compute = 100 * nosync / step if step and nosync is not None else None
        exposed_pct = 100 * exposed / step if step and exposed is not None else None
        if world == 1:  # nothing to all-reduce: the whole step is compute, the difference is timing noise
            compute, exposed_pct = (100.0, 0.0) if step else (None, None)
        elif compute is not None:  # a share of the step lies in [0, 100]; noise beyond is shown at the bound
            compute, exposed_pct = min(max(compute, 0.0), 100.0), min(max(exposed_pct, 0.0), 100.0)
        rows.append({
            "family": model_family(r["model"]), "model": r["model"], "world_size": world,
            "nodes": r.get("nodes"), "gpus_per_node": r.get("gpus_per_node"),
            "placement_class": r.get("placement_class"), "batch_per_rank": int(r["batch_per_rank"]),
            "step_ms": step * 1e3 if step else None,
            "compute_share_pct": compute, "exposed_share_pct": exposed_pct,
            "samples_per_s": as_number(r.get("samples_per_s_mean")), "efficiency": as_number(r.get("efficiency")),
            "efficiency_ci_lo": as_number(r.get("efficiency_ci_lo")), "efficiency_ci_hi": as_number(r.get("efficiency_ci_hi")),
        })
    return pd.DataFrame(rows, columns=cols).sort_values(["world_size", "placement_class", "family"])


def _resolved(prm: dict | None) -> bool:
    """A fitted term that the data determine: not at its bound, its CI above 0."""
    prm = prm or {}
    lo = as_number(prm.get("ci_lo"))
    return not prm.get("at_bound") and (lo is None or lo > 0)


def _model_crossover(entry: dict) -> dict | str:
    """b* from one model of model.json (intra-node link class), or why the model cannot give it."""
    params = ((entry.get("compute") or {}).get("params")) or {}
    intra = (entry.get("placements") or {}).get(INTRA) or {}
    comm = intra.get("comm") or {}
    validation = intra.get("validation") or {}
    if as_number(validation.get("loo_mape_pct")) is None:
        return "the intra-node model is not validated"
    per_sample_terms = [params.get(k) for k in ("per_sample_s", "per_sample_param_s") if params.get(k)]
    if not any(_resolved(t) for t in per_sample_terms):
        return "the model's per-sample compute cost is not resolved (at its bound 0, or its CI reaches 0)"
    k_b = as_number((params.get("per_sample_s") or {}).get("value")) or 0.0
    k_bp = as_number((params.get("per_sample_param_s") or {}).get("value")) or 0.0
    n_params = as_number(entry.get("num_params"))
    n_bytes = as_number(entry.get("grads_bytes"))
    alpha = as_number((comm.get("alpha_s") or {}).get("value"))
    beta = as_number((comm.get("beta_s_per_byte") or {}).get("value"))
    exposure = as_number((comm.get("exposure") or {}).get("value"))
    if None in (n_params, n_bytes, alpha, beta) or exposure is None:
        return "the model has no intra-node communication term"
    per_sample = k_b + k_bp * n_params
    exposed2 = exposure * (2 * alpha + n_bytes * beta)  # ring(2, n) = 2 alpha + 2 (1/2) n beta
    return {"per_rank_batch": exposed2 / per_sample, "exposed_2_ms": exposed2 * 1e3,
            "per_sample_us": per_sample * 1e6, "loo_mape_pct": as_number(validation.get("loo_mape_pct")),
            "source": "model"}


def _measured_crossover(rows: pd.DataFrame, strong: pd.DataFrame) -> dict:
    """From measured p = 2 intra-node points: speedup CI above / below 1 at each per-rank batch."""
    t = strong[(strong["world_size"] == 2) & (strong["placement_class"] == INTRA)]
    above, below = [], []
    for _, r in t.iterrows():
        lo, hi = as_number(r.get("speedup_ci_lo")), as_number(r.get("speedup_ci_hi"))
        b = int(r["batch_per_rank"])
        if lo is not None and lo > 1:
            above.append(b)
        elif hi is not None and hi < 1:
            below.append(b)
    if above:
        return {"source": "measured", "pays_off_from": min(above), "not_below": max(below) if below else None}
    if below:
        return {"source": "measured", "pays_off_from": None, "not_below": max(below)}
    return {"source": "measured", "pays_off_from": None, "not_below": None}


def crossovers(strong: pd.DataFrame | None, model_json: dict | None) -> dict[str, dict]:
    """{model: crossover} for every model of the strong experiment."""
    out: dict[str, dict] = {}
    if strong is None or strong.empty:
        return out
    models = (model_json or {}).get("models") or {}
    for model, g in strong.groupby("model"):
        c = _model_crossover(models[model]) if model in models else "no performance model"
        if isinstance(c, str):
            c = {**_measured_crossover(g, g), "why_not_model": c}
        out[model] = c
    return out


def crossover_text(c: dict) -> str:
    text = _crossover_text(c)
    return text + (f" (not from the model: {c['why_not_model']})" if c.get("why_not_model") else "")


def _crossover_text(c: dict) -> str:
    if c["source"] == "model":
        mape = f"model error within one node: {error_text(c['loo_mape_pct'])}"
        return (f"adding a second rank pays off above a per-rank batch of about {about(c['per_rank_batch'])} "
                f"(model: exposed all-reduce {c['exposed_2_ms']:.3f} ms at 2 ranks / compute "
                f"{c['per_sample_us']:.3f} µs per sample; {mape})")
    if c.get("pays_off_from") is not None:
        text = f"measured: 2 ranks beat 1 from a per-rank batch of {c['pays_off_from']} (speedup CI above 1)"
        return text + (f"; not at {c['not_below']} or below" if c.get("not_below") else "")
    if c.get("not_below") is not None:
        return (f"measured: 2 ranks do not beat 1 at per-rank batches up to {c['not_below']} (speedup CI below 1); "
                f"measure larger per-rank batches to find where they do")
    return "inconclusive: no p = 2 intra-node point whose speedup CI excludes 1; add repeats or batches"


def section(strong: pd.DataFrame | None, model_json: dict | None) -> dict:
    """What the report's "Operator speed vs scaling" section shows."""
    rows = shares(strong)
    families = sorted(set(rows["family"])) if len(rows) else []
    table = []
    for _, r in rows.iterrows():
        eff = "–" if r["efficiency"] is None or pd.isna(r["efficiency"]) else f"{100 * r['efficiency']:.1f}%"
        if eff != "–" and r["efficiency_ci_lo"] is not None and not pd.isna(r["efficiency_ci_lo"]) \
                and r["world_size"] > 1:
            eff += f" [{100 * r['efficiency_ci_lo']:.1f}, {100 * r['efficiency_ci_hi']:.1f}]"
        fmt = (lambda v, nd=1: "–" if v is None or pd.isna(v) else f"{v:,.{nd}f}")
        label = r["placement_class"] + (" (simulated)" if r["placement_class"] == SIMULATED else "")
        where = (f"{int(r['nodes'])}x{int(r['gpus_per_node'])}" if pd.notna(r["nodes"]) and pd.notna(r["gpus_per_node"])
                 else "–")
        table.append([r["model"], str(r["world_size"]), where, label, str(r["batch_per_rank"]), fmt(r["step_ms"], 3),
                      fmt(r["compute_share_pct"]), fmt(r["exposed_share_pct"]), fmt(r["samples_per_s"], 0), eff])
    cross = crossovers(strong, model_json)
    multi = rows[rows["world_size"] > 1] if len(rows) else rows
    # no multi-rank point has a no_sync step (runs imported from elsewhere): the shares are unknown
    no_probe = bool(len(multi)) and multi["compute_share_pct"].isna().all()
    return {"families": families, "comparable": len(families) >= 2, "no_probe": no_probe,
            "headers": ["model", "world size", "placement", "link class", "batch/rank", "step ms", "compute % of step",
                        "exposed comm % of step", "samples/s", "strong efficiency [95% CI]"],
            "rows": table, "crossovers": [{"model": m, "text": crossover_text(c)} for m, c in sorted(cross.items())]}
