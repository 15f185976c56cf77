"""The scaling figures: strong-scaling speedup and efficiency (with the model's lines and the seed
paper's points where comparable), the loss curves behind time to target, and weak scaling."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..common.columns import baseline_name, baseline_without_ddp
from . import plotkit as kit
from .reference import comparable, overlay_label, overlay_note
from .series import (LOSS_LABEL, REF_STYLE, REFERENCE_LABEL, TITLES, ci_title, draw_model, entry, frame,
                     measured, model_caption, studies_with)


def baseline_words(tables: list, base: float) -> tuple[str, str]:
    """('1 DDP rank', 'the DDP baseline') or, where every baseline row ran without DDP (runs imported
    without a one-rank DDP run, tables/experiments.py baselines), ('1 rank without DDP', ...).
    `tables`: the studies' whole strong tables (the figure's own rows are the DDP ones only)."""
    against = baseline_name(tables, base)
    plural = "s" if base > 1 else ""
    vs = f"{int(base)} rank{plural} without DDP" if baseline_without_ddp(tables) else f"{int(base)} DDP rank{plural}"
    return vs, against


def plot_strong(studies: list[dict], st: kit.Styles, ref: pd.DataFrame | None, folder: Path,
                threshold: float) -> dict:
    have = studies_with(studies, "strong", "speedup")
    if not have or all(t["world_size"].nunique() < 2 for _, t in have):
        why = "no strong-scaling points measured at two or more world sizes (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("strong_speedup", "strong_efficiency")}
    check = comparable("strong", studies[0]["tables"].get("strong"))
    ref = ref if check["comparable"] and ref is not None and have[0][0] == 0 else None
    ref_style = {**REF_STYLE, "label": overlay_label(check) if ref is not None else REFERENCE_LABEL}
    cap_tail = model_caption(studies) + " " + (overlay_note("strong", check) if ref is not None else "")
    st = st.within([t for _, t in have])
    out = {}
    base = min(t["baseline_world_size"].min() for _, t in have)

    vs, against = baseline_words([studies[i]["tables"].get("strong") for i, _ in have], base)
    fig, ax = kit.figure()
    xs, tops, vals = measured(ax, st, have, "speedup", "speedup")
    for i, _ in have:
        xs += draw_model(ax, st, i, studies[i]["tables"].get("model"), "speedup")
    grid = sorted(set(xs) | (set(ref["gpus"]) if ref is not None else set()))
    ax.plot(grid, [p / base for p in grid], color="k", lw=1, ls=":", label="ideal (linear)")
    if ref is not None:
        ax.plot(ref["gpus"], ref["speedup"], **ref_style)
        vals += list(ref["speedup"])
    kit.world_axis(ax, grid)
    kit.plain_log_y(ax, 2)
    ax.set_ylim(min(0.5, 0.8 * min(vals)), 1.5 * max([p / base for p in grid] + vals + [v for v in tops if v == v]))
    out["strong_speedup"] = entry(
        fig, ax, folder, "strong_speedup", f"speedup vs {vs} (×)",
        ci_title("Strong scaling: speedup (95% CI over repeats)", have),
        f"Speedup = samples/s at p ranks ÷ samples/s at {against} (exactly 1 there, so it has no interval); "
        "dotted: ideal linear speedup." + cap_tail)

    fig, ax = kit.figure()
    xs, tops, vals = measured(ax, st, have, "efficiency", "efficiency", 100)
    for i, _ in have:
        xs += draw_model(ax, st, i, studies[i]["tables"].get("model"), "efficiency", 100)
    ax.axhline(100 * threshold, **kit.THRESHOLD, label=f"threshold {threshold:.0%}")
    if ref is not None:
        ax.plot(ref["gpus"], ref["efficiency_pct"], **ref_style)
        vals += list(ref["efficiency_pct"])
    kit.world_axis(ax, sorted(set(xs) | (set(ref["gpus"]) if ref is not None else set())))
    cut = frame(ax, st, have, vals, tops, "efficiency_ci_hi", 100, at_least=110)
    out["strong_efficiency"] = entry(
        fig, ax, folder, "strong_efficiency", f"efficiency vs {'the baseline' if 'without' in vs else 'DDP baseline'} (%)",
        ci_title("Strong scaling: efficiency (95% CI over repeats)", have),
        f"Efficiency = speedup ÷ (p / p_base) against {against}, which is 100% by definition (no interval); "
        "solid grey: the configured threshold." + cap_tail, cut)
    return out


def plot_loss_curves(studies: list[dict], st: kit.Styles, folder: Path) -> dict:
    """Training loss vs training time per world size (strong experiment), one panel per model."""
    parts = []
    for i, s in enumerate(studies):
        c = s["tables"].get("loss_curves")
        if c is not None and len(c) and "experiment" in c:
            parts.append(c[c["experiment"] == "strong"].assign(_study=i))
    c = pd.concat(parts) if parts else pd.DataFrame()
    if c.empty:
        return {"loss_curves": {"title": TITLES["loss_curves"],
                                "missing": "no loss curve recorded for the strong experiment (loss_curves.csv is empty)"}}
    models = sorted(c["model"].unique())
    ncol = min(2, len(models))
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(kit.PANEL[0] * ncol, kit.PANEL[1] * nrow), squeeze=False,
                             layout="constrained")
    sizes = sorted(int(p) for p in c["world_size"].unique())
    for ax, model in zip(axes.flat, models):
        g = c[c["model"] == model]
        for (i, _, _), run in g.groupby(["_study", "point_id", "rep"]):
            run = run.sort_values("step")
            p, ddp = int(run["world_size"].iloc[0]), bool(run["ddp"].iloc[0])
            shades = (sns.light_palette(st.color(i), len(sizes) + 2)[2:] if st.multi
                      else sns.color_palette("viridis", len(sizes)))
            color = shades[sizes.index(p)] if ddp else "0.5"
            label = (f"{studies[i]['name']} · " if st.multi else "") + (
                f"p={p} ({run['placement_class'].iloc[0]})" if ddp else "p=1 non-DDP")
            ax.plot(run["elapsed_s"], run["train_loss"], color=color, ls="-" if ddp else "--", lw=1.3, alpha=0.85,
                    label=label)
        for i, s in enumerate(studies):
            strong = s["tables"].get("strong")
            tgt = strong[strong["model"] == model]["target_loss"].dropna() if strong is not None and \
                "target_loss" in strong else []
            if len(tgt):
                ax.axhline(float(tgt.iloc[0]), color=st.color(i) if st.multi else "tab:red", lw=1, ls="-.",
                           label=f"{studies[i]['name'] + ' · ' if st.multi else ''}target {float(tgt.iloc[0]):.3g}")
        kit.plain_log_y(ax)
        ax.set_xlabel("training time (s, start-up excluded)")
        ax.set_ylabel(LOSS_LABEL)
        ax.set_title(model)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    kit.legend_below(fig, list(axes.flat)[:len(models)])
    return {"loss_curves": {"file": kit.save(fig, folder, "loss_curves"), "title": TITLES["loss_curves"],
                            "caption": "Strong scaling: global mean training loss over the last window of steps "
                                       "against training time since the first step, one line per repeat; dashed grey: "
                                       "the non-DDP baseline; dash-dotted: the target loss of the time-to-target column."}}


def plot_weak(studies: list[dict], st: kit.Styles, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = studies_with(studies, "weak", "samples_per_s_per_rank_mean")
    if not have:
        why = "no weak-scaling point measured (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("weak_throughput", "weak_efficiency")}
    check = comparable("weak", studies[0]["tables"].get("weak"))
    ref = ref if check["comparable"] and ref is not None and len(ref) and have[0][0] == 0 else None
    st = st.within([t for _, t in have])
    out = {}
    fig, ax = kit.figure()
    xs, tops, vals = measured(ax, st, have, "samples_per_s_per_rank_mean", "samples_per_s_per_rank")
    kit.world_axis(ax, xs)
    cut = frame(ax, st, have, vals, tops, "samples_per_s_per_rank_ci_hi")
    out["weak_throughput"] = entry(
        fig, ax, folder, "weak_throughput", "throughput per rank (samples/s)", ci_title("Weak scaling: throughput per rank (95% CI)", have),
        "Samples/s per rank at fixed per-rank batch and samples per rank; ideal weak scaling is flat.", cut)

    fig, ax = kit.figure()
    xs, tops, vals = measured(ax, st, have, "weak_efficiency", "weak_efficiency", 100)
    if ref is not None:
        base = ref.loc[ref["gpus"].idxmin(), "samples_per_s_per_gpu"]
        ax.plot(ref["gpus"], 100 * ref["samples_per_s_per_gpu"] / base, **{**REF_STYLE, "label": overlay_label(check)})
        xs += list(ref["gpus"])
    ax.axhline(100, color="k", lw=1, ls="--", label="ideal (100%)")
    kit.world_axis(ax, xs)
    cut = frame(ax, st, have, vals, tops, "weak_efficiency_ci_hi", 100, at_least=110)
    out["weak_efficiency"] = entry(
        fig, ax, folder, "weak_efficiency", "weak efficiency vs DDP baseline (%)", ci_title("Weak scaling: efficiency (95% CI)", have),
        "Per-rank throughput relative to the DDP baseline (100% there by definition, no interval). "
        + (overlay_note("weak", check) if ref is not None else ""), cut)
    return out
