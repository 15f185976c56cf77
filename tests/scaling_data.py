"""Hand-built measurements for the analysis tests: every column of measurements.csv, chosen values."""

from __future__ import annotations

import pandas as pd
from scaling.tidy import COLUMNS


def row(experiment: str, nodes: int, gpus_per_node: int, rep: int = 0, samples_per_s: float | None = 1000.0,
        status: str = "ok", reason: str | None = None, hidden_width: int = 64, batch_per_rank: int = 256,
        exposed_comm_pct: float | None = None, num_params: int | None = None, peak_mem_bytes: float | None = None,
        model: str | None = None) -> dict:
    p = nodes * gpus_per_node
    widths = f"2x{hidden_width}x1"
    r = {c: None for c in COLUMNS}
    r.update({
        "point_id": f"{experiment}-kanscale_bspline-{widths}-n{nodes}g{gpus_per_node}-r{rep}", "study": "t",
        "experiment": experiment, "impl": "kanscale", "basis": "bspline",
        "model": model or f"kan-bspline [2,{hidden_width},1]", "widths": widths, "hidden_width": hidden_width,
        "grid_size": 10, "nodes": nodes, "gpus_per_node": gpus_per_node, "world_size": p,
        "placement": "inter" if nodes > 1 else "intra", "batch_per_rank": batch_per_rank,
        "global_batch": batch_per_rank * p, "samples": 10000, "epochs": 2, "rep": rep, "status": status,
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
            "optimizer_bytes": 8 * (num_params or hidden_width * 84), "mem_kind": "cpu_peak_rss",
            "hostnames": "vm", "device_name": "cpu", "git_sha": "abc", "git_dirty": False, "torch_version": "2.13.0",
        })
        r["peak_mem_gib"] = r["peak_mem_bytes"] / 2**30
    return r


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


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
    rows.append(row("strong", 1, 4, 2, status="failed", reason="rank 1 exited with code 1 <script>alert(1)</script>"))
    rows.append(row("weak", 1, 2, 2, status="missing"))
    return frame(rows)
