"""Time and samples to a held-out target (report.target), from the records' validation curves
(val_curves.csv: one row per held-out evaluation, every training.eval_every_samples samples).

The target is `value`, or `from_reference` x the reference: the final evaluation of the world-1 DDP
point of the same experiment and model, averaged over its repeats (the study's own reference
convergence point), and of an experiment's models the worst reference, so they share one target. A val_loss target is reached at or below it, a val_accuracy target at or above.
A repeat reaches it at its first evaluation that does; its time is that evaluation's train_time_s
(training time only: the evaluations ran off the clock, their time is eval_time_s, kept beside it)
and its samples that evaluation's samples_seen. Nothing is interpolated: the held-out metric is
known only where it was evaluated (MLPerf's rule), so the resolution is eval_every_samples.

Only the strong and weak experiments get a held-out target; with one set, their tables carry it in
place of the training-loss target (tables/target.py), which the DDP-settings table keeps.
"""

from __future__ import annotations

import math

import pandas as pd

from kan import startup

from ..common.columns import VAL_CURVE_COLUMNS
from ..common.stats import summarize
from .aggregate import baseline_target_times, exact_at_baseline, not_reached_note, ok_repeats, ratio_columns

EXPERIMENTS = ("strong", "weak")
# the training-loss target's columns in the strong table (experiments._time_to_target), replaced here
LOSS_TARGET_COLUMNS = ("target_loss", "time_to_target_s", "time_to_target_s_ci_lo", "time_to_target_s_ci_hi",
                       "time_to_target_speedup", "time_to_target_speedup_ci_lo", "time_to_target_speedup_ci_hi",
                       "time_to_target_note")
# per repeat, what per_repeat adds: with the start-up's sum, each of its named parts (kan/startup.py)
REPEAT_COLUMNS = ("target_metric", "target_value", "target_reference_value", "time_to_target_s",
                  "samples_to_target", "target_reached", "eval_time_s", "startup_s", *startup.COLUMNS,
                  "clock_step_s", "clock_start_s")


def reaches(value: float, target: float, metric: str) -> bool:
    """Whether one evaluation reaches the target: val_loss at or below, val_accuracy at or above."""
    return value <= target if metric == "val_loss" else value >= target


def first_reach(curve: pd.DataFrame, metric: str, target: float) -> tuple[float, float] | None:
    """(train_time_s, samples_seen) of the first evaluation (by step) that reaches `target`; None: none does."""
    c = curve.dropna(subset=[metric, "train_time_s"]).sort_values("step")
    for t, n, v in zip(c["train_time_s"], c["samples_seen"], c[metric]):
        if reaches(float(v), target, metric):
            return float(t), float(n)
    return None


def clock_line(curve: pd.DataFrame) -> tuple[float, float]:
    """(clock_start_s, clock_step_s): the training clock at the held-out evaluations against the step,
    fitted by least squares as T(step) = start + step x rate. The rate is what a step costs on the
    clock that time to target is read from: the mean step plus the work between the timers (the
    slicing, the loss bookkeeping, the probe steps' flat all-reduce), not the median step the
    performance model predicts; on realdata's 2 ranks sharing 2 cores it was 1.6-2.0x the median (a
    heavy tail: p90 3x the median). The start is the clock's first steps running slower than its
    rate (about 1 ms at one rank there: 8 steps took 5.3 ms at a rate of 0.54 ms). (NaN, NaN) with
    fewer than 2 evaluations at distinct steps. The sums are written out so that no LAPACK call
    makes the last digits depend on the CPU."""
    c = curve.dropna(subset=["step", "train_time_s"])
    x, y = c["step"].astype(float).tolist(), c["train_time_s"].astype(float).tolist()
    n = len(x)
    if n < 2 or len(set(x)) < 2:
        return math.nan, math.nan
    mx, my = sum(x) / n, sum(y) / n
    rate = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)
    return my - rate * mx, rate


def clean_val_curves(curves: pd.DataFrame | None) -> pd.DataFrame:
    """val_curves.csv typed; an absent or header-only file gives an empty frame with the columns."""
    if curves is None or curves.empty:
        return pd.DataFrame(columns=VAL_CURVE_COLUMNS)
    curves = curves.copy()
    for c in ("world_size", "rep", "step", "samples_seen", "train_time_s", "val_loss", "val_accuracy", "eval_time_s"):
        curves[c] = pd.to_numeric(curves[c], errors="coerce")
    curves["ddp"] = [str(v).strip().lower() not in ("false", "0") for v in curves["ddp"]]
    return curves


