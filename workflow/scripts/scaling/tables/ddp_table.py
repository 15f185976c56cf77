"""The ddp experiment's table: DDP's own settings (communication hook, bucket size, static graph,
gradient-as-bucket-view, NCCL algorithm) at one placement, each against the `none` baseline (DDP's
defaults) of the same model and placement (and emulated link rate).

Per setting, over its ok repeats: step time, exposed communication, bytes a rank all-reduces per
synced step (from the hook), final training loss and time to the target loss, each with its 95% CI;
and the ratios to the baseline a deployer decides on, each with its 95% CI and its deciding interval
(dlo/dhi at the study's decision level):
    step_ratio        = step time / baseline step time
    bytes_ratio       = bytes per step / baseline bytes per step (exact: counted, no spread)
    final_loss_ratio  = final training loss / baseline final training loss
    ttt_ratio         = time to target / baseline time to target
A setting's time to target is given only when every ok repeat reached the target (as in the strong
table): a mean over the repeats that happened to reach it would be biased low.
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import DEFAULT_DDP_SETTING
from ..common.stats import summarize
from .aggregate import aggregate, ok_repeats, ratio_columns, reached_times

# the baseline of a setting: the `none` configuration at the same model, placement and link
SAME_PLACE = ["model", "nodes", "gpus_per_node", "link_mbit"]
SETTING_METRICS = ["samples_per_s", "step_time_s", "nosync_step_time_s", "exposed_comm_pct", "exposed_comm_s",
                   "bytes_per_step", "final_train_loss", "test_loss", "time_to_target_s"]
SETTING_RATIOS = ("step_ratio", "final_loss_ratio", "ttt_ratio")
# the guideline decides on these two ratios
DECIDED_RATIOS = ("final_loss_ratio", "ttt_ratio")


def hook_of(label: str) -> str:
    """The hook a setting's label starts with ('powersgd-rank2 bucket-1' -> 'powersgd'; kan/contract/point.py ddp_label)."""
    return str(label).split(" ")[0].split("-rank")[0]


def baseline_of(rows: pd.DataFrame, row) -> pd.DataFrame:
    """The ok `none` rows at the same model, placement and link as `row`."""
    same = rows["ddp_setting"] == DEFAULT_DDP_SETTING
    if "status" in rows:
        same &= rows["status"] == "ok"
    for c in SAME_PLACE:
        same &= rows[c] == row[c]
    return rows[same]


def ddp_table(df: pd.DataFrame, level: float) -> pd.DataFrame:
    """One row per DDP setting x placement of the ddp experiment (`df`: per-repeat rows with the
    target columns of target.per_repeat). Empty (with its columns) when the experiment did not run."""
    sub = df[df["experiment"] == "ddp"]
    t = aggregate(sub, SETTING_METRICS, level)
    t["comm_hook"] = [hook_of(s) for s in t["ddp_setting"]]
    t["is_baseline"] = t["ddp_setting"] == DEFAULT_DDP_SETTING
    t["target_loss"] = math.nan
    t["time_to_target_note"] = ""
    for name in SETTING_RATIOS:
        for sfx in ("", "_ci_lo", "_ci_hi") + (("_dlo", "_dhi") if name in DECIDED_RATIOS else ()):
            t[name + sfx] = math.nan
    t["bytes_ratio"] = math.nan
    t["baseline_n_ok"] = math.nan
    for i, r in t.iterrows():
        ok = ok_repeats(sub, r)
        times, note = reached_times(ok)
        t.at[i, "time_to_target_note"] = note
        if len(ok) and "target_loss" in ok and ok["target_loss"].notna().any():
            t.at[i, "target_loss"] = float(ok["target_loss"].dropna().iloc[0])
        if times is None:
            # the mean over the repeats that reached it would be biased low: no time at all
            for sfx in ("mean", "median", "std", "ci_lo", "ci_hi"):
                t.at[i, f"time_to_target_s_{sfx}"] = math.nan
        base = baseline_of(sub, r)
        t.at[i, "baseline_n_ok"] = len(base)
        if base.empty or r["ddp_setting"] == DEFAULT_DDP_SETTING:
            continue  # the baseline against itself is 1 by definition: no interval to show
        ratio_columns(t, i, "step_ratio", ok["step_time_s"], base["step_time_s"])
        ratio_columns(t, i, "final_loss_ratio", ok["final_train_loss"], base["final_train_loss"], level=level)
        base_times, _ = reached_times(base)
        if times is not None and base_times is not None:
            ratio_columns(t, i, "ttt_ratio", times, base_times, level=level)
        b0, b1 = summarize(base["bytes_per_step"])["mean"], summarize(ok["bytes_per_step"])["mean"]
        if b0 and not math.isnan(b0) and not math.isnan(b1):
            t.at[i, "bytes_ratio"] = b1 / b0
    t["_o"] = [0 if s == DEFAULT_DDP_SETTING else 1 for s in t["ddp_setting"]]
    t = t.sort_values(["model", "link_mbit", "nodes", "_o", "ddp_setting"]).drop(columns="_o")
    return t.reset_index(drop=True)
