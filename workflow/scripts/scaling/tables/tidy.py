"""Point records -> tidy tables (every planned point appears, whatever its state).

    measurements  one row per point x repeat: the point's parameters, then what its record measured
    loss_curves   one row per loss-curve entry of every ok training record
    val_curves    one row per held-out evaluation of every ok record that has them (eval_every_samples)
    allreduce     one row per buffer size of every ok allreduce record

A point's state is its record's status (ok, failed, oom, timeout, cancelled, killed), `corrupt`
(a record that kan.contract.record rejects: empty, truncated, hand-written, another point's; the reason
says why), `missing` (no record yet) or `running` (its Slurm job from an earlier run still runs).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

from kan.contract import factory
from kan.contract import record as records
from kan.contract.point import Point, PointError
from kan.contract.data_config import DataConfig

from ..common.columns import (ALLREDUCE_COLUMNS, LOSS_CURVE_COLUMNS, VAL_CURVE_COLUMNS, placement_class,
                              startup_columns)

# every column measurements.csv has, in order; units are in the names. lr and lr_effective are named
# as in the point (training.lr, Point.lr_effective) and the record's optimizer section: the rate at
# the reference batch (a tuned point's: the sweep's choice) and the rate the point trained at
COLUMNS = [
    "point_id", "family", "study", "experiment", "impl", "basis", "model", "widths", "hidden_width", "grid_size",
    "spline_order", "nodes", "gpus_per_node", "world_size", "placement", "placement_class", "ddp",
    "batch_per_rank", "global_batch", "samples", "epochs", "step_tolerance_pct", "num_steps", "stop_reason",
    "lr", "lr_effective", "rep", "status", "reason", "backend", "device_type",
    "launcher", "num_params", "step_time_s", "step_time_p10_s", "step_time_p90_s", "nosync_step_time_s",
    "exposed_comm_s", "exposed_comm_pct", "flat_allreduce_s", "bucket_cap_mb", "num_buckets", "samples_per_s",
    "samples_per_s_per_rank", "samples_per_s_wall", "train_time_s", "epoch_time_s", "peak_mem_bytes",
    "peak_mem_gib", "mem_kind", "baseline_rss_bytes", "weights_bytes", "grads_bytes", "optimizer_bytes",
    "final_train_loss", "test_loss", "job_wall_s", "overhead_s", "replicas_identical", "num_hosts", "hostnames",
    "threads_per_rank", "host_cpus", "link_mbit", "link_tcp_mbit", "link_rtt_us",
    "ddp_setting", "comm_hook", "static_graph", "gradient_as_bucket_view", "nccl_algo", "bytes_per_step",
    "device_name", "contended", "contention", "exclusive", "git_sha", "git_dirty", "torch_version",
    "slurm_job_id", "attempt", "started", "finished_utc",
    "queue_wait_s", "slurm_submit_unix", "pack", "pack_index", "alloc_offset_s",
    # what bounds the step (kan/probes/anatomy.py): fixed and per-sample cost, operators, the largest part
    "fixed_step_ms", "per_sample_us", "ops_per_step", "gpu_busy_pct", "bound",
    # which B-spline kernels ran (kan/probes/kernel_choice.py); eager or captured (training.cuda_graphs)
    "kernel_path", "step_kind", "dispatch_clamped",
]
CURVE_COLUMNS = LOSS_CURVE_COLUMNS


def model_label(point: dict) -> str:
    if point["experiment"] == "allreduce":
        return "all_reduce"
    m = point["model"]
    # kanscale's KAN is "kan-<basis>"; the MLPs and the seed paper's pykan go by their impl name, a
    # factory by its file (no folders) or module and function
    name = f"kan-{m['basis']}" if m["impl"] == "kanscale" else factory.short_name(m["impl"])
    # data other than the default say so: two Feynman equations of one study are two models to
    # every table (which group by this label), never repeats of one
    on = f" on {DataConfig(**point['data']).label}" if "data" in point else ""
    return f"{name} [{','.join(map(str, m['widths']))}]{on}"


def last_attempt(points_dir: Path, point_id: str) -> str | None:
    """'last attempt cancelled: ...' from results/<study>/attempts/<id>/*/outcome.json, if any (a
    cancelled job's record may have been removed by Snakemake; its attempt's outcome stays)."""
    outcomes = sorted((points_dir.parent / "attempts" / point_id).glob("*/outcome.json"))
    if not outcomes:
        return None
    try:
        last = json.loads(outcomes[-1].read_text())
    except (OSError, ValueError):
        return None
    return f"last attempt {last.get('status')}: {last.get('reason') or 'no reason'}"


