"""What the study figures share: their titles, the measured curves with 95% CI bars (one line per
model and placement class, the single-rank baseline starting each), the performance model's dashed
lines, the y range and the manifest entry of a written figure. plotkit.py holds the look."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..common.columns import INTRA, SINGLE, ddp_rows  # noqa: F401 (figures draw these rows)
from . import plotkit as kit

REFERENCE_LABEL = "seed paper (A100, pykan)"
REF_STYLE = {"color": "0.45", "marker": "s", "linestyle": ":", "markersize": 6, "label": REFERENCE_LABEL}
# the trainer's loss (kan/loop.py): MSE on a regression target, cross-entropy on a classification table
LOSS_LABEL = "training loss, mean over ranks\n(MSE, or cross-entropy for classes)"  # two lines: fits the panel
TITLES = {"strong_speedup": "Strong scaling: speedup", "strong_efficiency": "Strong scaling: efficiency",
          "loss_curves": "Training loss vs training time", "weak_throughput": "Weak scaling: throughput per rank",
          "weak_efficiency": "Weak scaling: efficiency", "comm_exposed": "Exposed communication by placement",
          "comm_throughput": "Throughput by placement", "allreduce_busbw": "All-reduce: bus bandwidth",
          "allreduce_time": "All-reduce: time", "model_size_memory": "Model size: peak memory",
          "model_size_throughput": "Model size: throughput per rank",
          "ddp_time_to_target": "DDP settings: time to target loss", "ddp_loss_curves": "DDP settings: training loss vs time",
          "heldout_curves": "Time to accuracy: held-out metric vs training time",
          "anatomy": "What bounds a step", "headline": "Step time by world size: measured and predicted"}


def lines(t: pd.DataFrame, x: str):
    """(model, placement class, rows) per measured curve; the single-rank baseline starts every
    multi-rank class's curve, so each reads as one line from p = 1."""
    for model, g in t.groupby("model", sort=True):
        base = g[g["placement_class"] == SINGLE]
        classes = [c for c in g["placement_class"].unique() if c != SINGLE]
        for cls in sorted(classes) or [SINGLE]:
            rows = g[g["placement_class"] == cls] if cls != SINGLE else base
            yield model, cls, (pd.concat([base, rows]).sort_values(x) if cls != SINGLE else rows)


def errorbar_lines(ax, st: kit.Styles, study: int, t: pd.DataFrame, x: str, y: str, lo: str | None, hi: str | None,
            scale: float = 1.0) -> tuple[list, list]:
    """Errorbar lines of one study; returns (x values, interval tops) for the frame."""
    xs, tops = [], []
    for model, cls, g in lines(t, x):
        mid = scale * g[y]
        low = scale * g[lo] if lo else mid
        high = scale * g[hi] if hi else mid
        ax.errorbar(g[x], mid, yerr=kit.errors(mid, low, high), marker=st.marker(model, cls), capsize=4,
                    color=st.color(study, cls), label=st.label(study, model, cls), lw=1.6, markersize=6)
        xs += list(g[x])
        tops += list(high)
    return xs, tops


def measured(ax, st: kit.Styles, have, y: str, ci: str, scale: float = 1.0) -> tuple[list, list, list]:
    """Every study's curves of column y (CI columns <ci>_ci_lo / _hi); (x values, interval tops, values)."""
    xs, tops, vals = [], [], []
    for i, t in have:
        t = t.dropna(subset=[y])
        x, top = errorbar_lines(ax, st, i, t, "world_size", y, f"{ci}_ci_lo", f"{ci}_ci_hi", scale)
        xs, tops, vals = xs + x, tops + top, vals + list(scale * t[y])
    return xs, tops, vals


def frame(ax, st: kit.Styles, have, vals, tops, ci_hi: str, scale: float = 1.0, at_least=None) -> bool:
    """The y range around the data (kit.limits); a ▲ where an interval is cut; True if one is."""
    top = kit.limits(ax, vals, tops, at_least=at_least)
    cuts = [kit.mark_cut(ax, t["world_size"], scale * t[ci_hi], top, st.color(i, INTRA)) for i, t in have]
    return any(cuts)


