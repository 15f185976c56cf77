"""The memory guideline: peak memory vs parameters over the width sweep, and how many parameters fit
in common device memories (CUDA allocator peaks only)."""

from __future__ import annotations

import pandas as pd

from ..common.columns import CUDA_PEAK, GB, GIB, model_family
from ..common.fmt import plural
from ..common.stats import linear_fit
from .rules import Decide, ci_text, guideline, key_of, rounded, settle_text

# memory budgets of common accelerators, for "a model up to N parameters fits in Y GB"
BUDGETS_GB = (16, 40, 80)
MAX_EXTRAPOLATION = 4.0  # memory is never extrapolated beyond 4x the largest measured parameter count


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
                rounded(float(r["peak_mem_bytes_mean"]) / GIB) for _, r in g.iterrows()},
                "params_per_gb_by_width": {str(int(r["hidden_width"])): rounded(r["params_per_gb"], 1) for _, r in g.iterrows()}}
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
                                 f"{fam}: measured peak memory {measured}; a line through {plural(len(g), 'width')} has no fit "
                                 f"quality, so nothing is extrapolated.", rule, nums,
                                 settle_text(thin) + ("; " if thin else "") + f"measure {3 - len(g)} more width(s)",
                                 thin))
            continue
        fit = linear_fit(g["num_params"].astype(float), g["peak_mem_bytes_mean"].astype(float))
        slope, fixed = fit["slope"], fit["intercept"]
        top = float(g["num_params"].max())
        nums.update(bytes_per_param=rounded(slope, 3), bytes_per_param_ci=[rounded(fit["slope_ci_lo"], 3),
                    rounded(fit["slope_ci_hi"], 3)], fixed_gib=rounded(fixed / GIB), r2=rounded(fit["r2"], 4),
                    residual_se_gib=rounded(fit["residual_se"] / GIB, 5), largest_params=int(top))
        head = (f"{fam}: peak memory grows by {ci_text(slope, fit['slope_ci_lo'], fit['slope_ci_hi'], '{:,.1f}')} B per "
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
