"""The figure under the answer: step time against world size, one line per model and placement class,
measured with 95% CI bars, the performance model dashed, its fitted formula in the legend (Extra-P's
way: one formula drawn over the measurements it came from, with its error).

Step time, not throughput: at a fixed global batch the step a deployment waits on is what more ranks
must shorten, and a step that stops getting shorter is where scaling stops paying."""

from __future__ import annotations

from pathlib import Path

from ..common.columns import SINGLE
from . import plotkit as kit
from .series import TITLES, ddp_rows, errorbar_lines, model_lines

NAME = "headline"


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
        parts.append(f"{c0 * 1e3:.2g} ms")
    if per_sample:
        parts.append(f"{per_sample * 1e6:.2g} µs·b")
    exposure = ((((m.get("placements") or {}).get(cls) or {}).get("comm") or {}).get("exposure") or {}).get("value")
    if exposure:
        parts.append(f"{exposure:.2g} × all-reduce(p)")
    return " + ".join(parts) or "not fitted"


def plot_headline(tables: dict, folder: Path) -> dict:
    """The headline figure's manifest entry (or why it is missing)."""
    strong = ddp_rows(tables.get("strong"))
    if strong.empty or "step_time_s_mean" not in strong or strong["step_time_s_mean"].notna().sum() == 0:
        return {NAME: {"title": TITLES[NAME], "missing": "no strong-scaling point with a step time (status ok)"}}
    t = strong.dropna(subset=["step_time_s_mean"])
    st = kit.Styles(["this study"], list(t["model"].dropna()))
    fig, ax = kit.figure()
    xs, _ = errorbar_lines(ax, st, 0, t, "world_size", "step_time_s_mean", "step_time_s_ci_lo",
                              "step_time_s_ci_hi", 1e3)
    model_json = tables.get("model")
    for model, cls, preds, err in model_lines(model_json):
        if model not in set(t["model"]):
            continue
        px = [r["world_size"] for r in preds]
        py = [1e3 * r["step_time_s"]["value"] for r in preds]
        who = st.label(0, model, cls)
        ax.plot(px, py, ls=kit.PLACEMENT_DASHES.get(cls, "--"), lw=1.2, color=st.color(0, cls),
                label=f"model, {who}: {formula(model_json, model, cls)} ({err.replace('LOO MAPE', 'error')})")
        xs += px
    kit.world_axis(ax, sorted(set(xs)))
    kit.plain_log_y(ax)
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("step time (ms, log scale)")
    ax.set_title(TITLES[NAME])
    kit.legend_below(fig, ax, ncol=1)
    single = " The single-rank point starts each placement's line." if (t["placement_class"] == SINGLE).any() else ""
    caption = ("Markers: measured median step (mean over repeats, 95% CI bars); dashed: the performance model's "
               "prediction at the strong experiment's batch, with its fitted formula (b = per-rank batch; "
               "all-reduce(p) = the ring all-reduce time of the gradients at p ranks) and its leave-one-out "
               "error. A line that stops falling is where more ranks stop paying." + single)
    return {NAME: {"file": kit.save(fig, folder, NAME), "title": TITLES[NAME], "caption": caption}}
