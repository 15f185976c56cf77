"""Reading measurements.csv, loss_curves.csv and allreduce.csv into typed frames: numbers as floats,
flags as booleans, and the columns older files lack filled in from what they do have.

A CSV written by an older collector may lack `ddp` (every point was DDP then) or `placement_class`
(derived here from nodes, world size and the number of distinct hosts the ranks ran on).
"""

from __future__ import annotations

import math

import pandas as pd

from kan import startup
from kan.contract.point import TrainConfig

from kan.contract.placements import INTER, INTRA, PLACEMENTS, SIMULATED, SINGLE  # noqa: F401 (the analysis reads them here)

# several "nodes" on one host joined by an emulated link of known rate (launch/netemu.py): one class
# per rate, e.g. "emulated inter-node (one host, 100 Mbit/s link)"
EMULATED = "emulated inter-node"


def emulated_class(link_mbit: float) -> str:
    return f"{EMULATED} (one host, {float(link_mbit):g} Mbit/s link)"


def is_emulated(cls) -> bool:
    return isinstance(cls, str) and cls.startswith(EMULATED + " (")


def link_rate(cls: str) -> float:
    """The configured rate (Mbit/s) of an emulated class."""
    return float(cls.split(", ")[1].split(" Mbit/s")[0])
# classes a topology recommendation may be drawn from: two "nodes" on one host share its memory
# bus, not a network, so their timings say nothing about a real inter-node link
REAL_PLACEMENTS = (SINGLE, INTRA, INTER)
# the ddp_setting label of DDP's own defaults ("none", kan.contract.point TrainConfig.ddp_label): the ddp
# experiment judges every other setting against it, the other experiments run it
DEFAULT_DDP_SETTING = TrainConfig().ddp_label
# the records' memory kinds (kan/metrics.py): (what was measured, on which device)
CUDA_PEAK = "cuda_max_allocated"
MEM_KINDS = {"cpu_peak_rss": ("process peak RSS", "CPU"), CUDA_PEAK: ("CUDA allocator peak", None)}
GIB = 2**30
GB = 1e9  # decimal gigabytes: device memories, and the seed paper's params_per_gb


def mem_kind_label(kind: str, table: bool = False) -> str:
    """'process peak RSS, CPU' (a figure's title) or, in a table cell, 'process peak RSS (CPU)'; a
    kind not listed as it is."""
    if kind not in MEM_KINDS:
        return kind
    what, device = MEM_KINDS[kind]
    if device is None:
        return what
    return f"{what} ({device})" if table else f"{what}, {device}"

NUMERIC = [
    "nodes", "gpus_per_node", "world_size", "hidden_width", "grid_size", "spline_order", "epochs",
    "batch_per_rank", "global_batch", "samples", "lr", "lr_effective", "rep", "num_params", "step_time_s", "nosync_step_time_s",
    "exposed_comm_s", "exposed_comm_pct", "samples_per_s", "samples_per_s_per_rank", "epoch_time_s",
    "train_time_s", "peak_mem_bytes", "peak_mem_gib", "baseline_rss_bytes", "weights_bytes", "grads_bytes",
    "optimizer_bytes", "test_loss", "final_train_loss", "num_hosts", "link_mbit", "link_tcp_mbit", "link_rtt_us",
    "bytes_per_step", "step_tolerance_pct", "num_steps", "fixed_step_ms", "per_sample_us", "ops_per_step", "gpu_busy_pct",
]
LOSS_CURVE_COLUMNS = ["point_id", "experiment", "model", "world_size", "nodes", "gpus_per_node", "placement_class",
                      "ddp", "rep", "step", "samples_seen", "elapsed_s", "train_loss", "ddp_setting", "link_mbit"]
# one row per held-out evaluation (training.eval_every_samples): training time only, evaluation apart;
# the run's one-time start-up before the clock, its sum and each named part (kan/startup.py; empty
# where the part did not run or the record predates the parts)
VAL_CURVE_COLUMNS = ["point_id", "experiment", "model", "data", "world_size", "nodes", "gpus_per_node",
                     "placement_class", "ddp", "rep", "global_batch", "step", "samples_seen", "train_time_s",
                     "val_loss", "val_accuracy", "eval_time_s", "startup_s", *startup.COLUMNS]
