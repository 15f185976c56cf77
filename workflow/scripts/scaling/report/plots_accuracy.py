"""The figures of the report's "Time to accuracy" section, drawn only for a study with held-out
validation curves (val_curves.csv; training.eval_every_samples), so a study without them has no such
figure and no manifest entry: the held-out metric against training time (one image per experiment
and model, one colour per world size, one line per repeat; the target, when report.target is set, as
a horizontal line), and with a target the time to it per world size and model (mean, 95% CI; "not
reached" where a point's repeats did not all get there). Names start with PREFIX (the section
gathers them in the manifest's order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullFormatter

from ..tables.heldout import EXPERIMENTS, clean_val_curves
from . import plotkit as kit
from .figure_names import CRITICAL, HELDOUT_PREFIX

PREFIX = HELDOUT_PREFIX
LABELS = {"val_loss": "held-out loss", "val_accuracy": "held-out accuracy"}


def _metric(curves: pd.DataFrame, tables: dict) -> str:
    """The target's metric where report.target is set; else accuracy where the curves have it
    (classification), else the loss."""
    for exp in EXPERIMENTS:
        t = tables.get(exp)
        if t is not None and "target_metric" in t:
            m = next((v for v in t["target_metric"] if isinstance(v, str) and v), None)
            if m:
                return m
    return "val_accuracy" if curves["val_accuracy"].notna().any() else "val_loss"


def _target(t: pd.DataFrame | None, model: str) -> float | None:
    if t is None or "target_value" not in t:
        return None
    v = t[t["model"] == model]["target_value"].dropna()
    return float(v.iloc[0]) if len(v) else None


def _series(r) -> str:
    return f"p = {int(r['world_size'])}" + ("" if bool(r["ddp"]) else " (no DDP)")


def plot_curves(exp: str, model: str, g: pd.DataFrame, metric: str, target: float | None, folder: Path,
                name: str) -> dict:
    keys = sorted({(int(w), bool(d)) for w, d in zip(g["world_size"], g["ddp"])}, key=lambda k: (k[0], k[1]))
    colors = dict(zip(keys, sns.color_palette("viridis", len(keys))))
    fig, ax = kit.figure()
    for (pid, rep), run in g.groupby(["point_id", "rep"], sort=True):
        run = run.sort_values("step")
        r0 = run.iloc[0]
        ax.plot(run["train_time_s"], run[metric], color=colors[(int(r0["world_size"]), bool(r0["ddp"]))],
                marker="o", markersize=3, lw=1.2, alpha=0.85, label=_series(r0))
    if target is not None:
        ax.axhline(target, color="tab:red", lw=1, ls="-.", label=f"target {target:.4g}")
    ax.set_xlabel("training time (s, held-out evaluations excluded)")
    ax.set_ylabel(LABELS[metric])
    ax.set_title(f"{model}\n{exp} scaling: {LABELS[metric]} vs training time", fontsize=10)  # a model's name is long
    kit.legend_below(fig, ax, ncol=3)
    cap = (f"The {LABELS[metric]} of the {exp}-scaling points of {model} at each evaluation against the training "
           "time up to it (the evaluations ran off the clock), one colour per world size, one line per repeat"
           + ("; dash-dotted: the target." if target is not None else "."))
    return {"file": kit.save(fig, folder, name), "title": f"Held-out {metric} vs training time: {exp}, {model}",
            "caption": cap}


def plot_time_to_target(exp: str, t: pd.DataFrame, folder: Path, name: str) -> dict:
    """Bars per world size, one per model: mean time to the target with its 95% CI; a point whose
    repeats did not all reach it gets its note (\"not reached ...\") at its foot instead."""
    t = t.sort_values(["world_size", "nodes"])
    where = list(dict.fromkeys(zip(t["world_size"].astype(int), t["ddp"].astype(bool))))
    models = sorted(set(t["model"].dropna()))
    colors = dict(zip(models, sns.color_palette("deep", len(models))))
    width = 0.8 / max(len(models), 1)
    fig, ax = kit.figure()
    vals, highs, notes = [], [], []
    for _, r in t.iterrows():
        x = where.index((int(r["world_size"]), bool(r["ddp"]))) + (models.index(r["model"]) - (len(models) - 1) / 2) * width
        y = r.get("time_to_target_s")
        if not kit._finite(y):
            why = r.get("time_to_target_note") if isinstance(r.get("time_to_target_note"), str) else ""
            notes.append((x, why or "no time"))
            continue
        ax.bar(x, y, width=width * 0.95, color=colors[r["model"]], label=str(r["model"]),
               yerr=kit.errors([y], [r.get("time_to_target_s_ci_lo")], [r.get("time_to_target_s_ci_hi")]),
               capsize=4, ecolor="0.15")
        vals.append(y)
        highs.append((x, r.get("time_to_target_s_ci_hi"), colors[r["model"]]))
    top = kit.limits(ax, vals or [1.0], [h for _, h, _ in highs])
    cut = any([kit.mark_cut(ax, [x], [h], top, c) for x, h, c in highs])
    for x, why in notes:
        ax.annotate(why.replace(" in ", "\nin "), (x, 0), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=8, color="tab:red", rotation=90, va="bottom")
    ax.set_xticks(range(len(where)))
    ax.set_xlim(-0.6, len(where) - 0.4)  # a world size with only a note still gets its slot
    ax.set_xticklabels([f"{w}" + ("" if d else "\nno DDP") for w, d in where])
    ax.set_xlabel("world size (ranks)")
    metric = next((m for m in t["target_metric"] if isinstance(m, str) and m), "held-out")
    ax.set_ylabel(f"time to {metric} target (s)")
    ax.set_title(f"{exp}: time to the held-out target (mean, 95% CI)")
    ax.grid(axis="x", visible=False)
    kit.legend_below(fig, ax)  # models' names are long: one a line
    cap = (f"Training time until the first held-out evaluation that reaches the target, per world size and model "
           f"({exp} scaling); bars: mean over repeats, given only when every repeat reached it; whiskers: 95% CI; "
           "a point without a bar says why at its foot. Evaluation time is excluded (off the clock).")
    return {"file": kit.save(fig, folder, name), "title": f"Time to the held-out target: {exp}",
            "caption": cap + (" " + kit.CUT_NOTE if cut else "")}


def plot_accuracy(tables: dict, folder: Path) -> dict:
    """The section's figures; {} without held-out curves of the strong or weak experiment."""
    curves = clean_val_curves(tables.get("val_curves"))
    curves = curves[curves["experiment"].isin(EXPERIMENTS)]
    if curves.empty:
        return {}
    metric = _metric(curves, tables)
    out = {}
    for exp in EXPERIMENTS:
        c = curves[(curves["experiment"] == exp) & curves[metric].notna()]
        for i, (model, g) in enumerate(c.groupby("model", sort=True)):
            out[f"{PREFIX}curves_{exp}_{i}"] = plot_curves(exp, str(model), g, metric,
                                                           _target(tables.get(exp), model), folder,
                                                           f"{PREFIX}curves_{exp}_{i}")
        t = tables.get(exp)
        if len(c) and t is not None and not t.empty and "target_metric" in t:
            out[f"{PREFIX}time_to_target_{exp}"] = plot_time_to_target(exp, t, folder, f"{PREFIX}time_to_target_{exp}")
    return out




def plot_critical_batch(critical: dict | None, folder: Path) -> dict:
    """Samples to the target E against the global batch B (critical_batch.json; log-log), per model:
    every repeat as a dot, the fit E(B) = E_min (1 + B / B_crit) as a line over the measured batches
    and B_crit as a vertical dashed line with its bootstrap interval shaded where it is finite. {}:
    no batch experiment, or no model reached the target at any batch."""
    models = {m: c for m, c in (critical or {}).items() if c.get("samples_to_target")}
    if not models:
        return {}
    colors = dict(zip(models, sns.color_palette("deep", len(models))))
    fig, ax = kit.figure()
    said = []
    for model, c in models.items():
        col = colors[model]
        reps = c.get("samples_to_target_repeats") or {b: [e] for b, e in c["samples_to_target"].items()}
        xs = [int(b) for b, es in reps.items() for _ in es]
        ax.scatter(xs, [e for es in reps.values() for e in es], color=col, s=22, alpha=0.8, zorder=3,
                   label=f"{model}: measured")
        if c.get("status") == "ok" and c.get("e_min") is not None and c.get("b_crit"):
            lo_b, hi_b = min(c["batches"]), max(c["batches"])
            grid = np.geomspace(lo_b, hi_b, 60)
            ax.plot(grid, c["e_min"] * (1 + grid / c["b_crit"]), color=col, lw=1.4, zorder=2,
                    label=f"{model}: E(B) = {c['e_min']:.3g} (1 + B / {c['b_crit']:.3g})")
            lo, hi = c.get("ci") or (None, None)
            band = f"[{lo:.3g}, {hi:.3g}]" if kit._finite(lo) and kit._finite(hi) else "(interval unbounded)"
            ax.axvline(c["b_crit"], color=col, ls="--", lw=1.1, zorder=1,
                       label=f"{model}: B_crit {c['b_crit']:.3g} {band}")
            if kit._finite(lo) and kit._finite(hi):
                ax.axvspan(lo, hi, color=col, alpha=0.10, lw=0, zorder=0)
        else:
            said.append(f"{model}: {c.get('status')}, no fit drawn ({c.get('why')})")
    batches = sorted({int(b) for c in models.values() for b in c["batches"]})
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [f"{b:,}" for b in batches])
    ax.xaxis.set_minor_formatter(NullFormatter())
    kit.plain_log_y(ax)
    ax.set_xlabel("global batch B (samples a step)")
    ax.set_ylabel("samples to the held-out target E")
    ax.set_title("Samples to target against the global batch")
    kit.legend_below(fig, ax, ncol=1)
    cap = ("Samples to the held-out target at each global batch of the batch experiment (one rank; a dot per "
           "repeat), the McCandlish fit E(B) = E_min (1 + B / B_crit) drawn over the batches measured, and "
           "B_crit as a dashed line with its 95% bootstrap interval shaded (unshaded where the interval is "
           "unbounded). Flat E: a larger batch costs no extra samples, so more ranks get there sooner; E "
           "rising in proportion to B: past B_crit, a larger batch only buys faster steps.")
    if said:
        cap += " " + "; ".join(said) + "."
    return {CRITICAL: {"file": kit.save(fig, folder, CRITICAL), "title": "Where a larger global batch stops paying",
                       "caption": cap}}
