"""The tables stage's entry point: measurements.csv, loss_curves.csv and allreduce.csv -> every table
(experiments.py, ddp_table.py), the points-status table and the law fits (fits.py), with time to target
(target.py) per repeat; with a held-out target (report.target), the strong and weak tables carry
time and samples to it from val_curves.csv (heldout.py) in place of the training-loss target."""

from __future__ import annotations

import pandas as pd

from ..common.columns import clean, clean_allreduce, clean_curves
from ..common.settings import Settings
from . import fits as law_fits
from . import heldout
from .aggregate import points_status
from .anatomy_table import anatomy_table
from .ddp_table import ddp_table
from .experiments import allreduce_table, comm_table, model_size_table, strong_table, weak_table
from .target import per_repeat


def compute_tables(measurements: pd.DataFrame, settings: Settings, loss_curves: pd.DataFrame | None = None,
                   allreduce: pd.DataFrame | None = None, val_curves: pd.DataFrame | None = None) -> dict:
    """All tables from the tidy measurements: {'points', 'strong', 'weak', 'comm', 'model_size', 'ddp',
    'allreduce_sizes', 'anatomy'} DataFrames and 'fits' (a dict). `settings`: the target loss, the bootstrap size
    and the deciding intervals' level."""
    level = settings.decision_level
    df = per_repeat(clean(measurements), clean_curves(loss_curves), settings)
    tables = {
        "points": points_status(df),
        "strong": strong_table(df, level),
        "weak": weak_table(df, level),
        "comm": comm_table(df, level),
        "model_size": model_size_table(df),
        "ddp": ddp_table(df, level),
        "allreduce_sizes": allreduce_table(clean_allreduce(allreduce)),
        "anatomy": anatomy_table(df),
    }
    if settings.target is not None:
        held = heldout.per_repeat(df, heldout.clean_val_curves(val_curves), settings.target)
        for name in heldout.EXPERIMENTS:
            tables[name] = heldout.with_target(tables[name], held[held["experiment"] == name])
    tables["fits"] = law_fits.fits(df, settings.bootstrap_samples)
    return tables
