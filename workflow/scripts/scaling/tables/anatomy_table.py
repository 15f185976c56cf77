"""What bounds a step, per implementation, experiment and world size (kan/probes/anatomy.py's record field,
averaged over a configuration's ok repeats): the measured synced step split into its fixed dispatch
cost, its per-sample compute (cost per sample x per-rank batch) and its exposed communication, the
operators it dispatches, and the bound (the largest part). The parts are measured apart, so they
need not add up to the step exactly; `other_ms` is what they leave.

A captured step (training.cuda_graphs, `captured`) has no all-reduce probe: on more than one rank its
communication is not measured (NaN, never 0), its dispatch is the rest of the replayed step, the
all-reduce included, and its bound is kan.probes.anatomy.captured_bound's (compute, or undecided)."""

from __future__ import annotations

import pandas as pd

from kan.probes.anatomy import PARTS, bound as largest, captured_bound

from .aggregate import GROUP

# GROUP (a configuration's key: the adaptive looks add repeats by it), then the parts; n_agree = the
# repeats whose own parts give the same bound as the means
COLUMNS = [*GROUP, "world_size", "placement_class", "batch_per_rank", "n", "n_agree", "step_ms", "dispatch_ms",
           "compute_ms", "communication_ms", "other_ms", "dispatch_share_pct", "ops_per_step", "gpu_busy_pct", "kernels", "bound",
           "captured", "dispatch_clamped"]
EXPERIMENTS = ("strong", "weak", "comm", "model_size")


def _kernels(g: pd.DataFrame) -> str | None:
    """The kernel path(s) the repeats ran, '+ graph' where the step was a CUDA graph replay (None: records
    from before the choice was recorded)."""
    if "kernel_path" not in g or g["kernel_path"].isna().all():
        return None
    captured = "step_kind" in g and (g["step_kind"] == "captured").any()
    return "+".join(sorted(set(g["kernel_path"].dropna()))) + (" + graph" if captured else "")


def _bound(parts: dict[str, float], captured: bool, world_size: int) -> str | None:
    """A configuration's (or one repeat's) bound: the largest part, or captured_bound's for a captured step."""
    if captured:
        return captured_bound(parts["compute"], parts["dispatch"], world_size)
    return largest({p: v for p, v in parts.items() if not pd.isna(v)})


def anatomy_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration of the scaling experiments (DDP points) with an anatomy."""
    need = {"fixed_step_ms", "per_sample_us", "step_time_s", "batch_per_rank"}
    if df.empty or not need <= set(df.columns):
        return pd.DataFrame(columns=COLUMNS)
    ok = df[(df["status"] == "ok") & df["experiment"].isin(EXPERIMENTS) & df["fixed_step_ms"].notna()
            & df["ddp"].astype(bool)].copy()
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    ok["step_ms"] = 1e3 * ok["step_time_s"]
    ok["dispatch_ms"] = ok["fixed_step_ms"]
    ok["compute_ms"] = ok["per_sample_us"] * ok["batch_per_rank"] / 1e3
    # one rank all-reduces nothing: no communication part (its probe difference is noise)
    exposed = 1e3 * ok["exposed_comm_s"].clip(lower=0) if "exposed_comm_s" in ok else 0.0
    ok["communication_ms"] = exposed.where(ok["world_size"] > 1, 0.0).fillna(0.0)
    ok["captured"] = ok["step_kind"].eq("captured") if "step_kind" in ok else False
    # a captured step's all-reduce runs inside the graph, unprobed: not measured, not 0 (one rank has none)
    ok.loc[ok["captured"] & (ok["world_size"] > 1), "communication_ms"] = float("nan")
    rows = []
    for key, g in ok.groupby(GROUP, dropna=False, sort=True):
        row = dict(zip(GROUP, key))
        means = {c: float(g[c].mean()) for c in ("step_ms", "dispatch_ms", "compute_ms", "communication_ms")}
        parts = {p: means[f"{p}_ms"] for p in PARTS}
        captured, ws = bool(g["captured"].any()), int(g["world_size"].iloc[0])
        bound = _bound(parts, captured, ws)
        agree = sum(_bound({p: r[f"{p}_ms"] for p in PARTS}, captured, ws) == bound for _, r in g.iterrows())
        rows.append({**row, "world_size": int(g["world_size"].iloc[0]), "placement_class": g["placement_class"].iloc[0],
                     "batch_per_rank": int(g["batch_per_rank"].iloc[0]), "n": len(g), "n_agree": int(agree), **means,
                     "other_ms": means["step_ms"] - sum(v for v in parts.values() if not pd.isna(v)),
                     "dispatch_share_pct": 100.0 * means["dispatch_ms"] / means["step_ms"] if means["step_ms"] else None,
                     "ops_per_step": float(g["ops_per_step"].mean()) if "ops_per_step" in g else None,
                     "gpu_busy_pct": float(g["gpu_busy_pct"].mean()) if "gpu_busy_pct" in g and g["gpu_busy_pct"].notna().any() else None,
                     "kernels": _kernels(g), "bound": bound, "captured": captured,
                     "dispatch_clamped": bool(g["dispatch_clamped"].fillna(False).astype(bool).any())
                     if "dispatch_clamped" in g else False})
    out = pd.DataFrame(rows).reindex(columns=COLUMNS)
    return out.sort_values(["experiment", "model", "world_size", "nodes"]).reset_index(drop=True)
