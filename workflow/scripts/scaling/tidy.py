"""Point records -> one tidy row per point x repeat (missing and failed points included)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

# every column measurements.csv has, in order; units are in the names
COLUMNS = [
    "point_id", "study", "experiment", "impl", "basis", "model", "widths", "hidden_width", "grid_size",
    "nodes", "gpus_per_node", "world_size", "placement", "batch_per_rank", "global_batch", "samples",
    "epochs", "rep", "status", "reason", "backend", "device_type", "launcher", "num_params",
    "step_time_s", "step_time_p10_s", "step_time_p90_s", "nosync_step_time_s", "exposed_comm_s",
    "exposed_comm_pct", "flat_allreduce_s", "samples_per_s", "samples_per_s_per_rank", "samples_per_s_wall",
    "train_time_s", "epoch_time_s", "peak_mem_bytes", "peak_mem_gib", "mem_kind", "baseline_rss_bytes",
    "weights_bytes", "grads_bytes", "optimizer_bytes", "final_train_loss", "test_loss", "job_wall_s",
    "overhead_s", "replicas_identical", "num_hosts", "hostnames", "device_name", "git_sha", "git_dirty",
    "torch_version", "slurm_job_id", "finished_utc",
]


def model_label(point: dict) -> str:
    name = point["impl"] if point["impl"].startswith("mlp") else f"kan-{point['basis']}"
    return f"{name} [{','.join(map(str, point['widths']))}]"


def read_record(path: str | Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def read_job_wall(path: str | Path) -> float | None:
    """Wall seconds of a job from Snakemake's benchmark TSV (column `s`)."""
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        return float(rows[-1]["s"]) if rows else None
    except (OSError, KeyError, ValueError):
        return None


def _get(d: dict | None, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def tidy_row(point: dict, record: dict | None, job_wall_s: float | None = None) -> dict:
    """One row: the planned point's parameters, then what its record measured (or status missing)."""
    row = {c: None for c in COLUMNS}
    row.update({
        "point_id": point["id"], "study": point["study"], "experiment": point["experiment"],
        "impl": point["impl"], "basis": point["basis"], "model": model_label(point),
        "widths": "x".join(map(str, point["widths"])), "hidden_width": point["hidden_width"],
        "grid_size": point["grid_size"], "nodes": point["nodes"], "gpus_per_node": point["gpus_per_node"],
        "world_size": point["world_size"], "placement": "inter" if point["nodes"] > 1 else "intra",
        "batch_per_rank": point["batch_per_rank"], "global_batch": point["global_batch"],
        "samples": point["samples"], "epochs": point["epochs"], "rep": point["rep"],
        "status": "missing", "job_wall_s": job_wall_s,
    })
    if record is None:
        return row
    prov = record.get("provenance") or {}
    ranks = record.get("ranks") or []
    row.update({
        "status": record.get("status"), "reason": record.get("reason"), "backend": record.get("backend"),
        "device_type": record.get("device_type"), "launcher": record.get("launcher"),
        "num_params": _get(record, "model", "num_params"),
        "step_time_s": _get(record, "timing", "step_time_s"),
        "step_time_p10_s": _get(record, "timing", "step_s", "p10"),
        "step_time_p90_s": _get(record, "timing", "step_s", "p90"),
        "nosync_step_time_s": _get(record, "timing", "nosync_step_time_s"),
        "exposed_comm_s": _get(record, "comm", "exposed_s"),
        "exposed_comm_pct": _get(record, "comm", "exposed_pct"),
        "flat_allreduce_s": _get(record, "timing", "flat_allreduce_s", "median"),
        "samples_per_s": _get(record, "throughput", "samples_per_s"),
        "samples_per_s_per_rank": _get(record, "throughput", "samples_per_s_per_rank"),
        "samples_per_s_wall": _get(record, "throughput", "samples_per_s_wall"),
        "train_time_s": _get(record, "timing", "train_time_s"),
        "epoch_time_s": _get(record, "timing", "epoch_time_s"),
        "peak_mem_bytes": _get(record, "memory", "peak_bytes"),
        "peak_mem_gib": _get(record, "memory", "peak_gib"),
        "mem_kind": _get(record, "memory", "kind"),
        "baseline_rss_bytes": _get(record, "memory", "baseline_rss_bytes"),
        "weights_bytes": _get(record, "memory", "weights_bytes"),
        "grads_bytes": _get(record, "memory", "grads_bytes"),
        "optimizer_bytes": _get(record, "memory", "optimizer_bytes"),
        "final_train_loss": _get(record, "loss", "final_train"),
        "test_loss": _get(record, "loss", "test"),
        "replicas_identical": record.get("replicas_identical"),
        "num_hosts": record.get("num_hosts"),
        "hostnames": ",".join(sorted({r.get("hostname", "?") for r in ranks})) or None,
        "device_name": ",".join(sorted({str(r.get("device_name")) for r in ranks})) or None,
        "git_sha": prov.get("git_sha"), "git_dirty": prov.get("git_dirty"), "torch_version": prov.get("torch"),
        "slurm_job_id": _get(prov, "slurm", "slurm_job_id"), "finished_utc": record.get("finished_utc"),
    })
    if job_wall_s is not None and row["train_time_s"] is not None:
        row["overhead_s"] = job_wall_s - row["train_time_s"]
    return row


def tidy(points: list[dict], records: dict[str, dict | None], job_walls: dict[str, float | None] | None = None) -> pd.DataFrame:
    job_walls = job_walls or {}
    rows = [tidy_row(p, records.get(p["id"]), job_walls.get(p["id"])) for p in points]
    return pd.DataFrame(rows, columns=COLUMNS)