def read_state(path: str | Path, point_id: str) -> tuple[str, dict | None, str | None]:
    """(state, record or None, reason): the record's status, or corrupt / missing (records.state)."""
    state, got = records.state(path, point_id)
    if state == "missing":
        return "missing", None, last_attempt(Path(path).parent, point_id) or "no record yet"
    if state == "corrupt":
        return "corrupt", None, f"invalid record ({got}); the next run measures it again"
    return state, got, got.get("reason")


def read_record(path: str | Path) -> dict | None:
    """A valid record, or None (for readers that only want good data, e.g. provenance)."""
    try:
        return records.read(path)
    except records.InvalidRecord:
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


def rates(planned: Point, record: dict | None) -> dict:
    """lr and lr_effective of a row: what the trainer says it trained at (its record's optimizer
    section), else what the point it was given says (the record's point, else the planned point);
    none for an all-reduce point and for a tuned point that has not been given its rate."""
    opt = _get(record, "optimizer") or {}
    if opt.get("lr") is not None:
        return {"lr": opt["lr"], "lr_effective": opt.get("lr_effective")}
    pt = planned
    if isinstance(_get(record, "point", "train"), dict):  # the point the trainer was given
        try:
            pt = Point.from_json(record["point"])
        except PointError:  # one this version cannot read: the plan's
            pass
    if pt.allreduce is not None or pt.train.lr is None:
        return {"lr": None, "lr_effective": None}
    return {"lr": pt.train.lr, "lr_effective": pt.lr_effective}