ALLREDUCE_COLUMNS = ["point_id", "nodes", "gpus_per_node", "world_size", "placement_class", "link_mbit", "rep",
                     "backend",
                     "size_bytes", "time_s", "time_p10_s", "time_p90_s", "algbw_gbps", "busbw_gbps", "status",
                     "device_type", "num_hosts", "threads_per_rank", "host_cpus", "corun_slowdown"]


def as_bool(v, default: bool | None = None) -> bool | None:
    """A CSV flag as a bool: True/False, 1/0, "true"/"false" (any case); empty -> default."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return default
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    return default


def baseline_without_ddp(tables: list) -> bool:
    """Whether every table's baseline row (is_baseline) ran without DDP: runs imported without a
    one-rank DDP run, where tables/aggregate.baselines falls back to the plain one-rank run. Then
    "vs the DDP baseline" would be wrong wherever a ratio is named (figures, expectations, notes)."""
    rows = [t[t["is_baseline"].astype(bool)] for t in tables if t is not None and "is_baseline" in t]
    return bool(rows) and all(len(r) and not any(as_bool(v, False) for v in r["ddp"]) for r in rows)


def ddp_rows(t: pd.DataFrame | None) -> pd.DataFrame:
    """The DDP rows a figure draws, and the baseline row where it ran without DDP (a study with no DDP
    point at one rank, e.g. imported runs: tables/experiments.py baselines), so that every line
    starts from the point its ratios are taken against."""
    if t is None or t.empty:
        return pd.DataFrame()
    if "ddp" not in t:
        return t
    keep = t["ddp"].astype(bool)
    if "is_baseline" in t:
        keep |= t["is_baseline"].fillna(False).astype(bool)
    return t[keep]


def baseline_name(tables: list, base: float = 1) -> str:
    """How a ratio's baseline reads: "the DDP baseline" or "the baseline (1 rank without DDP)"."""
    if baseline_without_ddp(tables):
        return f"the baseline ({int(base)} rank{'s' if base > 1 else ''} without DDP)"
    return "the DDP baseline"


def placement_class(nodes, world_size, num_hosts, given=None, on_slurm: bool = True, link_mbit=0.0) -> str:
    """single-rank (p = 1), intra-node (one node), inter-node, emulated inter-node (several "nodes"
    on one host joined by an emulated link of rate link_mbit), or simulated inter-node when a
    multi-node point's ranks all ran on one host over loopback. A record's own count of hosts wins
    over the label a collector wrote: one host is never a real inter-node link. Without a host
    count (no ok record), a local run's several "nodes" are a simulation (torchrun agents on
    127.0.0.1)."""
    if is_emulated(given):
        return given
    if isinstance(given, str) and given in PLACEMENTS and not (given == INTER and num_hosts == 1):
        return given
    if world_size == 1:
        return SINGLE
    if nodes == 1:
        return INTRA
    if link_mbit and not (isinstance(link_mbit, float) and math.isnan(link_mbit)) and link_mbit > 0:
        return emulated_class(link_mbit)
    if num_hosts is None or (isinstance(num_hosts, float) and math.isnan(num_hosts)):
        return INTER if on_slurm else SIMULATED
    return SIMULATED if num_hosts == 1 else INTER


def model_family(model: str) -> str:
    """'kan-bspline [2,64,1]' -> 'kan-bspline': the implementation, without the widths."""
    return str(model).split("[")[0].strip()