def references(curves: pd.DataFrame, metric: str) -> dict[tuple[str, str], float]:
    """{(experiment, model): the world-1 DDP point's final held-out value, mean over its repeats}; a
    pair without such a point (or whose curves lack the metric) has none."""
    out = {}
    for (exp, model), g in curves.groupby(["experiment", "model"]):
        base = g[(g["world_size"] == 1) & g["ddp"].astype(bool)]
        finals = [float(r.sort_values("step")[metric].dropna().iloc[-1])
                  for _, r in base.groupby(["point_id", "rep"]) if r[metric].notna().any()]
        if finals:
            out[(exp, model)] = sum(finals) / len(finals)
    return out


def worst(values, metric: str) -> float:
    """The worse of some held-out values: the highest loss, the lowest accuracy."""
    return max(values) if metric == "val_loss" else min(values)


def goals(curves: pd.DataFrame, target: dict) -> dict[tuple[str, str], tuple[float, float]]:
    """{(experiment, model): (target value, reference value or NaN)} of every pair with curves. With
    from_reference every model of an experiment shares one target: the factor x the worst of their
    references, so that each model can reach it and their times to it compare (the verdict,
    decide/accuracy.py, sets the KAN against its MLP baselines at one target). A model without a
    reference point gets none: it could not be told whether its own reference is the worse."""
    pairs = {(e, m) for e, m in zip(curves["experiment"], curves["model"])}
    if "value" in target:
        return {p: (float(target["value"]), math.nan) for p in pairs}
    refs = references(curves, target["metric"])
    out = {}
    for exp in {e for e, _ in refs}:
        ref = worst([v for (e, _), v in refs.items() if e == exp], target["metric"])
        out.update({p: (target["from_reference"] * ref, ref) for p in pairs if p[0] == exp and p in refs})
    return out


def per_repeat(df: pd.DataFrame, curves: pd.DataFrame, target: dict) -> pd.DataFrame:
    """The measurements with REPEAT_COLUMNS on every ok strong and weak repeat (target_reached True /
    False; None without a held-out curve or without a reference); the other rows keep theirs."""
    df = df.copy()
    metric = target["metric"]
    mine = df["experiment"].isin(EXPERIMENTS)
    for c in REPEAT_COLUMNS:
        if c not in df:
            df[c] = None if c in ("target_metric", "target_reached") else math.nan
        df[c] = df[c].astype(object)
        df.loc[mine, c] = None if c in ("target_metric", "target_reached") else math.nan
    curves = curves[curves["experiment"].isin(EXPERIMENTS)]
    goal = goals(curves, target) if len(curves) else {}
    by_run = {(pid, int(rep)): g for (pid, rep), g in curves.groupby(["point_id", "rep"])}
    for i, r in df[mine & (df["status"] == "ok")].iterrows():
        curve = by_run.get((r["point_id"], int(r["rep"])))
        g = goal.get((r["experiment"], r["model"]))
        df.at[i, "target_metric"] = metric
        if curve is None or g is None:
            continue
        value, ref = g
        hit = first_reach(curve, metric, value)
        df.at[i, "target_value"], df.at[i, "target_reference_value"] = value, ref
        df.at[i, "eval_time_s"] = float(curve["eval_time_s"].iloc[0])
        for col in ("startup_s", *startup.COLUMNS):  # the one-time start-up, off the clock (older records lack it)
            if col in curve:
                df.at[i, col] = pd.to_numeric(curve[col], errors="coerce").iloc[0]
        df.at[i, "clock_start_s"], df.at[i, "clock_step_s"] = clock_line(curve)
        df.at[i, "target_reached"] = hit is not None
        if hit is not None:
            df.at[i, "time_to_target_s"], df.at[i, "samples_to_target"] = hit
    for c in REPEAT_COLUMNS:
        if c not in ("target_metric", "target_reached"):
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def _note(ok: pd.DataFrame, have: pd.DataFrame, missed: int) -> str:
    if have.empty:
        return "no held-out curve or reference" if len(ok) else ""
    return not_reached_note(missed, len(have)) if missed else ""


