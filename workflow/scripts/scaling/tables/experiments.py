"""One table per experiment from the per-repeat measurements: strong and weak scaling, communication
by placement, model size, the all-reduce sweep. Pure pandas; only rows with status "ok" enter the
maths, every planned point still appears (n_planned / n_ok / n_failed / n_missing and the failure
reasons).

Throughput is `samples_per_s`: global samples per second from the median synced step, slowest rank.
Two world-1 baselines: the DDP point at the smallest DDP world size (normally 1 rank: DDP's hooks and
the 1-rank all-reduce, no network) and the non-DDP point (`ddp` False, a plain model). Efficiencies are
given against both; non-DDP points never enter the DDP fits.
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import GB, INTRA
from ..common.stats import ratio_ci, summarize
from .aggregate import (aggregate, baseline_target_times, baselines, exact_at_baseline, ok_repeats, ratio_columns,
                        reached_times)

# ratios to the DDP baseline: exactly 1 at the baseline itself (is_baseline), so without an interval
BASELINE_RATIOS = ("speedup", "efficiency", "weak_efficiency", "scaled_speedup", "time_to_target_speedup")


def karp_flatt(speedup: float, p: float) -> float:
    """Experimentally determined serial fraction e = (1/S - 1/p) / (1 - 1/p), defined for p > 1."""
    if not p > 1 or not speedup > 0:
        return float("nan")
    return (1 / speedup - 1 / p) / (1 - 1 / p)


def karp_flatt_note(e: float) -> str:
    """What a Karp-Flatt value means. Only within [0, 1] is it a serial fraction: e < 0 iff S > p
    (super-linear), e > 1 iff 1/S > 1, i.e. S < 1 (retrograde: slower than the baseline)."""
    if e is None or math.isnan(e):
        return ""
    if e < 0:
        return "super-linear (e < 0): speedup above p, not a serial fraction"
    if e > 1:
        return "retrograde (e > 1): speedup < 1, not a serial fraction"
    return ""


def _is_baseline(t: pd.DataFrame, i, base: pd.DataFrame | None) -> bool:
    """Whether row i is the baseline configuration itself (DDP, or the one-rank run without DDP where
    no DDP point ran at one rank: aggregate.baselines)."""
    if base is None or bool(t.at[i, "ddp"]) != bool(base["ddp"].iloc[0]):
        return False
    return (t.at[i, "world_size"] == base["world_size"].iloc[0]) and (t.at[i, "nodes"] == base["nodes"].iloc[0])


def _time_to_target(t: pd.DataFrame, sub: pd.DataFrame) -> None:
    """time_to_target_s (mean over repeats, only when every ok repeat with a curve reached the
    target: a mean over the repeats that happened to reach it would be biased low), its note, and
    time_to_target_speedup = DDP-baseline time / this time."""
    for c in ("target_loss", "time_to_target_s", "time_to_target_s_ci_lo", "time_to_target_s_ci_hi",
              "time_to_target_speedup", "time_to_target_speedup_ci_lo", "time_to_target_speedup_ci_hi"):
        t[c] = math.nan
    t["time_to_target_note"] = ""
    for model, g in t.groupby("model"):
        base_t, base_ok = baseline_target_times(sub, model)
        for i in g.index:
            ok = ok_repeats(sub, t.loc[i])
            times, note = reached_times(ok)
            t.at[i, "time_to_target_note"] = note
            if ok["target_reached"].notna().any():
                t.at[i, "target_loss"] = float(ok.loc[ok["target_reached"].notna(), "target_loss"].iloc[0])
            if times is None:
                continue
            st = summarize(times)
            t.at[i, "time_to_target_s"] = st["mean"]
            t.at[i, "time_to_target_s_ci_lo"] = max(st["ci_lo"], 0.0) if not math.isnan(st["ci_lo"]) else math.nan
            t.at[i, "time_to_target_s_ci_hi"] = st["ci_hi"]
            if base_ok:
                ratio_columns(t, i, "time_to_target_speedup", base_t, times)
                if t.at[i, "is_baseline"]:
                    exact_at_baseline(t, i, ("time_to_target_speedup",))


def strong_table(df: pd.DataFrame, level: float) -> pd.DataFrame:
    """Speedup, efficiency and Karp-Flatt per world size against the DDP baseline (smallest measured
    DDP world size), efficiency also against the non-DDP world-1 point. Speedup = mean throughput over
    the baseline's mean throughput, CI by the delta method (both spreads count), efficiency =
    speedup / (p / p_base) with the same relative CI."""
    metrics = ["samples_per_s", "samples_per_s_per_rank", "epoch_time_s", "step_time_s", "nosync_step_time_s",
               "exposed_comm_pct", "exposed_comm_s", "compute_samples_per_s_per_rank", "test_loss",
               "final_train_loss"]
    sub = df[df["experiment"] == "strong"]
    t = aggregate(sub, metrics, level)
    for c in ["baseline_world_size", "speedup", "speedup_ci_lo", "speedup_ci_hi", "efficiency", "efficiency_ci_lo",
              "efficiency_ci_hi", "efficiency_dlo", "efficiency_dhi", "efficiency_pct", "speedup_vs_nonddp", "speedup_vs_nonddp_ci_lo",
              "speedup_vs_nonddp_ci_hi", "efficiency_vs_nonddp", "efficiency_vs_nonddp_ci_lo",
              "efficiency_vs_nonddp_ci_hi", "karp_flatt"]:
        t[c] = math.nan
    t["karp_flatt_note"] = ""
    t["is_baseline"] = False
    for model, g in t.groupby("model"):
        base, plain = baselines(sub, model)
        for i in g.index:
            ok = ok_repeats(sub, t.loc[i])["samples_per_s"]
            p = t.at[i, "world_size"]
            if base is not None:
                b_p = float(base["world_size"].iloc[0])
                t.at[i, "baseline_world_size"] = b_p
                ratio_columns(t, i, "speedup", ok, base["samples_per_s"])
                ratio_columns(t, i, "efficiency", ok, base["samples_per_s"], b_p / p, level)
                t.at[i, "efficiency_pct"] = 100 * t.at[i, "efficiency"]
                if bool(t.at[i, "ddp"]):
                    e = karp_flatt(t.at[i, "speedup"], p / b_p)
                    t.at[i, "karp_flatt"] = e
                    t.at[i, "karp_flatt_note"] = karp_flatt_note(e)
                if _is_baseline(t, i, base):
                    exact_at_baseline(t, i, ("speedup", "efficiency"))
            if plain is not None:
                ratio_columns(t, i, "speedup_vs_nonddp", ok, plain["samples_per_s"])
                ratio_columns(t, i, "efficiency_vs_nonddp", ok, plain["samples_per_s"], 1 / p)
    _time_to_target(t, sub)
    return t.sort_values(["model", "world_size", "nodes", "ddp"]).reset_index(drop=True)


def weak_table(df: pd.DataFrame, level: float) -> pd.DataFrame:
    """Per-rank throughput and weak efficiency = per-rank throughput / the baseline's per-rank
    throughput, against the DDP baseline and the non-DDP world-1 point; scaled speedup = throughput
    ratio to the DDP baseline."""
    metrics = ["samples_per_s", "samples_per_s_per_rank", "epoch_time_s", "step_time_s", "nosync_step_time_s",
               "exposed_comm_pct", "exposed_comm_s", "compute_samples_per_s_per_rank"]
    sub = df[df["experiment"] == "weak"]
    t = aggregate(sub, metrics, level)
    for c in ["baseline_world_size", "weak_efficiency", "weak_efficiency_ci_lo", "weak_efficiency_ci_hi",
              "weak_efficiency_pct", "weak_efficiency_vs_nonddp", "weak_efficiency_vs_nonddp_ci_lo",
              "weak_efficiency_vs_nonddp_ci_hi", "scaled_speedup", "scaled_speedup_ci_lo", "scaled_speedup_ci_hi"]:
        t[c] = math.nan
    t["is_baseline"] = False
    for model, g in t.groupby("model"):
        base, plain = baselines(sub, model)
        for i in g.index:
            ok = ok_repeats(sub, t.loc[i])
            if base is not None:
                t.at[i, "baseline_world_size"] = base["world_size"].iloc[0]
                ratio_columns(t, i, "weak_efficiency", ok["samples_per_s_per_rank"], base["samples_per_s_per_rank"])
                t.at[i, "weak_efficiency_pct"] = 100 * t.at[i, "weak_efficiency"]
                ratio_columns(t, i, "scaled_speedup", ok["samples_per_s"], base["samples_per_s"])
                if _is_baseline(t, i, base):
                    exact_at_baseline(t, i, ("weak_efficiency", "scaled_speedup"))
            if plain is not None:
                ratio_columns(t, i, "weak_efficiency_vs_nonddp", ok["samples_per_s_per_rank"],
                               plain["samples_per_s_per_rank"])
    return t.sort_values(["model", "world_size", "nodes", "ddp"]).reset_index(drop=True)


def comm_table(df: pd.DataFrame, level: float) -> pd.DataFrame:
    """Exposed communication by placement, and the throughput a multi-node placement loses against
    the intra-node (1 node) placement of the same world size: 100 * (1 - inter / intra), CI from the
    throughput ratio's delta-method CI."""
    metrics = ["samples_per_s", "samples_per_s_per_rank", "exposed_comm_pct", "exposed_comm_s", "step_time_s",
               "nosync_step_time_s"]
    sub = df[df["experiment"] == "comm"]
    t = aggregate(sub, metrics, level)
    for c in ("intra_samples_per_s", "inter_vs_intra_loss_pct", "inter_vs_intra_loss_pct_ci_lo",
              "inter_vs_intra_loss_pct_ci_hi", "inter_vs_intra_loss_pct_dlo", "inter_vs_intra_loss_pct_dhi",
              "intra_n_ok"):
        t[c] = math.nan
    for _, g in t.groupby(["model", "world_size"]):
        intra = g[(g["placement_class"] == INTRA) & (g["n_ok"] > 0) & g["ddp"].astype(bool)]
        if intra.empty:
            continue
        ref = ok_repeats(sub, intra.iloc[0])["samples_per_s"]
        for i in g.index:
            if t.at[i, "nodes"] > 1 and bool(t.at[i, "ddp"]):
                mine = ok_repeats(sub, t.loc[i])["samples_per_s"]
                r, d = ratio_ci(mine, ref), ratio_ci(mine, ref, level)
                t.at[i, "intra_samples_per_s"] = float(ref.mean())
                t.at[i, "intra_n_ok"] = len(ref)
                t.at[i, "inter_vs_intra_loss_pct"] = 100 * (1 - r["ratio"])
                # the loss falls as the ratio rises: the CI's ends swap
                t.at[i, "inter_vs_intra_loss_pct_ci_lo"] = 100 * (1 - r["ci_hi"])
                t.at[i, "inter_vs_intra_loss_pct_ci_hi"] = 100 * (1 - r["ci_lo"])
                t.at[i, "inter_vs_intra_loss_pct_dlo"] = 100 * (1 - d["ci_hi"])
                t.at[i, "inter_vs_intra_loss_pct_dhi"] = 100 * (1 - d["ci_lo"])
    return t.sort_values(["model", "world_size", "nodes", "ddp"]).reset_index(drop=True)


