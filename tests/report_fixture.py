"""Render a report from the hand-built study (shared by the unit render test and the browser test)."""

from __future__ import annotations

from pathlib import Path

from scaling.common.columns import clean, clean_allreduce
from scaling.common.settings import Settings
from scaling.decide.guidelines import compute_guidelines
from scaling.decide.expectations import evaluate
from scaling.model.perf_model import fit_performance_model
from scaling.report.plots import plot_figures
from scaling.report.reference import load_reference
from scaling.report.render import render_report
from scaling.tables.all_tables import compute_tables
from scaling_data import allreduce_sweep, loss_curves, schema_config, study

# the hand-built study's config: the schema's defaults but for these (two repeats, a quick bootstrap)
CONFIG = {"study": "handbuilt", **schema_config(min_repeats=2, bootstrap_samples=40), "repeats": 2}
REPORT = CONFIG["report"]
SETTINGS = Settings.from_config(CONFIG)
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
    tables = compute_tables(df, SETTINGS, curves, sweep)
    tables["model"] = fit_performance_model(clean(df), clean_allreduce(sweep), SETTINGS)
    tables["loss_curves"] = curves
    return tables


def render(tmp: Path, measurements=None, with_figures: bool = True, compare: list[dict] | None = None,
           expect: list | None = None) -> str:
    """The hand-built study with loss curves and an all-reduce sweep (or `measurements` alone);
    `compare`: other studies as {'name', 'folder', 'tables', 'provenance'}."""
    tables = study_tables(measurements)
    guidelines = compute_guidelines(tables, SETTINGS, tables["model"])
    reference = load_reference(REPORT["reference"])
    figs = tmp / "plots"
    manifest = plot_figures(tables, figs, reference, SETTINGS, compare, "handbuilt") if with_figures else {}
    config = {**CONFIG, "report": {**REPORT, "expect": expect or []}}
    expectations = evaluate(expect, tables) if expect else None
    return render_report(tables, guidelines, manifest, figs, config, PROVENANCE, reference,
                         generated_utc="2026-12-01 00:00 UTC", expectations=expectations, compare=compare)
