"""The figure under the answer, one line per model and placement class, measured with 95% CI bars and
predicted dashed with how the prediction is made in the legend (Extra-P's way: one formula drawn over
the measurements it came from, with its error): time to the held-out target against world size where
the study has one and predicts it (decide/totarget.py), else step time against world size.

Step time, not throughput: at a fixed global batch the step a deployment waits on is what more ranks
must shorten, and a step that stops getting shorter is where scaling stops paying."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

from ..common.columns import SINGLE
from . import plotkit as kit
from .series import TITLES, ddp_rows, lines, model_lines

NAME = "headline"
TARGET_TITLE = "Time to the held-out target by world size: measured and predicted"
# Narrower than the other panels (6.4 in), with larger text: the first figure a reader sees is also
# the one read on a phone, where a 390 px screen shows a 704 px figure at 0.55x and its 9 pt legend at
# about 7 px. At 5.4 in (594 px) and 10.5 pt the legend shows at about 11 px there, and at its own
# size (594 px, within the page's 44rem) on a desktop.
SIZE = (5.4, 5.2)
TEXT = {"legend.fontsize": 10.5, "xtick.labelsize": 10.5, "ytick.labelsize": 10.5, "axes.labelsize": 11.5,
        "axes.titlesize": 12}
WRAP = 54  # legend characters a line at that size


def sig2(x: float) -> str:
    """x to two significant digits without an exponent: 220, 31, 0.35, 0.0071."""
    return f"{float(f'{x:.2g}'):g}" if abs(x) >= 1e-4 else f"{x:.2g}"


def formula(model_json: dict | None, model: str, cls: str) -> str:
    """'0.35 ms + 0.71 µs·b + 3.5 × ring(p)': the fitted step of one model and placement class, each
    term to two significant digits (the intervals are in the Performance model section)."""
    m = ((model_json or {}).get("models") or {}).get(model) or {}
    params = ((m.get("compute") or {}).get("params")) or {}
    value = (lambda k: ((params.get(k) or {}).get("value")))
    c0, kb, kbp = value("c0_s"), value("per_sample_s"), value("per_sample_param_s")
    per_sample = (kb or 0.0) + (kbp or 0.0) * float(m.get("num_params") or 0.0)
    parts = []
    if c0:
        parts.append(f"{sig2(c0 * 1e3)} ms")
    if per_sample:
        parts.append(f"{sig2(per_sample * 1e6)} µs·b")
    comm = ((m.get("placements") or {}).get(cls) or {}).get("comm") or {}
    fixed = (comm.get("ddp_fixed_s") or {}).get("value")
    if fixed:  # the per-step DDP cost of runs without a no_sync probe (model/fit.py)
        parts.append(f"{sig2(fixed * 1e3)} ms DDP")
    exposure = (comm.get("exposure") or {}).get("value")
    if exposure:
        parts.append(f"{sig2(exposure)} × all-reduce(p)")
    return " + ".join(parts) or "not fitted"


def _wrap(text: str, width: int = WRAP) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def plot_headline(tables: dict, folder: Path) -> dict:
    """The headline figure's manifest entry (or why it is missing): time to the held-out target where
    the study predicts it, else step time. One colour per model (the figure's question is which model,
    where), one line style and marker per placement class; its text sizes are TEXT's."""
    with plt.rc_context(TEXT):
        return _headline(tables, folder)


def _headline(tables: dict, folder: Path) -> dict:
    to_target = plot_time_to_target(tables, folder)
    if to_target:
        return to_target
    strong = ddp_rows(tables.get("strong"))
    if strong.empty or "step_time_s_mean" not in strong or strong["step_time_s_mean"].notna().sum() == 0:
        return {NAME: {"title": TITLES[NAME], "missing": "no strong-scaling point with a step time (status ok)"}}
    t = strong.dropna(subset=["step_time_s_mean"])
    models = sorted(set(t["model"].dropna()))
    color = {m: kit.STUDY_COLORS[i % len(kit.STUDY_COLORS)] for i, m in enumerate(models)}
    fig, ax = kit.figure(SIZE)
    xs, measured_top = [], 0
    for model, cls, g in lines(t, "world_size"):
        mid = 1e3 * g["step_time_s_mean"]
        ax.errorbar(g["world_size"], mid, yerr=kit.errors(mid, 1e3 * g["step_time_s_ci_lo"], 1e3 * g["step_time_s_ci_hi"]),
                    marker=kit.PLACEMENT_MARKERS.get(cls, "o"), capsize=4, color=color[model], lw=1.6, markersize=6,
                    label=_wrap(f"{model}, {cls}: measured" if len(models) > 1 else f"{cls}: measured"))
        xs += list(g["world_size"])
    measured_top = max(xs)
    model_json = tables.get("model")
    for model, cls, preds, err in model_lines(model_json):
        if model not in color:
            continue
        px = [r["world_size"] for r in preds]
        py = [1e3 * r["step_time_s"]["value"] for r in preds]
        who = f"{model}, {cls}" if len(models) > 1 else cls
        ax.plot(px, py, ls=kit.PLACEMENT_DASHES.get(cls, "--"), lw=1.2, color=color[model],
                label=_wrap(f"model, {who}: {formula(model_json, model, cls)} ({err.replace('LOO MAPE', 'error')})"))
        xs += px
    kit.world_axis(ax, sorted(set(xs)))
    kit.plain_log_y(ax)
    if max(xs) > measured_top:  # what lies right of the last measurement is a prediction only
        ax.axvspan(measured_top * 1.2, max(xs) * 1.4, color="0.92", zorder=0, lw=0)
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("step time (ms, log scale)")
    ax.set_title(_wrap(TITLES[NAME], 50))
    kit.legend_below(fig, ax, ncol=1)
    caption = ("Solid with markers: measured median step (mean over repeats, 95% CI bars), the single-rank point "
               "starting each placement's line; dashed: the performance model's prediction at the strong "
               "experiment's batch, with its fitted formula (b = per-rank batch; all-reduce(p) = the ring "
               "all-reduce of the gradients at p ranks) and its leave-one-out error"
               + ("; the shaded part lies beyond the largest world size measured" if max(xs) > measured_top else "")
               + ". Where a line rises, more ranks make each step slower.")
    return {NAME: {"file": kit.save(fig, folder, NAME), "title": TITLES[NAME], "caption": caption}}


