"""The report's "What bounds a step" figures: per implementation (model) of the strong experiment
(else weak), one stacked bar per world size splitting the measured synced step into its fixed
dispatch cost, its per-sample compute and its exposed communication (anatomy.csv, scaling/tables/
anatomy_table.py). Drawn only where records carry an anatomy, so older studies get no figure and no
manifest entry. Names start with PREFIX."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import plotkit as kit
from .figure_names import ANATOMY_PREFIX

PREFIX = ANATOMY_PREFIX
COLORS = {"dispatch": "tab:orange", "compute": "tab:blue", "communication": "tab:red"}


def plot_anatomy(tables: dict, folder: Path) -> dict:
    t = tables.get("anatomy")
    if t is None or t.empty:
        return {}
    exp = "strong" if (t["experiment"] == "strong").any() else str(t["experiment"].iloc[0])
    out = {}
    for i, (model, g) in enumerate(t[t["experiment"] == exp].groupby("model", sort=True)):
        g = g.sort_values(["world_size", "nodes"])
        labels = [f"{int(w)} ({int(b)}/rank)" for w, b in zip(g["world_size"], g["batch_per_rank"])]
        fig, ax = kit.figure()
        bottom = pd.Series(0.0, index=g.index)
        for part, color in COLORS.items():
            vals = pd.to_numeric(g[f"{part}_ms"], errors="coerce").fillna(0.0)
            ax.bar(labels, vals, bottom=bottom, color=color, label=part)
            bottom = bottom + vals
        ax.plot(labels, g["step_ms"], "k_", markersize=28, mew=2, label="measured step")
        ax.set_xlabel("world size (per-rank batch)")
        ax.set_ylabel("ms per step")
        ax.set_title(f"{model}\n{exp}: what a step is made of", fontsize=10)
        ax.legend(fontsize=8)
        name = f"{PREFIX}{exp}_{i}"
        cap = (f"{exp} scaling of {model}: each bar splits a synced step into its fixed per-step cost (dispatch: "
               f"what a step costs with no samples), its per-sample compute and its exposed all-reduce; the black "
               f"tick is the measured step. A bar that is mostly dispatch does not shrink with more ranks.")
        out[name] = {"file": kit.save(fig, folder, name), "title": f"What bounds a step: {exp}, {model}",
                     "caption": cap}
    return out
