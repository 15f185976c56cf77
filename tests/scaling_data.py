"""Hand-built measurements for the analysis tests: every column of measurements.csv, chosen values,
plus loss curves and an all-reduce sweep drawn from known models."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import yaml
from scaling.common.columns import ALLREDUCE_COLUMNS, LOSS_CURVE_COLUMNS
from scaling.common.settings import Settings
from scaling.tables.tidy import COLUMNS

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"

# columns of the point/record contract that measurements.csv gains (built in main); the analysis
# reads them when present
NEW_COLUMNS = [c for c in ("ddp", "placement_class", "contended", "contention", "exclusive") if c not in COLUMNS]


def schema_config(**report) -> dict:
    """The report section and repeats a config without them gets: the schema's defaults (what
    plan.validate_config fills in), with `report` keys overridden."""
    props = yaml.safe_load(SCHEMA.read_text())["properties"]
    defaults = {k: v["default"] for k, v in props["report"]["properties"].items()}
    unknown = sorted(set(report) - set(defaults))
    assert not unknown, f"not keys of the schema's report section: {unknown}"
    return {"report": {**defaults, **report}, "repeats": props["repeats"]["default"]}


def settings(**overrides) -> Settings:
    """The analysis's settings at the schema's defaults, with `overrides` (report keys, or the
    deciding level `decision_level`)."""
    level = {k: overrides.pop(k) for k in ("decision_level", "looks") if k in overrides}
    return dataclasses.replace(Settings.from_config(schema_config(**overrides)), **level)


def row(experiment: str, nodes: int, gpus_per_node: int, rep: int = 0, samples_per_s: float | None = 1000.0,
        status: str = "ok", reason: str | None = None, hidden_width: int = 64, batch_per_rank: int = 256,
        exposed_comm_pct: float | None = None, num_params: int | None = None, peak_mem_bytes: float | None = None,
        model: str | None = None, ddp: bool = True, num_hosts: int | None = None, mem_kind: str = "cpu_peak_rss",
        samples: int = 10000, contended: bool = False) -> dict:
    p = nodes * gpus_per_node
    widths = f"2x{hidden_width}x1"
    r = {c: None for c in COLUMNS + NEW_COLUMNS}
    r.update({
        "point_id": f"{experiment}-kanscale_bspline-{widths}-n{nodes}g{gpus_per_node}{'' if ddp else '-noddp'}-r{rep}",
        "study": "t", "ddp": ddp, "num_hosts": num_hosts if num_hosts is not None else nodes, "contended": contended,
        "contention": "another point's torchrun was running" if contended else None,
        "experiment": experiment, "impl": "kanscale", "basis": "bspline",
        "model": model or f"kan-bspline [2,{hidden_width},1]", "widths": widths, "hidden_width": hidden_width,
        "grid_size": 10, "nodes": nodes, "gpus_per_node": gpus_per_node, "world_size": p,
        "placement": f"{nodes}x{gpus_per_node}", "batch_per_rank": batch_per_rank,
        "global_batch": batch_per_rank * p, "samples": samples, "epochs": 2, "rep": rep, "status": status,
        "reason": reason,
    })
    if status == "ok":
        r.update({
            "samples_per_s": samples_per_s, "samples_per_s_per_rank": samples_per_s / p,
            "step_time_s": batch_per_rank * p / samples_per_s, "epoch_time_s": 10000 / samples_per_s,
            "exposed_comm_pct": exposed_comm_pct if exposed_comm_pct is not None else (0.0 if p == 1 else 10.0),
            "exposed_comm_s": 0.001, "nosync_step_time_s": 0.9 * batch_per_rank * p / samples_per_s,
            "num_params": num_params or hidden_width * 84 + 1,
            "peak_mem_bytes": peak_mem_bytes or 2e8 + 1e5 * hidden_width,
            "weights_bytes": 4 * (num_params or hidden_width * 84), "grads_bytes": 4 * (num_params or hidden_width * 84),
            "optimizer_bytes": 8 * (num_params or hidden_width * 84), "mem_kind": mem_kind,
            "hostnames": "vm", "device_name": "cpu", "git_sha": "abc", "git_dirty": False, "torch_version": "2.13.0",
        })
        r["peak_mem_gib"] = r["peak_mem_bytes"] / 2**30
    return r


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS + NEW_COLUMNS)


def study() -> pd.DataFrame:
    """A complete little study: strong 1/2/4 ranks (2 repeats), weak 1/2, comm intra/inter at 2,
    model size 32/128, plus one failed and one missing run."""
    rows = []
    for rep, jitter in ((0, -10.0), (1, 10.0)):
        rows.append(row("strong", 1, 1, rep, 1000 + jitter, batch_per_rank=512))
        rows.append(row("strong", 1, 2, rep, 1800 + jitter, batch_per_rank=256))
        rows.append(row("strong", 1, 4, rep, 2400 + jitter, batch_per_rank=128, exposed_comm_pct=30.0))
        rows.append(row("weak", 1, 1, rep, 900 + jitter))
        rows.append(row("weak", 1, 2, rep, 1700 + jitter))
        rows.append(row("comm", 1, 2, rep, 1700 + jitter))
        rows.append(row("comm", 2, 1, rep, 1360 + jitter, exposed_comm_pct=25.0))
        rows.append(row("model_size", 1, 1, rep, 1200 + jitter, hidden_width=32, num_params=2726, peak_mem_bytes=2.0e8))
        rows.append(row("model_size", 1, 1, rep, 500 + jitter, hidden_width=128, num_params=10790, peak_mem_bytes=2.6e8))
        rows.append(row("strong", 1, 1, rep, 1100 + jitter, batch_per_rank=512, ddp=False))
        rows.append(row("weak", 1, 1, rep, 1000 + jitter, ddp=False))
    rows.append(row("strong", 1, 4, 2, status="failed", reason="rank 1 exited with code 1 <script>alert(1)</script>"))
    rows.append(row("weak", 1, 2, 2, status="missing"))
    return frame(rows)


def loss_curves(df: pd.DataFrame, every: int = 5, num_steps: int = 60, decay_per_sample: float = 2e-4) -> pd.DataFrame:
    """One curve per ok strong point x repeat: loss = 0.01 + exp(-samples_seen * decay / sqrt(global
    batch / 256)) (a larger batch learns less per sample), an entry every `every` steps, elapsed =
    steps x the point's step time."""
    rows = []
    ok = df[(df["experiment"] == "strong") & (df["status"] == "ok")]
    for _, r in ok.iterrows():
        gb = r["global_batch"]
        for step in range(every, num_steps + 1, every):
            seen = step * gb
            rows.append({"point_id": r["point_id"], "experiment": r["experiment"], "model": r["model"],
                         "world_size": r["world_size"], "nodes": r["nodes"], "gpus_per_node": r["gpus_per_node"],
                         "placement_class": "single-rank" if r["world_size"] == 1 else "intra-node", "ddp": r["ddp"],
                         "rep": r["rep"], "step": step, "samples_seen": seen, "elapsed_s": step * r["step_time_s"],
                         "train_loss": 0.01 + math.exp(-seen * decay_per_sample / math.sqrt(gb / 256))})
    return pd.DataFrame(rows, columns=LOSS_CURVE_COLUMNS)