def tidy_row(point: dict, state: str, record: dict | None, reason: str | None = None,
             job_wall_s: float | None = None) -> dict:
    """One row: the planned point's parameters (Point.to_json()), then what its record measured."""
    p, m, t = point["placement"], point.get("model") or {}, point.get("train") or {}
    world = p["nodes"] * p["gpus_per_node"]
    row = {c: None for c in COLUMNS}
    widths = m.get("widths") or []
    pt = Point.from_json(point)
    row.update({
        "point_id": point["id"], "family": pt.family, "study": point["study"],
        # DDP's own settings in a few words ("none" = DDP's defaults); one configuration per setting
        "ddp_setting": pt.train.ddp_label if pt.allreduce is None and pt.train.ddp else "",
        "comm_hook": pt.train.comm_hook if pt.allreduce is None else None,
        "static_graph": pt.train.static_graph if pt.allreduce is None else None,
        "gradient_as_bucket_view": pt.train.gradient_as_bucket_view if pt.allreduce is None else None,
        "nccl_algo": pt.train.nccl_algo if pt.allreduce is None else None,
        "experiment": point["experiment"],
        "impl": m.get("impl"), "basis": m.get("basis"),
        # an imported run keeps the name its source gives (import.model_name, a table's model column)
        "model": ((record or {}).get("source") or {}).get("model_name") or model_label(point),
        "widths": "x".join(map(str, widths)) or None, "hidden_width": widths[1] if len(widths) > 2 else None,
        "grid_size": m.get("grid_size"), "spline_order": m.get("spline_order"),
        "nodes": p["nodes"], "gpus_per_node": p["gpus_per_node"], "world_size": world,
        "placement": f"{p['nodes']}x{p['gpus_per_node']}", "ddp": t.get("ddp", True),
        "batch_per_rank": t.get("batch_per_rank"),
        "global_batch": t["batch_per_rank"] * world if t else None,
        "samples": t.get("samples"), "epochs": t.get("epochs"), "rep": point["rep"],
        # a step-time point (kan/contract/step_stop.py): the step to a tolerance, not the whole work
        "step_tolerance_pct": pt.train.step_tolerance_pct if pt.allreduce is None else None,
        "threads_per_rank": p.get("threads_per_rank", 1), "link_mbit": p.get("link_mbit") or 0.0,
        "status": state, "reason": reason, "job_wall_s": job_wall_s,
        **rates(pt, record),
    })
    rec = record or {}
    prov = rec.get("provenance") or {}
    ranks = rec.get("ranks") or []
    isolation = _get(rec, "launch", "isolation") or {}
    on_slurm = bool(_get(prov, "slurm", "slurm_job_id"))
    row["placement_class"] = placement_class(p["nodes"], world, rec.get("num_hosts"), on_slurm=on_slurm,
                                             link_mbit=row["link_mbit"])
    if record is None:
        return row
    row.update({
        "backend": rec.get("backend"), "device_type": rec.get("device_type"), "launcher": rec.get("launcher"),
        "num_params": _get(rec, "model", "num_params"),
        "step_time_s": _get(rec, "timing", "step_time_s"),
        "step_time_p10_s": _get(rec, "timing", "step_s", "p10"),
        "step_time_p90_s": _get(rec, "timing", "step_s", "p90"),
        "nosync_step_time_s": _get(rec, "timing", "nosync_step_time_s"),
        "exposed_comm_s": _get(rec, "comm", "exposed_s"),
        "exposed_comm_pct": _get(rec, "comm", "exposed_pct"),
        "flat_allreduce_s": _get(rec, "timing", "flat_allreduce_s", "median"),
        "bucket_cap_mb": _get(rec, "comm", "bucket_cap_mb"),
        "bytes_per_step": _get(rec, "comm", "bytes_per_step"),
        "num_buckets": _get(rec, "comm", "num_buckets"),
        "samples_per_s": _get(rec, "throughput", "samples_per_s"),
        "samples_per_s_per_rank": _get(rec, "throughput", "samples_per_s_per_rank"),
        "samples_per_s_wall": _get(rec, "throughput", "samples_per_s_wall"),
        "train_time_s": _get(rec, "timing", "train_time_s"),
        "epoch_time_s": _get(rec, "timing", "epoch_time_s"),
        "num_steps": _get(rec, "timing", "num_steps"),
        "stop_reason": _get(rec, "timing", "stop", "reason"),  # older records: none
        "peak_mem_bytes": _get(rec, "memory", "peak_bytes"),
        "peak_mem_gib": _get(rec, "memory", "peak_gib"),
        "mem_kind": _get(rec, "memory", "kind"),
        "baseline_rss_bytes": _get(rec, "memory", "baseline_rss_bytes"),
        "weights_bytes": _get(rec, "memory", "weights_bytes"),
        "grads_bytes": _get(rec, "memory", "grads_bytes"),
        "optimizer_bytes": _get(rec, "memory", "optimizer_bytes"),
        "final_train_loss": _get(rec, "loss", "final_train"),
        "test_loss": _get(rec, "loss", "test"),
        "replicas_identical": rec.get("replicas_identical"),
        "num_hosts": rec.get("num_hosts"),
        "hostnames": ",".join(sorted({r.get("hostname", "?") for r in ranks})) or None,
        "device_name": ",".join(sorted({str(r.get("device_name")) for r in ranks})) or None,
        # the cores a local point's ranks shared (Slurm records leave it out: the allocation says)
        "host_cpus": isolation.get("cpu_count"),
        "contended": isolation.get("contended"),
        "contention": "; ".join(isolation.get("reasons") or []) or None,
        "exclusive": isolation.get("exclusive"),
        "git_sha": prov.get("git_sha"), "git_dirty": prov.get("git_dirty"), "torch_version": prov.get("torch"),
        "slurm_job_id": _get(prov, "slurm", "slurm_job_id") or _get(rec, "launch", "slurm", "job_id"),
        "attempt": _get(rec, "launch", "attempt"),
        # the Slurm job's queue wait, kept apart from run time (launch/allocation.py): every point of
        # a packed allocation carries its job's wait; only pack_index 0 waited
        "queue_wait_s": _get(rec, "launch", "slurm", "queue_wait_s"),
        "slurm_submit_unix": _get(rec, "launch", "slurm", "submit_unix"),
        "pack": _get(rec, "launch", "slurm", "pack"), "pack_index": _get(rec, "launch", "slurm", "pack_index"),
        "alloc_offset_s": _get(rec, "launch", "slurm", "offset_s"),
        "fixed_step_ms": _get(rec, "anatomy", "fixed_step_ms"), "per_sample_us": _get(rec, "anatomy", "per_sample_us"),
        "ops_per_step": _get(rec, "anatomy", "ops_per_step"), "gpu_busy_pct": _get(rec, "anatomy", "gpu_busy_pct"),
        "bound": _get(rec, "anatomy", "bound"), "dispatch_clamped": _get(rec, "anatomy", "dispatch_clamped"),
        # which B-spline kernels ran (kan/probes/kernel_choice.py) and whether the step was one CUDA graph replay
        "kernel_path": _get(rec, "kernels", "path"), "step_kind": _get(rec, "anatomy", "step"),
        # how the ranks started: warm (forked by the warm-start server), exec (a fresh interpreter), or both
        "started": "+".join(sorted(set(_get(rec, "launch", "started") or []))) or None,
        "finished_utc": rec.get("finished_utc"),
        # the emulated link as the launcher's TCP probe saw it just before the point (launch/netemu.py)
        "link_tcp_mbit": _get(rec, "network", "measured", "tcp_rate_mbit"),
        "link_rtt_us": _get(rec, "network", "measured", "rtt_us"),
    })
    if job_wall_s is not None and row["train_time_s"] is not None:
        row["overhead_s"] = job_wall_s - row["train_time_s"]
    return row


