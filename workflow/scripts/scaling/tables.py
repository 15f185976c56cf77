"""measurements.csv (one row per point x repeat) -> the four scaling tables, a points-status table
and the model fits. Pure pandas; only rows with status "ok" enter the maths, every planned point
still appears (n_planned / n_ok / n_failed / n_missing and the failure reasons).

Throughput is `samples_per_s`: global samples per second from the median synced step, slowest rank.
"""

from __future__ import annotations

import math

import pandas as pd

from .stats import summarize

# a configuration = the repeats of one point; these columns identify it
GROUP = ["experiment", "model", "nodes", "gpus_per_node", "hidden_width"]
# constant within a configuration; carried along for readers
CARRY = ["world_size", "placement", "batch_per_rank", "global_batch", "samples"]
STAT_SUFFIXES = ("mean", "median", "std", "ci_lo", "ci_hi")
NUMERIC = [
    "nodes", "gpus_per_node", "world_size", "hidden_width", "batch_per_rank", "global_batch", "samples", "rep",
    "num_params", "step_time_s", "nosync_step_time_s", "exposed_comm_s", "exposed_comm_pct", "samples_per_s",
    "samples_per_s_per_rank", "epoch_time_s", "train_time_s", "peak_mem_bytes", "peak_mem_gib",
    "baseline_rss_bytes", "weights_bytes", "grads_bytes", "optimizer_bytes", "test_loss", "final_train_loss",
]
# may legitimately be negative (noise around zero); every other metric's CI is clipped at 0
SIGNED = {"exposed_comm_pct", "exposed_comm_s"}
GB = 1e9  # params per GB uses decimal gigabytes, as the seed paper's params_per_gb


def clean(df: pd.DataFrame) -> pd.DataFrame:
    """Numeric columns as floats, status as a plain string ('missing' where empty)."""
    df = df.copy()
    for c in NUMERIC:
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    df["status"] = df["status"].fillna("missing").astype(str)
    df["reason"] = df["reason"].where(df["reason"].notna(), None)
    return df


def points_status(df: pd.DataFrame) -> pd.DataFrame:
    """One row per planned point x repeat: what ran and, when it did not succeed, why."""
    cols = ["point_id", "experiment", "model", "nodes", "gpus_per_node", "world_size", "placement",
            "hidden_width", "rep", "status", "reason"]
    out = df[cols].copy()
    out["reason"] = [r if isinstance(r, str) and r else ("" if s == "ok" else ("no record" if s == "missing" else ""))
                     for r, s in zip(out["reason"], out["status"])]
    return out.sort_values(["experiment", "model", "world_size", "nodes", "hidden_width", "rep"]).reset_index(drop=True)