def model_size_table(df: pd.DataFrame) -> pd.DataFrame:
    """Parameters vs memory and speed over the hidden-width sweep. On CPU the peak is the process's
    peak RSS (mem_kind cpu_peak_rss, includes the runtime's fixed ~0.2 GiB), on CUDA the allocator peak."""
    sub = df[df["experiment"] == "model_size"].copy()
    sub["model_state_bytes"] = sub["weights_bytes"] + sub["grads_bytes"] + sub["optimizer_bytes"]
    metrics = ["num_params", "peak_mem_gib", "peak_mem_bytes", "samples_per_s", "samples_per_s_per_rank",
               "weights_bytes", "grads_bytes", "optimizer_bytes", "model_state_bytes", "step_time_s"]
    t = aggregate(sub, metrics)
    t["num_params"] = t["num_params_median"]
    t["params_per_gb"] = t["num_params"] / (t["peak_mem_bytes_mean"] / GB)
    t["samples_per_s_per_rank_per_param"] = t["samples_per_s_per_rank_mean"] / t["num_params"]
    ok = sub[sub["status"] == "ok"]
    kinds = ok.groupby("hidden_width")["mem_kind"].first().to_dict() if "mem_kind" in ok and len(ok) else {}
    t["mem_kind"] = [kinds.get(h) for h in t["hidden_width"]]
    return t.sort_values(["hidden_width", "model"]).reset_index(drop=True)


def allreduce_table(ar: pd.DataFrame) -> pd.DataFrame:
    """The all-reduce sweep per topology and buffer size over its ok repeats: time (mean, 95% CI),
    algbw = size / time and busbw = algbw * 2 (p - 1) / p (the bytes each rank's link carries in a
    ring all-reduce, comparable across p)."""
    keys = ["placement_class", "nodes", "gpus_per_node", "world_size", "size_bytes"]
    cols = keys + ["n_ok", "time_s_mean", "time_s_ci_lo", "time_s_ci_hi", "algbw_gbps", "busbw_gbps"]
    if ar.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in ar.groupby(keys, sort=True):
        st = summarize(g["time_s"])
        p = key[3]
        algbw = key[4] / st["mean"] / 1e9
        rows.append(dict(zip(keys, key), n_ok=st["n"], time_s_mean=st["mean"],
                         time_s_ci_lo=max(st["ci_lo"], 0.0) if not math.isnan(st["ci_lo"]) else math.nan,
                         time_s_ci_hi=st["ci_hi"], algbw_gbps=algbw, busbw_gbps=algbw * 2 * (p - 1) / p))
    return pd.DataFrame(rows, columns=cols)