def allreduce_sweep(alpha: float = 2e-5, beta: float = 1e-9, topologies=((1, 2, "intra-node"), (2, 1, "inter-node")),
                    sizes=tuple(4096 * 4 ** k for k in range(6)), reps: int = 2, noise=None) -> pd.DataFrame:
    """Ring all-reduce times 2(p-1) alpha + 2(p-1)/p n beta (the inter-node link 4x slower per byte),
    times (1 + noise(rep, size)) when given."""
    rows = []
    for nodes, gpn, cls in topologies:
        p = nodes * gpn
        b = beta * (4 if cls == "inter-node" else 1)
        for rep in range(reps):
            for n in sizes:
                t = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * b
                if noise:
                    t *= 1 + noise(rep, n)
                algbw = n / t / 1e9
                rows.append({"point_id": f"allreduce-n{nodes}g{gpn}-r{rep}", "nodes": nodes, "gpus_per_node": gpn,
                             "world_size": p, "placement_class": cls, "rep": rep, "backend": "gloo", "size_bytes": n,
                             "time_s": t, "time_p10_s": 0.95 * t, "time_p90_s": 1.05 * t, "algbw_gbps": algbw,
                             "busbw_gbps": algbw * 2 * (p - 1) / p, "status": "ok"})
    return pd.DataFrame(rows, columns=ALLREDUCE_COLUMNS)
