"""Figures of one study, or of several side by side (report.compare), written as PNG into one folder
with a manifest `figures.json`: {name: {"file", "title", "caption"}} or {name: {"title", "missing":
why}}. A figure whose data are absent becomes a manifest entry with `missing`, never an exception.
One panel per image (plotkit.PANEL): on a narrow screen each gets the page's full width.

Measurements are markers with 95% CI bars; the performance model's predictions are dashed lines
(with their bootstrap band for one study), labelled "model" with their leave-one-world-size-out
error. The seed paper's points are drawn only where the first study is comparable
(reference.comparable). Series are labelled by placement class, so ranks that shared one host read
"simulated inter-node (one host)". With several studies each study has one hue on every figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt

from kan.contract.atomic import write_text
from ..common.settings import Settings
from . import plotkit as kit
from .ddp_plot import plot_ddp
from .plots_accuracy import CRITICAL, plot_accuracy, plot_critical_batch
from .plots_anatomy import plot_anatomy
from .plots_costs import plot_allreduce, plot_comm, plot_model_size
from .plots_headline import plot_headline
from .plots_scaling import plot_loss_curves, plot_strong, plot_weak
from .series import TITLES

FIGURES = ("headline", "strong_speedup", "strong_efficiency", "loss_curves", "weak_throughput", "weak_efficiency",
           "comm_exposed", "comm_throughput", "allreduce_busbw", "allreduce_time", "model_size_memory",
           "model_size_throughput")  # and, in a study with the ddp experiment, ddp_plot.TITLES; with held-out
# curves (tables['val_curves']), plots_accuracy's heldout_* figures; with the batch experiment's
# critical_batch.json (tables['critical']), critical_batch; with step anatomies, anatomy_*


def plot_figures(tables: dict, folder: str | Path, reference: dict | None, settings: Settings,
                 compare: list[dict] | None = None, study: str | None = None) -> dict:
    """Write every figure into `folder` and its manifest figures.json; returns the manifest. `tables`
    (the current study) may also hold 'loss_curves', 'val_curves', 'allreduce_sizes' and 'model' (model.json);
    `compare` = other studies as compare.read_study gives them, drawn next to it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    reference = reference or {}
    kit.theme()
    studies = [{"name": study or "this study", "tables": tables}] + list(compare or [])
    models = [m for s in studies for n in ("strong", "weak", "comm", "model_size")
              if s["tables"].get(n) is not None and "model" in s["tables"][n] for m in s["tables"][n]["model"].dropna()]
    st = kit.Styles([s["name"] for s in studies], models)
    steps = [
        (lambda: plot_headline(tables, folder), ["headline"]),
        (lambda: plot_strong(studies, st, reference.get("strong"), folder, settings.efficiency_threshold),
         ["strong_speedup", "strong_efficiency"]),
        (lambda: plot_loss_curves(studies, st, folder), ["loss_curves"]),
        (lambda: plot_weak(studies, st, reference.get("weak"), folder), ["weak_throughput", "weak_efficiency"]),
        (lambda: plot_comm(studies, st, folder, settings.comm_share_pct),
         ["comm_exposed", "comm_throughput"]),
        (lambda: plot_allreduce(studies, st, folder), ["allreduce_busbw", "allreduce_time"]),
        (lambda: plot_model_size(studies, st, reference.get("model_size"), folder),
         ["model_size_memory", "model_size_throughput"]),
        (lambda: plot_ddp(tables, folder), ["ddp_time_to_target", "ddp_loss_curves"]),
        (lambda: plot_accuracy(tables, folder), ["heldout_curves"]),
        (lambda: plot_critical_batch(tables.get("critical"), folder), [CRITICAL]),
        (lambda: plot_anatomy(tables, folder), ["anatomy"]),
    ]
    manifest: dict = {}
    for step, keys in steps:
        try:
            manifest.update(step())
        except (KeyError, ValueError, TypeError) as e:  # a malformed table: say so in the report, don't crash
            plt.close("all")
            for k in keys:
                manifest[k] = {"title": TITLES[k], "missing": f"figure failed: {type(e).__name__}: {e}"}
    write_text(folder / "figures.json", json.dumps(manifest, indent=1))
    return manifest