def ci_title(title: str, have: list) -> str:
    """The figure's title, its '(95% CI ...)' said as it is where no point has two ok repeats: one run
    per point draws no interval (imported runs, or repeats: 1)."""
    n_ok = [t["n_ok"] for _, t in have if "n_ok" in t]
    if n_ok and all((n.fillna(0) <= 1).all() for n in n_ok):
        return title.replace("(95% CI over repeats)", "(one run per point: no CI)").replace(
            "(95% CI)", "(one run per point: no CI)")
    return title


def entry(fig, ax, folder: Path, name: str, ylabel: str, title: str, caption: str, cut: bool = False) -> dict:
    """Label the axes, put the legend below, write the PNG: the figure's manifest entry."""
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    kit.legend_below(fig, ax)
    return {"file": kit.save(fig, folder, name), "title": TITLES[name],
            "caption": caption + (" " + kit.CUT_NOTE if cut else "")}


def model_lines(model_json: dict | None) -> list[tuple[str, str, list[dict], str]]:
    """[(model, placement class, predictions, validation text)] of the performance model, multi-rank
    classes only (the single-rank class is one point)."""
    out = []
    for model, m in sorted(((model_json or {}).get("models") or {}).items()):
        for cls, entry in (m.get("placements") or {}).items():
            if cls == SINGLE or not entry.get("predictions"):
                continue
            v = entry.get("validation") or {}
            mape = v.get("loo_mape_pct")
            # two significant digits below 10% (0.49%, not "0%"), whole percent above
            err = (f"LOO MAPE {mape:.2g}%" if mape is not None and mape < 10 else
                   f"LOO MAPE {mape:.0f}%" if mape is not None else "not validated")
            out.append((model, cls, entry["predictions"], err))
    return out


def draw_model(ax, st: kit.Styles, study: int, model_json: dict | None, key: str, scale: float = 1.0) -> list:
    """Dashed model lines (with their bootstrap band for one study); returns the x values drawn."""
    xs_all = []
    for model, cls, preds, err in model_lines(model_json):
        xs = [r["world_size"] for r in preds]
        ys = [scale * r[key]["value"] for r in preds]
        color = st.color(study, cls)
        ax.plot(xs, ys, ls=kit.PLACEMENT_DASHES.get(cls, "--"), lw=1.1, color=color,
                label=f"model: {st.label(study, model, cls)} ({err})")
        lo = [r[key]["lo"] for r in preds]
        hi = [r[key]["hi"] for r in preds]
        if not st.multi and all(v is not None for v in lo + hi):
            ax.fill_between(xs, [scale * v for v in lo], [scale * v for v in hi], color=color, alpha=0.12, lw=0)
        xs_all += xs
    return xs_all


def studies_with(studies: list[dict], name: str, col: str) -> list[tuple[int, pd.DataFrame]]:
    out = []
    for i, s in enumerate(studies):
        t = ddp_rows(s["tables"].get(name))
        if not t.empty and col in t:
            t = t[t[col].notna()]
            if not t.empty:
                out.append((i, t))
    return out


def model_caption(studies) -> str:
    """What the model's lines look like, naming only the placement classes drawn (a caption never
    describes a line style the figure does not have)."""
    classes = sorted({cls for s in studies for _, cls, _, _ in model_lines(s["tables"].get("model"))})
    if not classes:
        return ""
    style = {"--": "dashed", "-.": "dash-dotted", ":": "dotted"}
    drawn = ", ".join(f"{style[kit.PLACEMENT_DASHES.get(c, '--')]} ({c})" for c in classes)
    return (f" {drawn[0].upper()}{drawn[1:]}: the performance model's prediction (a model, not a measurement) "
            "with its leave-one-world-size-out error" + ("" if len(studies) > 1 else " and its bootstrap band") + ".")