def target_predictions(guidelines: list[dict] | None) -> dict[str, list[tuple[str, list[dict], dict]]]:
    """{model: [(placement class, predictions, numbers)]} of the strong experiment's predicted time to
    the held-out target (decide/totarget.py's guideline numbers), multi-rank classes only."""
    out: dict[str, list] = {}
    for g in guidelines or []:
        gid = g.get("id", "")
        if not gid.startswith("time-to-accuracy-predicted-strong-") or g.get("status") == "not_enough_data":
            continue
        model = gid[len("time-to-accuracy-predicted-strong-"):]
        n = g.get("numbers") or {}
        by_cls: dict[str, list[dict]] = {}
        for p in n.get("predictions") or []:
            by_cls.setdefault(p["placement_class"], []).append(p)
        for cls, preds in sorted(by_cls.items()):
            if cls != SINGLE and len(preds) > 1:
                out.setdefault(model, []).append((cls, sorted(preds, key=lambda p: p["world_size"]), n))
    return out


def target_formula(preds: list[dict]) -> str:
    """'96 steps × 1.3 × step(p) + 8 ms': how the prediction is made (steps to the target from the
    measurements, the training clock's ratio to the median step, its start), to two digits."""
    p = preds[0]
    return (f"{p['steps_to_target']:,.0f} steps × {sig2(p['clock_ratio'])} × step(p) + "
            f"{sig2(1e3 * p['clock_start_s'])} ms")


def plot_time_to_target(tables: dict, folder: Path) -> dict | None:
    """The headline with a held-out target: time to it against world size per model, measured with its
    95% CI, the prediction dashed with its band and how it is made; None when the study has no
    predicted time to a held-out target (the step-time headline is drawn instead)."""
    strong = ddp_rows(tables.get("strong"))
    predicted = target_predictions(tables.get("guidelines"))
    if strong.empty or "target_metric" not in strong or not predicted:
        return None
    t = strong.dropna(subset=["time_to_target_s"])
    if t.empty:
        return None
    models = sorted(set(t["model"].dropna()) | set(predicted))
    color = {m: kit.STUDY_COLORS[i % len(kit.STUDY_COLORS)] for i, m in enumerate(models)}
    metric = next((m for m in t["target_metric"] if isinstance(m, str) and m), "held-out")
    fig, ax = kit.figure(SIZE)
    xs = []
    for model, cls, g in lines(t, "world_size"):
        mid = 1e3 * g["time_to_target_s"]
        ax.errorbar(g["world_size"], mid, yerr=kit.errors(mid, 1e3 * g["time_to_target_s_ci_lo"],
                                                          1e3 * g["time_to_target_s_ci_hi"]),
                    marker=kit.PLACEMENT_MARKERS.get(cls, "o"), capsize=4, color=color[model], lw=1.6, markersize=6,
                    label=_wrap(f"{model}, {cls}: measured"))
        xs += list(g["world_size"])
    measured_top = max(xs)
    for model, entries in predicted.items():
        for cls, preds, _ in entries:
            px = [p["world_size"] for p in preds]
            ax.plot(px, [1e3 * p["time_to_target_s"] for p in preds], ls=kit.PLACEMENT_DASHES.get(cls, "--"), lw=1.2,
                    color=color.get(model, "0.4"), label=_wrap(f"predicted, {model}, {cls}: {target_formula(preds)}"))
            if all(p.get("band") for p in preds):
                ax.fill_between(px, [1e3 * p["band"][0] for p in preds], [1e3 * p["band"][1] for p in preds],
                                color=color.get(model, "0.4"), alpha=0.12, lw=0)
            xs += px
    kit.world_axis(ax, sorted(set(xs)))
    kit.plain_log_y(ax)
    if max(xs) > measured_top:
        ax.axvspan(measured_top * 1.2, max(xs) * 1.4, color="0.92", zorder=0, lw=0)
    ax.set_ylabel(f"time to {metric} target (ms, log)")
    ax.set_title(_wrap(TARGET_TITLE, 50))  # two lines at the headline's width
    kit.legend_below(fig, ax, ncol=1)
    caption = (f"Solid with markers: measured training time until the held-out {metric} first reaches the target "
               "(mean over repeats, 95% CI bars), the single-rank point starting each placement's line; dashed: "
               "predicted, as the steps to the target (from the measurements) times the performance model's step "
               "at p ranks, scaled to the training clock (its ratio to the median step, plus its start), with its "
               "band" + ("; the shaded part lies beyond the largest world size measured" if max(xs) > measured_top
                         else "") + ". The lowest point of a model's line is where it gets to the target soonest.")
    return {NAME: {"file": kit.save(fig, folder, NAME), "title": TARGET_TITLE, "caption": caption}}
