"""The performance model applied to DDP's own settings (the ddp experiment): a communication hook
changes how many bytes the all-reduce moves, so the comm term is evaluated at
    n_setting = grads_bytes x bytes_factor,
    bytes_factor = bytes per synced step of the setting / bytes per synced step of `none`
(both measured: the hook's all_reduce calls are counted, kan/ddp_wrap.py), or, where `none` was
not measured at that placement, the nominal factor (fp16 / bf16: 2 of 4 bytes per element = 0.5).
The model is fitted to DDP's defaults only (fit.training_rows), so each prediction here is
out of sample; its error against the measured step says what the bytes alone do not explain (the
hook's own work, e.g. PowerSGD's matrix products, or a changed overlap).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..common.columns import model_family
from ..tables.ddp_table import SAME_PLACE, baseline_of, hook_of
from .fit import predict_step
from .terms import NotFitted

NOMINAL = {"none": 1.0, "fp16": 0.5, "bf16": 0.5}


def _factor(g: pd.DataFrame, base: pd.DataFrame, hook: str) -> tuple[float | None, str]:
    mine, ref = g["bytes_per_step"].dropna(), base["bytes_per_step"].dropna()
    if len(mine) and len(ref) and float(ref.mean()) > 0:
        return float(mine.mean() / ref.mean()), "measured: bytes per step ÷ those of none"
    if hook in NOMINAL:
        return NOMINAL[hook], "nominal (none not measured here)"
    return None, "no bytes per step measured"


def ddp_predictions(rows: pd.DataFrame, fit: dict) -> dict[str, list[dict]]:
    """{model: [one entry per setting and placement of the ddp experiment]} from the ok rows
    (fit.training_rows(df, defaults_only=False)) and the model fitted to DDP's defaults."""
    out: dict[str, list[dict]] = {}
    sub = rows[rows["experiment"] == "ddp"] if "experiment" in rows else rows.iloc[0:0]
    for key, g in sub.groupby(SAME_PLACE + ["ddp_setting"], sort=True):
        place = dict(zip(SAME_PLACE, key[:-1]))
        setting = key[-1]
        factor, source = _factor(g, baseline_of(sub, place), hook_of(setting))
        measured = float(g["step_time_s"].mean())
        entry = {"ddp_setting": setting, "nodes": int(place["nodes"]), "gpus_per_node": int(place["gpus_per_node"]),
                 "link_mbit": float(place["link_mbit"] or 0), "placement_class": str(g["placement_class"].iloc[0]),
                 "world_size": int(g["world_size"].iloc[0]), "bytes_factor": factor, "bytes_factor_source": source,
                 "measured_step_time_s": measured, "predicted_step_time_s": None, "error_pct": None}
        if factor is not None:
            try:
                pred = predict_step(fit, model_family(place["model"]), entry["placement_class"], entry["world_size"],
                                    float(g["batch_per_rank"].median()), float(g["num_params"].median()),
                                    float(g["grads_bytes"].median()) * factor, float(g["oversub"].median()),
                                    float(g["busy_cores"].median()))
                p = float(np.atleast_1d(pred)[0])
                entry["predicted_step_time_s"] = p
                entry["error_pct"] = 100 * (p - measured) / measured if measured > 0 else None
            except NotFitted as e:
                entry["reason"] = str(e)
        else:
            entry["reason"] = source
        if entry["error_pct"] is not None and not math.isfinite(entry["error_pct"]):
            entry["error_pct"] = None
        out.setdefault(str(place["model"]), []).append(entry)
    return out
