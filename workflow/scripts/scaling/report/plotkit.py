"""What every figure shares: one look (sizes, fonts, colours), series styles for one study or for
several side by side, error bars that stay inside the frame, axes with units and plain tick labels,
legends below the axes (never over the data), and the atomic PNG write.

One study: colour = placement class, marker = model. Several studies: colour = study, marker =
placement class, so each study reads as one hue on every figure.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from ..common.columns import INTER, INTRA, SIMULATED, SINGLE  # noqa: E402

DPI = 110
# one panel per image: on a phone each panel gets the page's width instead of half of it
PANEL = (6.4, 4.6)
DEEP = sns.color_palette("deep")
PLACEMENT_COLORS = {SINGLE: "0.25", INTRA: DEEP[0], INTER: DEEP[3], SIMULATED: DEEP[1]}
PLACEMENT_MARKERS = {SINGLE: "o", INTRA: "o", INTER: "s", SIMULATED: "^"}
# a threshold is neither a measurement nor a model: grey, solid, behind the data
THRESHOLD = {"color": "0.35", "lw": 1.2, "ls": "-", "zorder": 1}
# model lines: one dash pattern per placement, so two classes of one study's colour stay apart
PLACEMENT_DASHES = {INTRA: "--", INTER: "-.", SIMULATED: ":"}
MODEL_MARKERS = ("o", "s", "D", "^", "v", "P")
STUDY_COLORS = [DEEP[i] for i in (0, 1, 2, 4, 5, 6, 8, 9)]
CUT_NOTE = "A ▲ at the frame marks a 95% interval cut there (the tables give it in full)."


def theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=1.0)
    plt.rcParams.update({"axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9,
                         "xtick.labelsize": 10, "ytick.labelsize": 10})


def figure(size=PANEL):
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax


def save(fig, folder: Path, name: str) -> str:
    fname = f"{name}.png"
    tmp = folder / f".{fname}.tmp"
    fig.savefig(tmp, dpi=DPI, format="png")
    plt.close(fig)
    os.replace(tmp, folder / fname)
    return fname


class Styles:
    """Colour, marker and label of a series, given the studies and models in the figure."""

    def __init__(self, study_names: list[str], models: list[str]):
        self.studies = list(study_names)
        self.models = sorted(set(models))
        self.multi = len(self.studies) > 1

    def within(self, frames) -> "Styles":
        """The same studies, with the models of one figure's frames only (a label names the model
        only when the figure has several)."""
        models = [m for t in frames if t is not None and "model" in t for m in t["model"].dropna()]
        return Styles(self.studies, models)

    def color(self, study: int, placement: str | None = None):
        if self.multi:
            return STUDY_COLORS[study % len(STUDY_COLORS)]
        return PLACEMENT_COLORS.get(placement, "0.5")

    def marker(self, model: str | None, placement: str | None):
        if self.multi:
            return PLACEMENT_MARKERS.get(placement, "o")
        i = self.models.index(model) if model in self.models else 0
        return MODEL_MARKERS[i % len(MODEL_MARKERS)]

    def label(self, study: int, model: str | None = None, placement: str | None = None) -> str:
        parts = [self.studies[study]] if self.multi else []
        if model is not None and len(self.models) > 1:
            parts.append(str(model))
        if placement is not None:
            parts.append(placement)
        return " · ".join(parts) or "measured"


def errors(mid, lo, hi) -> np.ndarray:
    """Asymmetric error bar lengths; 0 where the interval is unknown (one repeat, or the baseline's
    own ratio, exact by definition)."""
    mid, lo, hi = (pd.to_numeric(pd.Series(v), errors="coerce").to_numpy(float) for v in (mid, lo, hi))
    down = np.where(np.isnan(lo), 0, np.clip(mid - lo, 0, None))
    up = np.where(np.isnan(hi), 0, np.clip(hi - mid, 0, None))
    return np.vstack([down, up])


def limits(ax, values, highs=(), lows=(), floor: float | None = 0.0, at_least: float | None = None,
           reach: float = 3.0) -> float:
    """Set the y range to hold every value and every interval end, except interval ends beyond
    `reach` x the largest value (a very wide interval from few noisy repeats would squash the
    points): those are cut at the frame. Returns the top."""
    vals = [float(v) for v in values if _finite(v)]
    if not vals:
        return ax.get_ylim()[1]
    top_val = max(vals)
    ends = [float(v) for v in highs if _finite(v)]
    top = max([top_val] + [e for e in ends if e <= reach * max(top_val, 1e-300)])
    top = max(top, at_least or top) * 1.08
    bottom = floor
    if bottom is None:
        low = [float(v) for v in list(values) + list(lows) if _finite(v)]
        bottom = min(low) - 0.08 * abs(top - min(low)) if low else 0.0
    elif lows:
        low = [float(v) for v in lows if _finite(v)]
        if low and min(low) < bottom:
            bottom = min(low) * 1.08
    ax.set_ylim(bottom, top)
    return top


def mark_cut(ax, xs, highs, top: float, color) -> bool:
    """A ▲ at the frame above every interval that goes beyond it; True if any."""
    cut = [(x, h) for x, h in zip(xs, highs) if _finite(h) and h > top]
    for x, _ in cut:
        ax.plot([x], [top], marker="^", color=color, markersize=7, clip_on=False, zorder=5, ls="none")
    return bool(cut)


def _finite(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def world_axis(ax, values) -> None:
    vals = sorted({int(v) for v in values if _finite(v)})
    if vals:
        ax.set_xscale("log", base=2)
        ax.set_xticks(vals)
        ax.set_xticklabels([str(v) for v in vals])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(vals[0] / 1.4, vals[-1] * 1.4)
    ax.set_xlabel("world size (ranks)")


def plain_log_y(ax, base: int = 10) -> None:
    """A log y axis whose ticks read 500, 1,000, 2,000 rather than 5 × 10² (base 10: ticks at 1, 2
    and 5 of each decade, so a range under one decade still has labels)."""
    ax.set_yscale("log", base=base)
    lo, hi = ax.get_ylim()
    if base == 10 and lo > 0 and math.log10(hi / lo) < 2:  # call after drawing: the range is known
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def bytes_text(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.3g} {unit}"
    return f"{n:,.0f} B"


def bytes_axis(ax, sizes) -> None:
    vals = sorted({float(v) for v in sizes if _finite(v)})
    ax.set_xscale("log", base=2)
    if vals:
        step = max(1, math.ceil(len(vals) / 6))  # at most about six labels: they must not overlap
        ax.set_xticks(vals[::step])
        ax.set_xticklabels([bytes_text(v) for v in vals[::step]])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("buffer size (KiB / MiB)")


def legend_below(fig, axes, ncol: int | None = None, extra: list | None = None) -> None:
    """One legend under the axes (one or a list), outside the data area (constrained layout makes
    room), each label once; `extra`: handles that stand for no artist of their own (e.g. what a bar
    colour means)."""
    handles, labels = [], []
    for ax in axes if isinstance(axes, (list, tuple)) else [axes]:
        h, lbl = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lbl
    for h in extra or []:
        handles.append(h)
        labels.append(h.get_label())
    seen, h2, l2 = set(), [], []
    for h, lbl in zip(handles, labels):
        if lbl and not lbl.startswith("_") and lbl not in seen:
            seen.add(lbl)
            h2.append(h)
            l2.append(lbl)
    if h2:
        fig.legend(h2, l2, loc="outside lower center", ncol=ncol or (1 if max(map(len, l2)) > 34 else 2),
                   frameon=False)
