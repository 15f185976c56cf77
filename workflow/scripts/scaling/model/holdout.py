"""Points held out (report.holdout): every point at the held-out placements is removed, the model refitted
on the rest, and each held-out point's step predicted beside its measured one. Leave-one-world-size-out
validation (model/fit.py) tests the world-size model this way; this names the placements a user asks
about (usually the largest, the one a smaller study would have to extrapolate to) and predicts them with
the placement model (model/placement.py: nodes and GPUs a node apart, several forms, intervals that
hold the spread between the forms the data cannot tell apart).

report.holdout: "largest" (every placement at the largest world size measured), world sizes (8), or
placements written NxG ("4x1", "4x2"), mixed as you like.

    holdout.json: {<model name>: [{experiment, nodes, gpus_per_node, world_size, placement, batch_per_rank,
                                   measured_step_s, runs, predicted_step_s, interval, model_interval,
                                   error_pct, extrapolated, forms, run_to_run_pct, interval_from, reason}]}

interval: the 95% prediction interval [lo, hi] of the measured step (placement.py's module doc says how);
model_interval: the plausible forms' own predictions, lowest and highest (the model-form spread);
forms: the plausible forms, named by their features. predicted_step_s is null where the prediction is
refused, interval null where nothing bounds it; `reason` says why in both cases. extrapolated: null, or
a sentence saying past what was measured the placement goes. error_pct = 100 (predicted - measured) /
measured, measured = the mean step over the point's repeats. A held-out point the analysis could not
use (a failed run, a DDP run at a width no run without DDP measured) is a row with its reason too.
run_to_run_pct: the relative spread between runs of one step, pooled over every step the reduced fit
saw run more than once (repeats, or one step measured by several experiments, as the seed paper's
strong, weak and comm runs are); it is a floor under the interval.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..common.columns import SINGLE
from .fit import config_means, fit_all, training_rows
from .placed import Placed
from .placement import extrapolation

PLACEMENT = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


def held_places(spec, train: pd.DataFrame, planned: pd.DataFrame | None = None) -> list[tuple[int, int]]:
    """The placements (nodes, GPUs a node) that `report.holdout` names, of those measured (`train`) or
    planned (`planned`, so that a failed point named is listed with its reason): "largest" = those at
    the largest world size measured (none when only one world size was), world sizes, "NxG"; None = none."""
    if spec is None or train.empty:
        return []
    places = pd.concat([train, planned]) if planned is not None else train
    measured = sorted(set(zip(places["nodes"].astype(int), places["gpus_per_node"].astype(int))))
    items = [spec] if isinstance(spec, str) else list(spec)
    out: set[tuple[int, int]] = set()
    for item in items:
        if item == "largest":
            ok = sorted(set(train["world_size"].astype(int)))
            if len(ok) > 1:
                out |= {(n, g) for n, g in measured if n * g == ok[-1]}
        elif isinstance(item, str) and PLACEMENT.match(item):
            n, g = (int(x) for x in PLACEMENT.match(item).groups())
            out |= {(n, g)} & set(measured)
        else:
            out |= {(n, g) for n, g in measured if n * g == int(item)}
    return sorted(out)


def held_sizes(spec, train: pd.DataFrame) -> list[int]:
    """The world sizes of held_places."""
    return sorted({n * g for n, g in held_places(spec, train)})


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


def _place_name(n: int, g: int) -> str:
    return f"{n}x{g}"


def _left_out(df: pd.DataFrame, train: pd.DataFrame, places: list[tuple[int, int]]) -> dict[str, list[dict]]:
    """Rows at the held-out placements that the model could not use, with the reason."""
    at = pd.Series([(int(n), int(g)) in places for n, g in zip(df["nodes"], df["gpus_per_node"])], index=df.index)
    used = set(train["point_id"]) if "point_id" in train else set()
    out: dict[str, list[dict]] = {}
    for _, r in df[at].iterrows():
        if r.get("point_id") in used or not bool(r.get("ddp", True)) or int(r["world_size"]) < 2:
            continue
        if r["status"] != "ok":
            why = f"the run is {r['status']}" + (f": {r['reason']}" if isinstance(r.get("reason"), str) else "")
        elif not r["step_time_s"] > 0:
            why = "no step time recorded"
        elif r.get("ddp_setting") not in (None, "", "none") and isinstance(r.get("ddp_setting"), str):
            why = f"DDP setting {r['ddp_setting']}: the model is fitted to DDP's defaults (model.json's ddp_settings)"
        else:
            why = "its compute is unknown: no run without DDP at its per-rank batch and width"
        out.setdefault(str(r["model"]), []).append({
            "experiment": r["experiment"], "nodes": int(r["nodes"]), "gpus_per_node": int(r["gpus_per_node"]),
            "world_size": int(r["world_size"]), "placement_class": r.get("placement_class"),
            "batch_per_rank": float(r["batch_per_rank"]), "measured_step_s": None, "runs": 0,
            "predicted_step_s": None, "interval": None, "model_interval": None, "error_pct": None,
            "extrapolated": None, "reason": f"left out of the model: {why}"})
    return out


def holdout(df: pd.DataFrame, allreduce: pd.DataFrame, spec, num_boot: int = 0) -> dict:
    """holdout.json (see the module doc); {} when report.holdout is off or nothing can be held out.
    `num_boot` is kept for callers: the placement model's intervals come from left-out placements."""
    train = training_rows(df)
    sweep = allreduce[allreduce["world_size"] > 1] if len(allreduce) else allreduce
    places = held_places(spec, train, df[df["ddp"].astype(bool) & (df["world_size"] > 1)])
    if not places:
        return {}
    at = pd.Series([(int(n), int(g)) in places for n, g in zip(train["nodes"], train["gpus_per_node"])],
                   index=train.index)
    held_ws = {n * g for n, g in places}
    kept_sweep = sweep[~sweep["world_size"].isin(held_ws)] if len(sweep) else sweep
    kept = train[~at]
    fit = fit_all(kept, kept_sweep)
    s, dof, steps = run_to_run(kept)
    names = ", ".join(_place_name(n, g) for n, g in places)
    out: dict = {}
    for model, held in train[at].groupby("model", sort=True):
        mine = kept[kept["model"] == model]
        fam = str(held["family"].iloc[0])
        comp = fit["compute"].get(fam)
        placed = Placed(mine, fit, fam, (s, dof)) if isinstance(comp, dict) and len(mine) else None
        for r in config_means(held).itertuples():
            if r.placement_class == SINGLE:
                continue
            n, g, b = int(r.nodes), int(r.gpus_per_node), float(r.batch_per_rank)
            row = {"experiment": r.experiment, "nodes": n, "gpus_per_node": g, "world_size": int(r.world_size),
                   "placement_class": r.placement_class, "batch_per_rank": b,
                   "measured_step_s": float(r.step_time_s), "runs": int(r.runs),
                   "extrapolated": extrapolation(placed.measured, n, g, b) if placed else None,
                   "run_to_run_pct": None if s is None else 100 * s}
            if not isinstance(comp, dict):
                pred, why = None, comp or f"no compute term for {fam}"
            elif placed is None:
                pred, why = None, "no run of this model is left to fit"
            else:
                pred, why, _ = placed.predict(n, g, b, float(r.oversub), float(r.busy_cores), float(r.num_params))
            if pred is None:
                out.setdefault(model, []).append({**row, "predicted_step_s": None, "interval": None,
                                                  "model_interval": None, "error_pct": None, "forms": [],
                                                  "reason": f"without {names}: {why}"})
                continue
            how = pred.interval_from
            if s is not None and how:
                how += f"; spread between runs of one step {100 * s:.1f}% ({steps} steps run more than once)"
            out.setdefault(model, []).append({
                **row, "predicted_step_s": pred.step_s, "interval": pred.interval,
                "model_interval": pred.forms_interval, "forms": pred.forms,
                "error_pct": 100 * (pred.step_s - float(r.step_time_s)) / float(r.step_time_s),
                "interval_from": how, "reason": pred.reason})
    for model, rows_left in _left_out(df, train, places).items():
        out.setdefault(model, []).extend(rows_left)
    return out