def collect(points: list[dict], record_paths: dict[str, str], running: dict[str, str] | None = None,
            job_walls: dict[str, float | None] | None = None, points_dir: Path | None = None) -> dict[str, pd.DataFrame]:
    """The three tidy tables. `points`: every planned Point.to_json(); `record_paths`: id -> record file
    (a point without a path, or whose file is absent, is missing); `running`: id -> what runs it (a Slurm
    job, a live local attempt); `points_dir`: results/<study>/points, where a missing point's last
    attempt is looked up."""
    running, job_walls = running or {}, job_walls or {}
    rows, curves, sweeps, vals = [], [], [], []
    for point in points:
        pid = point["id"]
        if point["experiment"] == "readiness":  # a verdict, not a measurement: ddp_readiness.json
            continue
        if pid in running:
            state, rec, reason = "running", None, f"still running: {running[pid]}"
        elif pid in record_paths:
            state, rec, reason = read_state(record_paths[pid], pid)
        elif points_dir is not None:
            state, rec, reason = read_state(points_dir / f"{pid}.json", pid)
        else:
            state, rec, reason = "missing", None, "no record yet"
        row = tidy_row(point, state, rec, reason, job_walls.get(pid))
        rows.append(row)
        if state != "ok":
            continue
        if row["step_tolerance_pct"]:
            # a step-time point stopped once its step was known, not at a target: its curves would read
            # as "never reached it", and its final loss as a reference it never trained to
            continue
        keys = {c: row[c] for c in ("experiment", "model", "world_size", "nodes", "gpus_per_node",
                                    "placement_class", "ddp", "rep", "ddp_setting", "link_mbit")}
        for entry in _get(rec, "loss", "curve") or []:
            curves.append({"point_id": pid, **keys, **{k: entry.get(k) for k in
                                                       ("step", "samples_seen", "elapsed_s", "train_loss")}})
        validation = _get(rec, "validation") or {}
        for entry in validation.get("curve") or []:
            vals.append({"point_id": pid, **keys, "data": Point.from_json(point).data.label,
                         "global_batch": row["global_batch"], "eval_time_s": validation["eval_time_s"],
                         "startup_s": _get(rec, "timing", "startup_s"),
                         **startup_columns(_get(rec, "timing", "startup_parts")),
                         **{k: entry.get(k) for k in ("step", "samples_seen", "train_time_s", "val_loss",
                                                      "val_accuracy")}})
        for size in _get(rec, "allreduce", "sizes") or []:
            sweeps.append({"point_id": pid, **{c: row[c] for c in ("nodes", "gpus_per_node", "world_size",
                                                                  "placement_class", "link_mbit", "rep",
                                                                  "backend", "device_type", "num_hosts",
                                                                  "threads_per_rank", "host_cpus")},
                           **{k: size.get(k) for k in ("size_bytes", "time_s", "time_p10_s", "time_p90_s",
                                                        "algbw_gbps", "busbw_gbps")},
                           "corun_slowdown": _get(rec, "corun", "slowdown"), "status": state})
    return {"measurements": pd.DataFrame(rows, columns=COLUMNS),
            "loss_curves": pd.DataFrame(curves, columns=CURVE_COLUMNS),
            "allreduce": pd.DataFrame(sweeps, columns=ALLREDUCE_COLUMNS),
            "val_curves": pd.DataFrame(vals, columns=VAL_CURVE_COLUMNS)}
