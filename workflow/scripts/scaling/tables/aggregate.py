"""Configurations and their repeats: what every table of the tables stage builds on. A
configuration is the repeats of one point (GROUP); `aggregate` gives one row per configuration with
counts by status and, over its ok repeats, each metric's mean, median, std and 95% CI (and for the
metrics a guideline decides on, the deciding interval at the study's decision level).
"""

from __future__ import annotations

import math
import re

import pandas as pd

from ..common.stats import ratio_ci, summarize

# a configuration = the repeats of one point; these columns identify it
# link_mbit: the emulated link's rate (0 = none): one configuration per rate
# ddp_setting: DDP's own settings (the ddp experiment; "none" elsewhere): one configuration per setting
GROUP = ["experiment", "model", "nodes", "gpus_per_node", "link_mbit", "hidden_width", "ddp", "ddp_setting"]
# constant within a configuration; carried along for readers
CARRY = ["world_size", "placement", "placement_class", "batch_per_rank", "global_batch", "samples", "epochs",
         "grid_size", "step_tolerance_pct"]
STAT_SUFFIXES = ("mean", "median", "std", "ci_lo", "ci_hi")
# the guidelines decide on these metrics: beside the 95% CI (ci_lo/ci_hi, for reading) they get the
# deciding interval (dlo/dhi) at the settings' decision_level, 1 - alpha / looks (decide/sequential.py)
DECIDED = ("exposed_comm_pct", "compute_samples_per_s_per_rank")
# may legitimately be negative (noise around zero); every other metric's CI is clipped at 0
SIGNED = {"exposed_comm_pct", "exposed_comm_s"}
SHARES_PCT = {"exposed_comm_pct"}  # % of the synced step: at most 100
LOG_PATH = re.compile(r" \(log: [^)]*\)")  # the launcher's "(log: results/<study>/logs/<point>.log)"


def points_status(df: pd.DataFrame) -> pd.DataFrame:
    """One row per planned point x repeat: what ran and, when it did not succeed, why."""
    cols = ["point_id", "experiment", "model", "nodes", "gpus_per_node", "world_size", "placement",
            "placement_class", "ddp", "hidden_width", "rep", "status", "reason", "contended", "contention",
            "step_tolerance_pct", "num_steps", "stop_reason", "job_wall_s"]
    out = df.reindex(columns=cols).copy()
    out["reason"] = [r if isinstance(r, str) and r else ("no record" if s == "missing" else "")
                     for r, s in zip(out["reason"], out["status"])]
    return out.sort_values(["experiment", "model", "world_size", "nodes", "hidden_width", "rep"]).reset_index(drop=True)


def ok_repeats(df: pd.DataFrame, row: pd.Series | dict) -> pd.DataFrame:
    """The ok repeats of the configuration `row` belongs to."""
    sel = df["status"] == "ok"
    for c in GROUP:
        sel &= df[c] == row[c]
    return df[sel]


def not_ok_text(g: pd.DataFrame) -> str:
    """Why a configuration's repeats did not succeed, each reason once: repeats that failed alike
    differ only in their log's path, so reasons are told apart without it (the first one's is kept)."""
    seen: dict[str, str] = {}
    for st, r in zip(g["status"], g["reason"]):
        if st == "ok":
            continue
        text = f"{st}: {r}" if isinstance(r, str) and r else st
        seen.setdefault(LOG_PATH.sub("", text), text)
    return "; ".join(seen[k] for k in sorted(seen))


def _clip(m: str, st: dict) -> dict:
    if m not in SIGNED and st["ci_lo"] < 0:  # a t interval from few noisy repeats can dip below 0
        st["ci_lo"] = 0.0
    if m in SHARES_PCT and st["ci_hi"] > 100:  # a share of the step cannot exceed the step
        st["ci_hi"] = 100.0
    return st


