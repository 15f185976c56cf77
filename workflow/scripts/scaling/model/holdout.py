"""Points held out (report.holdout): the performance model fitted without every point at the held-out
world sizes, then asked to predict them. Leave-one-world-size-out validation (model/fit.py) does the
same for every world size to get a MAPE; this names the world sizes a user asks about (usually the
largest, the one a smaller study would have to extrapolate to) and keeps each prediction with its
interval beside the measured value.

    holdout.json: {<model name>: [{experiment, world_size, nodes, gpus_per_node, placement,
                                   measured_step_s, runs, predicted_step_s, interval, model_interval,
                                   run_to_run_pct, error_pct, interval_from}]}

model_interval: the 2.5 and 97.5 percentiles of the prediction over the bootstrap draws of the
reduced fit (repeats resampled; a one-run point's step drawn from its epochs' spread: fit.py
_epoch_draw). It is where the model's mean step lies, not where a measurement falls: two runs of one
step differ by more than the model's uncertainty (the seed paper's runs: about 1%, against an
interval of +-0.15%). interval: where the measured value (a mean over `runs` runs) is expected, each
draw times (1 + s t / sqrt(runs)), s the run-to-run spread and t Student's t with the spread's
degrees of freedom. s (run_to_run_pct) is pooled over every configuration the reduced fit saw run
more than once: repeats, or one step (model, placement, per-rank batch, DDP or not) measured by
several experiments, as the seed paper's strong, weak and comm runs are. Where none ran twice, the
interval is the model's alone, and interval_from says so.
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


# one step, whatever experiment measured it: its runs differ only by run-to-run variation
SAME_STEP = ["model", "nodes", "gpus_per_node", "batch_per_rank", "ddp"]


def run_to_run(rows: pd.DataFrame) -> tuple[float | None, int, int]:
    """(s, degrees of freedom, configurations): the relative standard deviation of one run's mean
    step between runs of the same step, pooled over every step of `rows` run more than once,
    s = sqrt(sum over steps and runs of (x / step mean - 1)^2 / sum of (runs - 1)); None when no
    step ran twice."""
    groups = [g["step_time_s"].to_numpy(float) for _, g in rows.groupby(SAME_STEP) if len(g) > 1]
    dof = sum(len(x) - 1 for x in groups)
    if not dof:
        return None, 0, 0
    ss = sum(float(((x / x.mean() - 1) ** 2).sum()) for x in groups)
    return float(np.sqrt(ss / dof)), dof, len(groups)


def _interval_from(rows: pd.DataFrame, spread: tuple[float | None, int, int]) -> str:
    imported = "launcher" in rows and (rows["launcher"] == "imported").any()
    one_run = "rep" in rows and not (rows["rep"] > 0).any()
    if imported and one_run:
        model = "bootstrap of the reduced fit; one run per point, so each step drawn from its epochs' spread"
    elif imported:
        model = "bootstrap of the reduced fit over repeats, each imported step also drawn from its epochs' spread"
    else:
        model = "bootstrap of the reduced fit over repeats"
    s, dof, steps = spread
    if s is None:
        return f"{model}; no step of the fit ran twice, so the spread between runs is not in it"
    return (f"{model}, widened by the spread between runs of one step, {100 * s:.1f}% (pooled over {steps} "
            f"step{'s' if steps != 1 else ''} run more than once, {dof} degrees of freedom)")


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
    spread = run_to_run(train[keep])
    interval_from = _interval_from(held, spread)
    s, dof, _ = spread
    noise = rng.standard_t(dof, size=num_boot) if s is not None else np.zeros(num_boot)
    for r in conf.itertuples():
        if r.placement_class == SINGLE:
            continue

        def predict(f: dict, r=r) -> float:
            return float(predict_step(f, r.family, r.placement_class, r.world_size, r.batch_per_rank, r.num_params,
                                      r.grads_bytes, r.oversub, r.busy_cores)[0])

        row = {"experiment": r.experiment, "world_size": int(r.world_size), "nodes": int(r.nodes),
               "gpus_per_node": int(r.gpus_per_node), "placement": r.placement_class,
               "measured_step_s": float(r.step_time_s), "runs": int(r.runs)}
        try:
            pred = predict(fit)
        except NotFitted as e:
            out.setdefault(r.model, []).append({**row, "predicted_step_s": None, "interval": None,
                                                "model_interval": None, "error_pct": None,
                                                "reason": f"without world size {', '.join(map(str, sizes))}: {e}"})
            continue
        boot, measured = [], []
        for d, z in zip(draws, noise):
            try:
                b = predict(d)
            except NotFitted:
                continue
            boot.append(b)
            measured.append(b * (1 + (s or 0.0) * z / np.sqrt(r.runs)))
        pct = lambda x: [float(v) for v in np.percentile(x, [2.5, 97.5])] if len(x) >= 2 else None  # noqa: E731
        out.setdefault(r.model, []).append({
            **row, "predicted_step_s": pred, "interval": pct(measured), "model_interval": pct(boot),
            "run_to_run_pct": None if s is None else 100 * s,
            "error_pct": 100 * (pred - float(r.step_time_s)) / float(r.step_time_s),
            "interval_from": interval_from})
    return out
