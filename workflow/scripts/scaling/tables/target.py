"""Time to a target training loss: speedup at equal epochs is not speedup to the same model (a larger
global batch takes fewer optimiser steps per epoch), so each point also gets the training time it
took to reach one loss.

The target of an experiment and model is `report.target_loss` when set, else
target_loss_factor x the final training loss of the world-1 DDP point of that experiment and model,
averaged over its repeats (the last entry of each repeat's loss curve). The ddp experiment has no
world-1 point: its baseline is the `none` setting (DDP's defaults) at its placement. A point reaches it at the
first curve entry at or below the target; the time is interpolated linearly between that entry and
the one before it (elapsed_s is training time since the first step, start-up excluded).
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import DEFAULT_DDP_SETTING
from ..common.settings import Settings


def rule_text(settings: Settings) -> str:
    if settings.target_loss is not None:
        return f"target loss {settings.target_loss:g} (report.target_loss)"
    factor = settings.target_loss_factor
    return (f"target loss = {factor:g} × the final training loss of the world-1 DDP point of the same experiment "
            f"and model (mean over its repeats; report.target_loss_factor); in the DDP-settings experiment, of its "
            f"`none` setting (DDP's defaults)")


def time_to_target(curve: pd.DataFrame, target: float) -> float:
    """Seconds of training until the loss first reaches `target` (NaN: not reached). Entries are
    sorted by step; between the last entry above and the first at/below the target the loss is taken
    as linear in time: t = t0 + (t1 - t0) * (l0 - target) / (l0 - l1)."""
    c = curve.dropna(subset=["elapsed_s", "train_loss"]).sort_values("step")
    prev = None
    for t, loss in zip(c["elapsed_s"], c["train_loss"]):
        if loss <= target:
            if prev is None or prev[1] == loss:
                return float(t)
            t0, l0 = prev
            return float(t0 + (t - t0) * (l0 - target) / (l0 - loss))
        prev = (t, loss)
    return math.nan


def _baseline(exp: str, g: pd.DataFrame) -> pd.DataFrame:
    """The curves a target is derived from: the world-1 DDP point, or in the ddp experiment (no
    world-1 point) the `none` setting."""
    if exp == "ddp":
        return g[g["ddp_setting"] == DEFAULT_DDP_SETTING] if "ddp_setting" in g else g.iloc[0:0]
    return g[(g["world_size"] == 1) & g["ddp"].astype(bool)]


def targets(curves: pd.DataFrame, settings: Settings) -> dict[tuple[str, str], float]:
    """{(experiment, model): target loss}; a pair whose baseline point has no curve gets none."""
    fixed = settings.target_loss
    factor = settings.target_loss_factor
    out = {}
    for (exp, model), g in curves.groupby(["experiment", "model"]):
        if fixed is not None:
            out[(exp, model)] = float(fixed)
            continue
        base = _baseline(exp, g)
        finals = [r.sort_values("step")["train_loss"].dropna().iloc[-1]
                  for _, r in base.groupby(["point_id", "rep"]) if r["train_loss"].notna().any()]
        if finals:
            out[(exp, model)] = factor * sum(finals) / len(finals)
    return out


def per_repeat(measurements: pd.DataFrame, curves: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The measurements with `target_loss`, `time_to_target_s` (NaN when not reached or no curve) and
    `target_reached` (True / False; None without a curve or a target) per point x repeat."""
    df = measurements.copy()
    df["target_loss"] = math.nan
    df["time_to_target_s"] = math.nan
    df["target_reached"] = None
    if curves.empty:
        return df
    if "ddp_setting" in df and ("ddp_setting" not in curves or not curves["ddp_setting"].astype(bool).any()):
        # a loss_curves.csv from before the column: the setting from the point's row
        setting = dict(zip(df["point_id"], df["ddp_setting"]))
        curves = curves.assign(ddp_setting=[setting.get(p, "") for p in curves["point_id"]])
    goal = targets(curves, settings)
    # a curve belongs to one point x repeat
    by_run = {(pid, int(rep)): g for (pid, rep), g in curves.groupby(["point_id", "rep"])}
    for i, r in df[df["status"] == "ok"].iterrows():
        target = goal.get((r["experiment"], r["model"]))
        curve = by_run.get((r["point_id"], int(r["rep"])))
        if target is None or curve is None:
            continue
        t = time_to_target(curve, target)
        df.at[i, "target_loss"] = target
        df.at[i, "time_to_target_s"] = t
        df.at[i, "target_reached"] = not math.isnan(t)
    return df
