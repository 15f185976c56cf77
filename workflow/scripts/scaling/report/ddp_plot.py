"""The figures of the ddp experiment (this study only: DDP settings of other studies are compared
in their own reports): time to the target loss per setting, and the loss curves behind it."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..common.columns import DEFAULT_DDP_SETTING
from . import plotkit as kit
from .series import LOSS_LABEL, TITLES


def _where(r) -> str:
    link = float(r.get("link_mbit") or 0)
    return f"{int(r['nodes'])}x{int(r['gpus_per_node'])}" + (f" @ {link:g} Mbit/s (emulated)" if link else "")


def plot_time_to_target(t: pd.DataFrame, folder: Path) -> dict:
    """One group of bars per setting, one bar per placement: mean time to target with its 95% CI;
    the ratio to `none` above each bar; a setting without a time says why at its foot."""
    settings = list(dict.fromkeys(t["ddp_setting"]))
    places = list(dict.fromkeys(_where(r) for _, r in t.iterrows()))
    colors = dict(zip(places, sns.color_palette("deep", len(places))))
    width = 0.8 / len(places)
    fig, ax = kit.figure()
    vals, tops, notes = [], [], []
    for _, r in t.iterrows():
        k, j = settings.index(r["ddp_setting"]), places.index(_where(r))
        x = k + (j - (len(places) - 1) / 2) * width
        y = r.get("time_to_target_s_mean")
        if not kit._finite(y):
            why = r.get("time_to_target_note") if isinstance(r.get("time_to_target_note"), str) else ""
            notes.append((x, why or ("failed" if int(r["n_ok"]) == 0 else "no time")))
            continue
        ax.bar(x, y, width=width * 0.95, color=colors[_where(r)], label=_where(r),
               yerr=kit.errors([y], [r.get("time_to_target_s_ci_lo")], [r.get("time_to_target_s_ci_hi")]),
               capsize=4, ecolor="0.15")
        ratio = r.get("ttt_ratio")
        label = "none" if r["ddp_setting"] == DEFAULT_DDP_SETTING else (f"{float(ratio):.2f}×" if kit._finite(ratio) else "")
        vals.append(y)
        tops.append((x, r.get("time_to_target_s_ci_hi"), colors[_where(r)], label, y))
    top = kit.limits(ax, vals, [h for _, h, _, _, _ in tops])
    cut = any([kit.mark_cut(ax, [x], [h], top, c) for x, h, c, _, _ in tops])
    for x, h, _, label, y in tops:
        ax.annotate(label, (x, min(h if kit._finite(h) else y, top)), textcoords="offset points", xytext=(0, 3),
                    ha="center", fontsize=8)
    for x, why in notes:
        ax.annotate(why.replace(" in ", "\nin "), (x, 0), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=8, color="tab:red", rotation=90, va="bottom")
    ax.set_xticks(range(len(settings)))
    ax.set_xticklabels([s.replace(" ", "\n") for s in settings], fontsize=9)
    ax.set_xlabel("DDP setting (none = DDP's defaults)")
    ax.set_ylabel("time to target loss (s)")
    ax.set_title("Time to target loss (mean, 95% CI)")
    ax.grid(axis="x", visible=False)
    kit.legend_below(fig, ax)
    cap = ("Training time until the loss first reaches the target, per DDP setting; bars: mean over repeats "
           "(given only when every repeat reached it), whiskers: 95% CI; above each bar its ratio to `none` at the "
           "same placement (below 1: faster to the target). A faster step that converges worse takes longer here.")
    return {"file": kit.save(fig, folder, "ddp_time_to_target"), "title": TITLES["ddp_time_to_target"],
            "caption": cap + (" " + kit.CUT_NOTE if cut else "")}


def plot_curves(t: pd.DataFrame, curves: pd.DataFrame, folder: Path) -> dict:
    """Loss vs training time, one colour per setting, one line per repeat; the target dash-dotted."""
    settings = list(dict.fromkeys(t["ddp_setting"]))
    palette = dict(zip(settings, sns.color_palette("colorblind", len(settings))))
    places = list(dict.fromkeys(_where(r) for _, r in t.iterrows()))
    dashes = dict(zip(places, ["-", "--", ":", "-."] * 4))
    fig, ax = plt.subplots(figsize=kit.PANEL, layout="constrained")
    for (pid, _), run in curves.groupby(["point_id", "rep"]):
        run = run.sort_values("step")
        r0 = run.iloc[0]
        s, where = r0["ddp_setting"], _where(r0)
        if s not in palette:
            continue
        label = s + (f" · {where}" if len(places) > 1 else "")
        ax.plot(run["elapsed_s"], run["train_loss"], color=palette[s], ls=dashes.get(where, "-"), lw=1.2, alpha=0.85,
                label=label)
    tgt = t["target_loss"].dropna() if "target_loss" in t else []
    if len(tgt):
        ax.axhline(float(tgt.iloc[0]), color="tab:red", lw=1, ls="-.", label=f"target {float(tgt.iloc[0]):.3g}")
    kit.plain_log_y(ax)
    ax.set_xlabel("training time (s, start-up excluded)")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("Training loss per DDP setting")
    kit.legend_below(fig, ax)
    return {"file": kit.save(fig, folder, "ddp_loss_curves"), "title": TITLES["ddp_loss_curves"],
            "caption": "The loss curves behind the time to target: global mean training loss against training time "
                       "since the first step, one line per repeat, one colour per DDP setting; dash-dotted: the target."}


def plot_ddp(tables: dict, folder: Path) -> dict:
    t = tables.get("ddp")
    if t is None or t.empty or "ddp_setting" not in t:
        return {}  # no ddp experiment: no section, no figures
    t = t.copy()
    t["ddp_setting"] = t["ddp_setting"].astype(str)
    out = {"ddp_time_to_target": plot_time_to_target(t, folder)}
    c = tables.get("loss_curves")
    c = c[c["experiment"] == "ddp"] if c is not None and len(c) and "experiment" in c else pd.DataFrame()
    if c.empty or "ddp_setting" not in c:
        out["ddp_loss_curves"] = {"title": TITLES["ddp_loss_curves"], "missing": "no loss curve of the ddp experiment"}
    else:
        out["ddp_loss_curves"] = plot_curves(t, c.assign(ddp_setting=c["ddp_setting"].astype(str)), folder)
    return out