def aggregate(df: pd.DataFrame, metrics: list[str], level: float | None = None) -> pd.DataFrame:
    """One row per configuration: counts by status and, over the ok repeats, <metric>_{mean, median,
    std, ci_lo, ci_hi}, and for the DECIDED metrics <metric>_{dlo, dhi} at `level` (the deciding
    intervals' level: needed only when `metrics` hold a DECIDED one). Configurations without an ok
    repeat keep their row with NaN statistics."""
    assert level is not None or not set(metrics) & set(DECIDED), "a decided metric needs the decision level"
    rows = []
    for key, g in df.groupby(GROUP, sort=True, dropna=False):
        ok = g[g["status"] == "ok"]
        row = dict(zip(GROUP, key))
        row.update({c: g[c].iloc[0] for c in CARRY if c in g})
        row["n_planned"] = len(g)
        row["n_ok"] = len(ok)
        row["n_failed"] = int(((g["status"] != "ok") & (g["status"] != "missing")).sum())
        row["n_missing"] = int((g["status"] == "missing").sum())
        row["n_contended"] = int(ok["contended"].astype(bool).sum()) if "contended" in ok else 0
        row["not_ok"] = not_ok_text(g)
        for m in metrics:
            values = ok[m] if m in ok else []
            st = _clip(m, summarize(values))
            for sfx in STAT_SUFFIXES:
                row[f"{m}_{sfx}"] = st[sfx]
            if m in DECIDED:
                d = _clip(m, summarize(values, level))
                row[f"{m}_dlo"], row[f"{m}_dhi"] = d["ci_lo"], d["ci_hi"]
        rows.append(row)
    cols = GROUP + CARRY + ["n_planned", "n_ok", "n_failed", "n_missing", "n_contended", "not_ok"] + [
        f"{m}_{s}" for m in metrics for s in STAT_SUFFIXES + (("dlo", "dhi") if m in DECIDED else ())]
    return pd.DataFrame(rows, columns=cols)


def not_reached_note(missed: int, total: int) -> str:
    return "not reached" if missed == total else f"not reached in {missed} of {total} repeats"


def reached_times(ok: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """(the ok repeats' times to target when every one with a loss curve reached it, else None; a
    note: 'no loss curve', 'not reached [in k of n repeats]' or '')."""
    have = ok[ok["target_reached"].notna()] if "target_reached" in ok else ok.iloc[0:0]
    if have.empty:
        return None, "no loss curve" if len(ok) else ""
    missed = int((~have["target_reached"].astype(bool)).sum())
    if missed:
        return None, not_reached_note(missed, len(have))
    return have["time_to_target_s"], ""


def ratio_columns(t: pd.DataFrame, i, name: str, num, den, scale: float = 1.0, level: float | None = None) -> None:
    """name and its 95% CI (name_ci_lo/hi); for a ratio a guideline decides on, also its deciding
    interval at `level` (name_dlo/dhi)."""
    r = ratio_ci(num, den)
    t.at[i, name] = r["ratio"] * scale
    t.at[i, f"{name}_ci_lo"] = r["ci_lo"] * scale
    t.at[i, f"{name}_ci_hi"] = r["ci_hi"] * scale
    if level is not None:
        d = ratio_ci(num, den, level)
        t.at[i, f"{name}_dlo"] = d["ci_lo"] * scale
        t.at[i, f"{name}_dhi"] = d["ci_hi"] * scale


def baselines(sub: pd.DataFrame, model: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """(ok rows of the baseline = the smallest DDP world size with an ok repeat, on a tie the fewest
    nodes; ok rows of the non-DDP world-1 point), either None when not measured. With no DDP point at
    one rank but a one-rank run without DDP (runs imported from elsewhere: the seed paper ran its one
    GPU without DDP), that run is the baseline: a speedup over 2 DDP ranks would hide what DDP costs,
    and the performance model's efficiency starts at one rank too."""
    ok = sub[(sub["model"] == model) & (sub["status"] == "ok")]
    ddp = ok[ok["ddp"].astype(bool)]
    plain = ok[~ok["ddp"].astype(bool) & (ok["world_size"] == 1)]
    plain = plain if not plain.empty else None
    base = None
    if not ddp.empty:
        first = ddp.sort_values(["world_size", "nodes"]).iloc[0]
        base = ddp[(ddp["world_size"] == first["world_size"]) & (ddp["nodes"] == first["nodes"])]
    if plain is not None and (base is None or int(base["world_size"].iloc[0]) > 1):
        base = plain
    return base, plain


def exact_at_baseline(t: pd.DataFrame, i, names: tuple[str, ...]) -> None:
    """The baseline against itself: the ratio is 1 by definition, so it has no interval (the delta
    method would give it one from the baseline's own spread, counted twice)."""
    t.at[i, "is_baseline"] = True
    for name in names:
        for sfx in ("ci_lo", "ci_hi", "dlo", "dhi"):
            if f"{name}_{sfx}" in t:
                t.at[i, f"{name}_{sfx}"] = math.nan


def baseline_target_times(sub: pd.DataFrame, model: str) -> tuple[pd.Series, bool]:
    """The DDP baseline's times to target over its repeats, and whether every repeat reached it
    (a speedup to target needs the baseline's time, not a mean of the repeats that were lucky)."""
    base, _ = baselines(sub, model)
    base_t = base["time_to_target_s"].dropna() if base is not None else pd.Series(dtype=float)
    return base_t, bool(base is not None and len(base_t) and base["target_reached"].eq(True).all())