def with_target(t: pd.DataFrame, sub: pd.DataFrame) -> pd.DataFrame:
    """A strong or weak table with the held-out target's columns in place of the training-loss ones:
    target_metric, target_value, target_reference_value; time_to_target_s and samples_to_target
    (mean, 95% CI over the repeats; given only when every ok repeat with a curve reached the target:
    a mean over the repeats that happened to reach it would be biased low), target_n_reached of
    target_n_repeats, target_reached, time_to_target_note, eval_time_s_mean (all of a run's evaluations),
    startup_s_mean (the one-time start-up before the clock started: kan/loop.py) and each of its parts,
    startup_<part>_s_mean (over the repeats where the part ran: kan/startup.py), clock_step_s_mean and
    clock_start_s_mean (clock_line: what a step costs on the training clock, and its slower start), and
    time_to_target_speedup = the DDP baseline's time / this time. `sub`: per_repeat's rows of that
    experiment."""
    t = t.drop(columns=[c for c in LOSS_TARGET_COLUMNS if c in t]).copy()
    num = ("target_value", "target_reference_value", "time_to_target_s", "time_to_target_s_ci_lo",
           "time_to_target_s_ci_hi", "samples_to_target", "samples_to_target_ci_lo", "samples_to_target_ci_hi",
           "target_n_reached", "target_n_repeats", "eval_time_s_mean", "startup_s_mean",
           *(f"{c}_mean" for c in startup.COLUMNS), "clock_step_s_mean", "clock_start_s_mean", "time_to_target_speedup",
           "time_to_target_speedup_ci_lo", "time_to_target_speedup_ci_hi")
    t["target_metric"] = sub["target_metric"].dropna().iloc[0] if sub["target_metric"].notna().any() else ""
    for c in num + ("time_to_target_s_std",):
        t[c] = math.nan
    t["target_reached"] = None
    t["time_to_target_note"] = ""
    t = t.astype({"target_reached": object})
    for model, g in t.groupby("model"):
        base_t, base_ok = baseline_target_times(sub, model)
        for i in g.index:
            ok = ok_repeats(sub, t.loc[i])
            have = ok[ok["target_reached"].notna()]
            missed = int((~have["target_reached"].astype(bool)).sum())
            t.at[i, "time_to_target_note"] = _note(ok, have, missed)
            if have.empty:
                continue
            t.at[i, "target_value"] = float(have["target_value"].iloc[0])
            t.at[i, "target_reference_value"] = float(have["target_reference_value"].iloc[0])
            t.at[i, "target_n_reached"] = len(have) - missed
            t.at[i, "target_n_repeats"] = len(have)
            t.at[i, "target_reached"] = missed == 0
            t.at[i, "eval_time_s_mean"] = float(have["eval_time_s"].mean())
            for col in ("startup_s", *startup.COLUMNS, "clock_step_s", "clock_start_s"):
                t.at[i, f"{col}_mean"] = float(have[col].mean()) if have[col].notna().any() else math.nan
            if missed:
                continue
            for col in ("time_to_target_s", "samples_to_target"):
                st = summarize(have[col])
                t.at[i, col] = st["mean"]
                if col == "time_to_target_s":  # the verdict compares rows by their statistics (stats.ratio_of)
                    t.at[i, f"{col}_std"] = st["std"]
                t.at[i, f"{col}_ci_lo"] = max(st["ci_lo"], 0.0) if not math.isnan(st["ci_lo"]) else math.nan
                t.at[i, f"{col}_ci_hi"] = st["ci_hi"]
            if base_ok:
                ratio_columns(t, i, "time_to_target_speedup", base_t, have["time_to_target_s"])
                if bool(t.at[i, "is_baseline"]):
                    exact_at_baseline(t, i, ("time_to_target_speedup",))
    return t


def rule_text(target: dict, tables: dict) -> str:
    """The held-out target in words for the report's Method: the metric, the direction, the value, and
    with from_reference each reference point's value (from the strong and weak tables)."""
    metric = target["metric"]
    way = "at or below" if metric == "val_loss" else "at or above"
    if "value" in target:
        head = f"held-out target {metric} {way} {target['value']:g} (report.target)"
        return head
    head = (f"held-out target {metric} {way} {target['from_reference']:g} × the reference: the final {metric} of "
            f"the world-1 DDP point of the same experiment and model, mean over its repeats, and of the "
            f"experiment's models the worst, so that every model can reach the one target (report.target)")
    parts = []
    for exp in EXPERIMENTS:
        t = tables.get(exp)
        if t is None or "target_value" not in t:
            continue
        v, ref = t["target_value"].dropna(), t["target_reference_value"].dropna()
        if len(v) and len(ref):
            parts.append(f"{exp}: reference {float(ref.iloc[0]):.4g}, target {float(v.iloc[0]):.4g}")
        missing = sorted(set(t["model"]) - set(t.loc[t["target_value"].notna(), "model"]))
        if missing:
            parts.append(f"{exp}, {', '.join(missing)}: no world-1 DDP point with a held-out curve, so no target")
    return head + (": " + "; ".join(parts) if parts else "")
