"""Render a report from the hand-built study (shared by the unit render test and the browser test)."""

from __future__ import annotations

from pathlib import Path

from scaling.columns import clean, clean_allreduce
from scaling.expectations import evaluate
from scaling.guidelines import compute_guidelines
from scaling.perfmodel import build_model
from scaling.plots import load_reference, plot_figures
from scaling.render import render_report
from scaling.tables import compute_tables
from scaling_data import allreduce_sweep, loss_curves, study

REPORT = {"efficiency_threshold": 0.75, "inter_node_penalty_pct": 10, "comm_share_pct": 20,
          "reference": "seed-paper-a100", "min_repeats": 2, "target_loss": None, "target_loss_factor": 1.5,
          "predict_max_factor": 8, "max_gpus_per_node": 8, "model_max_mape_pct": 25, "bootstrap_samples": 40}
PROVENANCE = {"hostnames": ["node<1>"], "device_types": ["cpu"], "torch": ["2.13.0+cpu"], "cuda": [], "nccl": [],
              "git": ["9ede84170b6b (dirty)"], "slurm_job_ids": ["4242"], "num_records": 20}
# one that passes, one that fails, one inconclusive (a CI straddles), one not measured
EXPECT = [{"metric": "strong_efficiency", "world_size": 2, "min": 0.7},
          {"metric": "exposed_comm_pct", "experiment": "comm", "max": 20},
          {"metric": "strong_efficiency", "world_size": 4, "min": 0.6},
          {"metric": "weak_efficiency", "world_size": 8, "min": 0.8}]


def study_tables(measurements=None, scale: float = 1.0) -> dict:
    """The hand-built study's tables, model and loss curves; `scale` multiplies every throughput (a
    second, faster or slower study for comparisons)."""
    df = study() if measurements is None else measurements
    if scale != 1.0:
        df = df.copy()
        for c in ("samples_per_s", "samples_per_s_per_rank"):
            df[c] = df[c] * scale
        for c in ("step_time_s", "epoch_time_s", "nosync_step_time_s"):
            df[c] = df[c] / scale
    curves = loss_curves(df) if measurements is None else None
    sweep = allreduce_sweep() if measurements is None else None
    thresholds = {k: v for k, v in REPORT.items() if k != "reference"}
    tables = compute_tables(df, curves, sweep, thresholds)
    tables["model"] = build_model(clean(df), clean_allreduce(sweep), thresholds)
    tables["loss_curves"] = curves
    return tables


def render(tmp: Path, measurements=None, with_figures: bool = True, compare: list[dict] | None = None,
           expect: list | None = None) -> str:
    """The hand-built study with loss curves and an all-reduce sweep (or `measurements` alone);
    `compare`: other studies as {'name', 'folder', 'tables', 'provenance'}."""
    tables = study_tables(measurements)
    thresholds = {k: v for k, v in REPORT.items() if k != "reference"}
    guidelines = compute_guidelines(tables, thresholds, tables["model"])
    reference = load_reference(REPORT["reference"])
    figs = tmp / "plots"
    manifest = plot_figures(tables, figs, reference, thresholds, compare, "handbuilt") if with_figures else {}
    config = {"study": "handbuilt", "repeats": 2, "report": {**REPORT, "expect": expect or []}}
    expectations = evaluate(expect, tables) if expect else None
    return render_report(tables, guidelines, manifest, figs, config, PROVENANCE, reference,
                         generated_utc="2026-12-01 00:00 UTC", expectations=expectations, compare=compare)