def aggregate(df: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """One row per configuration: counts by status and, over the ok repeats, <metric>_{mean, median,
    std, ci_lo, ci_hi}. Configurations without an ok repeat keep their row with NaN statistics."""
    rows = []
    for key, g in df.groupby(GROUP, sort=True, dropna=False):
        ok = g[g["status"] == "ok"]
        row = dict(zip(GROUP, key))
        row.update({c: g[c].iloc[0] for c in CARRY if c in g})
        row["n_planned"] = len(g)
        row["n_ok"] = len(ok)
        row["n_failed"] = int(((g["status"] != "ok") & (g["status"] != "missing")).sum())
        row["n_missing"] = int((g["status"] == "missing").sum())
        reasons = sorted({f"{s}: {r}" if isinstance(r, str) and r else s
                          for s, r in zip(g["status"], g["reason"]) if s != "ok"})
        row["not_ok"] = "; ".join(reasons)
        for m in metrics:
            st = summarize(ok[m]) if m in ok else summarize([])
            if m not in SIGNED and st["ci_lo"] < 0:  # a t interval from few noisy repeats can dip below 0
                st["ci_lo"] = 0.0
            for sfx in STAT_SUFFIXES:
                row[f"{m}_{sfx}"] = st[sfx]
        rows.append(row)
    cols = GROUP + CARRY + ["n_planned", "n_ok", "n_failed", "n_missing", "not_ok"] + [
        f"{m}_{s}" for m in metrics for s in STAT_SUFFIXES]
    return pd.DataFrame(rows, columns=cols)


def _baseline(g: pd.DataFrame) -> pd.Series | None:
    """The smallest world size with a measurement (normally 1 rank); on a tie the fewest nodes."""
    have = g[g["n_ok"] > 0].sort_values(["world_size", "nodes"])
    return None if have.empty else have.iloc[0]


def karp_flatt(speedup: float, p: float) -> float:
    """Experimentally determined serial fraction e = (1/S - 1/p) / (1 - 1/p), defined for p > 1."""
    if not p > 1 or not speedup > 0:
        return float("nan")
    return (1 / speedup - 1 / p) / (1 - 1 / p)


def strong_table(df: pd.DataFrame) -> pd.DataFrame:
    """Speedup, efficiency and Karp-Flatt per world size, against the smallest measured world size.
    The speedup CI is the throughput CI over the baseline's mean (the baseline's own spread is not
    propagated)."""
    metrics = ["samples_per_s", "samples_per_s_per_rank", "epoch_time_s", "step_time_s", "exposed_comm_pct",
               "test_loss"]
    t = aggregate(df[df["experiment"] == "strong"], metrics)
    for c in ["baseline_world_size", "speedup", "speedup_ci_lo", "speedup_ci_hi", "efficiency",
              "efficiency_pct", "karp_flatt"]:
        t[c] = math.nan
    for model, g in t.groupby("model"):
        base = _baseline(g)
        if base is None:
            continue
        b_tput, b_p = base["samples_per_s_mean"], base["world_size"]
        for i in g.index:
            p_rel = t.at[i, "world_size"] / b_p
            s = t.at[i, "samples_per_s_mean"] / b_tput
            t.at[i, "baseline_world_size"] = b_p
            t.at[i, "speedup"] = s
            t.at[i, "speedup_ci_lo"] = t.at[i, "samples_per_s_ci_lo"] / b_tput
            t.at[i, "speedup_ci_hi"] = t.at[i, "samples_per_s_ci_hi"] / b_tput
            t.at[i, "efficiency"] = s / p_rel
            t.at[i, "efficiency_pct"] = 100 * s / p_rel
            t.at[i, "karp_flatt"] = karp_flatt(s, p_rel)
    return t.sort_values(["model", "world_size", "nodes"]).reset_index(drop=True)


def weak_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per-rank throughput and weak efficiency = per-rank throughput / the baseline's per-rank
    throughput (smallest measured world size, normally 1 rank); scaled speedup = throughput ratio."""
    metrics = ["samples_per_s", "samples_per_s_per_rank", "epoch_time_s", "step_time_s", "exposed_comm_pct"]
    t = aggregate(df[df["experiment"] == "weak"], metrics)
    for c in ["baseline_world_size", "weak_efficiency", "weak_efficiency_pct", "scaled_speedup"]:
        t[c] = math.nan
    for model, g in t.groupby("model"):
        base = _baseline(g)
        if base is None:
            continue
        for i in g.index:
            eff = t.at[i, "samples_per_s_per_rank_mean"] / base["samples_per_s_per_rank_mean"]
            t.at[i, "baseline_world_size"] = base["world_size"]
            t.at[i, "weak_efficiency"] = eff
            t.at[i, "weak_efficiency_pct"] = 100 * eff
            t.at[i, "scaled_speedup"] = t.at[i, "samples_per_s_mean"] / base["samples_per_s_mean"]
    return t.sort_values(["model", "world_size", "nodes"]).reset_index(drop=True)


def comm_table(df: pd.DataFrame) -> pd.DataFrame:
    """Exposed communication by placement, and the throughput an inter-node placement loses against
    the intra-node (1 node) placement of the same world size: 100 * (intra - inter) / intra."""
    metrics = ["samples_per_s", "samples_per_s_per_rank", "exposed_comm_pct", "exposed_comm_s", "step_time_s",
               "nosync_step_time_s"]
    t = aggregate(df[df["experiment"] == "comm"], metrics)
    t["intra_samples_per_s"] = math.nan
    t["inter_vs_intra_loss_pct"] = math.nan
    for (model, p), g in t.groupby(["model", "world_size"]):
        intra = g[(g["nodes"] == 1) & (g["n_ok"] > 0)]
        if intra.empty:
            continue
        ref = intra.iloc[0]["samples_per_s_mean"]
        for i in g.index:
            if t.at[i, "nodes"] > 1:
                t.at[i, "intra_samples_per_s"] = ref
                t.at[i, "inter_vs_intra_loss_pct"] = 100 * (ref - t.at[i, "samples_per_s_mean"]) / ref
    return t.sort_values(["model", "world_size", "nodes"]).reset_index(drop=True)


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
    kinds = sub[sub["status"] == "ok"].groupby("hidden_width")["mem_kind"].first() if "mem_kind" in sub else {}
    t["mem_kind"] = [kinds.get(h) if hasattr(kinds, "get") else None for h in t["hidden_width"]]
    return t.sort_values(["hidden_width", "model"]).reset_index(drop=True)


def amdahl_fit(p: list[float], speedup: list[float]) -> float:
    """Least-squares serial fraction f of Amdahl's law S = 1 / (f + (1 - f) / p), fitted in the
    linear form 1/S - 1/p = f * (1 - 1/p) over the points with p > 1."""
    pairs = [(1 - 1 / q, 1 / s - 1 / q) for q, s in zip(p, speedup) if q > 1 and s > 0]
    den = sum(u * u for u, _ in pairs)
    return sum(u * y for u, y in pairs) / den if den else float("nan")


def gustafson_fit(p: list[float], scaled_speedup: list[float]) -> float:
    """Least-squares serial fraction a of Gustafson's law S = p - a (p - 1) over the points with p > 1."""
    pairs = [(q - 1, q - s) for q, s in zip(p, scaled_speedup) if q > 1]
    den = sum(u * u for u, _ in pairs)
    return sum(u * y for u, y in pairs) / den if den else float("nan")


def fits(strong: pd.DataFrame, weak: pd.DataFrame) -> dict:
    """Amdahl (strong) and Gustafson (weak) serial fractions per model, with the speedup they predict
    at twice and four times the largest measured world size (a model, not a measurement)."""
    out: dict = {}
    for model, g in strong.dropna(subset=["speedup"]).groupby("model"):
        rel = (g["world_size"] / g["baseline_world_size"]).tolist()
        f = amdahl_fit(rel, g["speedup"].tolist())
        pmax = max(rel)
        pred = {str(int(k * pmax)): (1 / (f + (1 - f) / (k * pmax)) if not math.isnan(f) else None) for k in (2, 4)}
        out.setdefault(model, {})["amdahl"] = {"serial_fraction": None if math.isnan(f) else f,
                                               "num_points": int(sum(q > 1 for q in rel)),
                                               "predicted_speedup": pred}
    for model, g in weak.dropna(subset=["scaled_speedup"]).groupby("model"):
        rel = (g["world_size"] / g["baseline_world_size"]).tolist()
        a = gustafson_fit(rel, g["scaled_speedup"].tolist())
        out.setdefault(model, {})["gustafson"] = {"serial_fraction": None if math.isnan(a) else a,
                                                  "num_points": int(sum(q > 1 for q in rel))}
    return out


def compute_tables(measurements: pd.DataFrame) -> dict:
    """All tables from the tidy measurements: {'points', 'strong', 'weak', 'comm', 'model_size'}
    DataFrames and 'fits' (a dict)."""
    df = clean(measurements)
    ddp = df[df["ddp"].astype(str) != "False"] if "ddp" in df else df  # non-DDP baselines: not a world size
    tables = {
        "points": points_status(df),
        "strong": strong_table(ddp),
        "weak": weak_table(ddp),
        "comm": comm_table(df),
        "model_size": model_size_table(df),
    }
    tables["fits"] = fits(tables["strong"], tables["weak"])
    return tables
