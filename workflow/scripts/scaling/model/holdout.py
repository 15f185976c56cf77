"""Points held out (report.holdout): the performance model fitted without every point at the held-out
world sizes, then asked to predict them. Leave-one-world-size-out validation (model/fit.py) does the
same for every world size to get a MAPE; this names the world sizes a user asks about (usually the
largest, the one a smaller study would have to extrapolate to) and keeps each prediction with its
interval beside the measured value.

    holdout.json: {<model name>: [{experiment, world_size, nodes, gpus_per_node, placement,
                                   measured_step_s, predicted_step_s, interval, error_pct, interval_from}]}

interval: the 2.5 and 97.5 percentiles of the prediction over the bootstrap draws of the reduced fit
(repeats resampled; a one-run point's step drawn from its epochs' spread: fit.py _epoch_draw).
error_pct = 100 (predicted - measured) / measured, measured = the mean step over the point's repeats.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common.columns import SINGLE
from ..common.stats import BOOTSTRAP_SEED
from .fit import config_means, fit_all, predict_step, resample, training_rows
from .terms import NotFitted


def held_sizes(spec, train: pd.DataFrame) -> list[int]:
    """The world sizes `report.holdout` names: "largest" = the largest measured, a list as given
    (only those measured), None = none."""
    if spec is None or train.empty:
        return []
    measured = sorted(int(p) for p in train["world_size"].unique())
    if spec == "largest":
        return measured[-1:] if len(measured) > 1 else []
    return [p for p in measured if p in {int(x) for x in spec}]


def _interval_from(rows: pd.DataFrame) -> str:
    imported = "launcher" in rows and (rows["launcher"] == "imported").any()
    return ("bootstrap of the reduced fit; one run per point, so each step drawn from its epochs' spread"
            if imported else "bootstrap of the reduced fit over repeats")


def holdout(df: pd.DataFrame, allreduce: pd.DataFrame, spec, num_boot: int) -> dict:
    """holdout.json (see the module doc); {} when report.holdout is off or nothing can be held out."""
    train = training_rows(df)
    sweep = allreduce[allreduce["world_size"] > 1] if len(allreduce) else allreduce
    sizes = held_sizes(spec, train)
    if not sizes:
        return {}
    keep = ~train["world_size"].isin(sizes)
    kept_sweep = sweep[~sweep["world_size"].isin(sizes)] if len(sweep) else sweep
    fit = fit_all(train[keep], kept_sweep)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = [fit_all(*resample(train[keep], kept_sweep, rng)) for _ in range(num_boot)]
    held = train[~keep]
    conf = config_means(held)
    out: dict = {}
    interval_from = _interval_from(held)
    for r in conf.itertuples():
        if r.placement_class == SINGLE:
            continue

        def predict(f: dict, r=r) -> float:
            return float(predict_step(f, r.family, r.placement_class, r.world_size, r.batch_per_rank, r.num_params,
                                      r.grads_bytes, r.oversub, r.busy_cores)[0])

        row = {"experiment": r.experiment, "world_size": int(r.world_size), "nodes": int(r.nodes),
               "gpus_per_node": int(r.gpus_per_node), "placement": r.placement_class,
               "measured_step_s": float(r.step_time_s)}
        try:
            pred = predict(fit)
        except NotFitted as e:
            out.setdefault(r.model, []).append({**row, "predicted_step_s": None, "interval": None, "error_pct": None,
                                                "reason": f"without world size {', '.join(map(str, sizes))}: {e}"})
            continue
        boot = []
        for d in draws:
            try:
                boot.append(predict(d))
            except NotFitted:
                continue
        interval = [float(x) for x in np.percentile(boot, [2.5, 97.5])] if len(boot) >= 2 else None
        out.setdefault(r.model, []).append({
            **row, "predicted_step_s": pred, "interval": interval,
            "error_pct": 100 * (pred - float(r.step_time_s)) / float(r.step_time_s),
            "interval_from": interval_from})
    return out