def clean(df: pd.DataFrame) -> pd.DataFrame:
    """Numeric columns as floats, status as a plain string ('missing' where empty), `ddp` as bool
    (True where absent), `placement_class` filled in, `contended` as bool (False where absent)."""
    df = df.copy()
    for c in NUMERIC:
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    df["status"] = df["status"].fillna("missing").astype(str)
    df["reason"] = df["reason"].where(df["reason"].notna(), None) if "reason" in df else None
    df["ddp"] = [as_bool(v, True) for v in df["ddp"]] if "ddp" in df else True
    df["contended"] = [as_bool(v, False) for v in df["contended"]] if "contended" in df else False
    hosts = df["num_hosts"] if "num_hosts" in df else pd.Series(math.nan, index=df.index)
    given = df["placement_class"] if "placement_class" in df else pd.Series(None, index=df.index)
    # 0 = no emulated link (files from before the emulated cluster have no column)
    df["link_mbit"] = df["link_mbit"].fillna(0.0) if "link_mbit" in df else 0.0
    # DDP's settings (files from before the ddp experiment: DDP's defaults, "none")
    if "ddp_setting" not in df:
        df["ddp_setting"] = [DEFAULT_DDP_SETTING if d else "" for d in df["ddp"]]
    df["ddp_setting"] = df["ddp_setting"].fillna("").astype(str)
    df["placement_class"] = [placement_class(n, p, h, g, link_mbit=k) for n, p, h, g, k in
                             zip(df["nodes"], df["world_size"], hosts, given, df["link_mbit"])]
    if "grads_bytes" in df and "num_params" in df:
        # float32 gradients: 4 bytes per parameter where a record did not say
        df["grads_bytes"] = df["grads_bytes"].fillna(4 * df["num_params"])
    if "batch_per_rank" in df and "nosync_step_time_s" in df:
        # compute-only per-rank throughput: the no_sync step has no gradient all-reduce
        df["compute_samples_per_s_per_rank"] = df["batch_per_rank"] / df["nosync_step_time_s"]
    return df


def clean_curves(curves: pd.DataFrame | None) -> pd.DataFrame:
    """loss_curves.csv typed; an absent or header-only file gives an empty frame with the columns."""
    if curves is None or curves.empty:
        return pd.DataFrame(columns=LOSS_CURVE_COLUMNS)
    curves = curves.copy()
    for c in ("world_size", "nodes", "gpus_per_node", "rep", "step", "samples_seen", "elapsed_s", "train_loss"):
        if c in curves:
            curves[c] = pd.to_numeric(curves[c], errors="coerce")
    curves["ddp"] = [as_bool(v, True) for v in curves["ddp"]] if "ddp" in curves else True
    # files from before the ddp experiment and the emulated link: DDP's defaults, no link
    curves["ddp_setting"] = [v if isinstance(v, str) else "" for v in curves["ddp_setting"]] \
        if "ddp_setting" in curves else ""
    curves["link_mbit"] = pd.to_numeric(curves["link_mbit"], errors="coerce").fillna(0.0) \
        if "link_mbit" in curves else 0.0
    return curves


def clean_allreduce(ar: pd.DataFrame | None) -> pd.DataFrame:
    """allreduce.csv typed, ok rows only, placement_class filled in; empty frame when absent."""
    if ar is None or ar.empty:
        return pd.DataFrame(columns=ALLREDUCE_COLUMNS)
    ar = ar.copy()
    for c in ("nodes", "gpus_per_node", "world_size", "rep", "size_bytes", "time_s", "time_p10_s", "time_p90_s",
              "algbw_gbps", "busbw_gbps", "num_hosts", "link_mbit", "threads_per_rank", "host_cpus",
              "corun_slowdown"):
        if c in ar:
            ar[c] = pd.to_numeric(ar[c], errors="coerce")
    status = ar["status"].fillna("ok").astype(str) if "status" in ar else pd.Series("ok", index=ar.index)
    ar = ar[(status == "ok") & (ar["time_s"] > 0)].copy()
    hosts = ar["num_hosts"] if "num_hosts" in ar else pd.Series(math.nan, index=ar.index)
    given = ar["placement_class"] if "placement_class" in ar else pd.Series(None, index=ar.index)
    ar["link_mbit"] = pd.to_numeric(ar["link_mbit"], errors="coerce").fillna(0.0) if "link_mbit" in ar else 0.0
    ar["placement_class"] = [placement_class(n, p, h, g, link_mbit=k) for n, p, h, g, k in
                             zip(ar["nodes"], ar["world_size"], hosts, given, ar["link_mbit"])]
    return ar.reset_index(drop=True)


def startup_columns(parts: dict | None) -> dict:
    """A record's timing.startup_parts as the tables' startup_<part>_s columns (None where it did not run)."""
    parts = parts if isinstance(parts, dict) else {}
    return {startup.column(p): parts.get(p) for p in startup.PARTS}
