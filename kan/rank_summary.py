"""Rank 0's summary of a point: every rank's raw measurements folded into the record's figures
(kan/loop.py measures them, kan/train.py writes the record). The slowest rank sets the pace of a
synchronous step, so medians are taken per rank and then the max.
"""

from __future__ import annotations

from . import lr as lr_rule
from . import startup
from .contract.point import Point
from .env import DistInfo
from .loop import STARTUP_STEPS
from .probes import anatomy


def optimizer_facts(point: Point, global_batch: int) -> dict:
    """Which rate the point trained with, and by which rule (kan/lr.py)."""
    t = point.train
    return {"name": "adam", "lr": t.lr, "lr_effective": point.lr_effective, "lr_scaling": t.lr_scaling,
            "lr_reference_batch": t.lr_reference_batch or None, "global_batch": global_batch,
            "lr_warmup_samples": t.lr_warmup_samples,
            "lr_warmup_steps": lr_rule.warmup_steps(t.lr_warmup_samples, global_batch)}


def summarize_ranks(point: Point, run, info: DistInfo, per_rank: list[dict]) -> dict:
    """Rank 0 folds every rank's raw measurements into the point's figures. The slowest rank sets
    the pace of a synchronous step, so medians are taken per rank and then the max."""

    def worst(key: str) -> float | None:
        vals = [r[key]["median"] for r in per_rank if r[key]]
        return max(vals) if vals else None

    step = worst("sync")
    if step is None:
        raise ValueError(
            f"no timed step: the point ran {per_rank[0]['steps']} steps but the first "
            f"{point.train.warmup_steps} are warm-up (and partial batches are not timed); give it more samples "
            f"or epochs, or fewer warm-up steps")
    nosync = worst("nosync")
    exposed = step - nosync if nosync is not None else None
    bpr = point.train.batch_per_rank
    global_batch = bpr * info.world_size
    r0 = per_rank[0]
    train_time = max(r["train_time_s"] for r in per_rank)
    parts = startup.slowest([r["startup_parts"] for r in per_rank])
    peak = max(r["peak_mem_bytes"] for r in per_rank)
    stopped_early = r0["stop"]["reason"] == "tolerance"
    return {
        "timing": {
            "step_s": r0["sync"],  # rank 0's distribution; figures below use the max over ranks
            "nosync_step_s": r0["nosync"],
            "flat_allreduce_s": r0["flat_allreduce"],
            "step_time_s": step,
            "nosync_step_time_s": nosync,
            "per_rank_step_time_s": [r["sync"]["median"] if r["sync"] else None for r in per_rank],
            "train_time_s": train_time,
            # the one-time costs before the clock, by name, and their sum (the slowest rank's: kan/startup.py)
            "startup_s": sum(parts.values()),
            "startup_parts": parts,
            "startup_steps": STARTUP_STEPS,
            # a step-time point stopped inside its work: no epoch was timed whole (null, not a guess)
            "epoch_time_s": None if stopped_early else train_time / max(len(r0["epochs"]), 1),
            "num_steps": r0["steps"],
            "steps_per_epoch": r0["steps_per_epoch"],
            # why training ended (kan/contract/step_stop.py): tolerance (a step-time point's interval came within
            # its tolerance), cap (max_steps) or work (the whole work); the interval is the largest over ranks
            "stop": r0["stop"],
        },
        "throughput": {
            "samples_per_s": global_batch / step,
            "samples_per_s_per_rank": bpr / step,
            "samples_per_s_wall": r0["steps"] * global_batch / train_time,
        },
        "comm": {
            "exposed_s": exposed,
            "exposed_pct": 100.0 * exposed / step if exposed is not None else None,
            "method": "interleaved no_sync probe: median(synced step) - median(no_sync step), max over ranks",
            "probe_every": point.train.comm_probe_every if r0["used_ddp"] else 0,
            "injected_delay_ms": run.inject_comm_delay_ms,
            "bucket_cap_mb": point.train.bucket_cap_mb if r0["used_ddp"] else None,
            "num_buckets": r0["num_buckets"],
            # DDP's own settings (the ddp experiment) and what a rank all-reduces per synced step
            "comm_hook": point.train.comm_hook if r0["used_ddp"] else None,
            "static_graph": point.train.static_graph if r0["used_ddp"] else None,
            "gradient_as_bucket_view": point.train.gradient_as_bucket_view if r0["used_ddp"] else None,
            "nccl_algo": point.train.nccl_algo or None,
            "bytes_per_step": r0["comm_bytes_per_step"][0],
            "bytes_per_step_source": r0["comm_bytes_per_step"][1],
        },
        "memory": {
            "kind": r0["mem_kind"],
            "peak_bytes": peak,
            "peak_gib": peak / 2**30,
            "baseline_rss_bytes": min(r["baseline_rss_bytes"] for r in per_rank)
            if r0["mem_kind"] == "cpu_peak_rss" else None,
            # analytic: float32 weights + gradients + Adam's two moments
            "weights_bytes": 4 * r0["num_params"],
            "grads_bytes": 4 * r0["num_params"],
            "optimizer_bytes": 8 * r0["num_params"],
        },
        "model": {"num_params": r0["num_params"]},
        "optimizer": optimizer_facts(point, global_batch),
        "data": {**r0["data"], "val_identical": len({r["data"]["val_checksum"] for r in per_rank}) == 1},
        **({"validation": {"every_samples": point.train.eval_every_samples, "curve": r0["val_curve"],
                           "eval_time_s": max(r["eval_time_s"] for r in per_rank),
                           "method": "every rank evaluates its replica between steps, then a barrier; "
                                     "off the training clock (train_time_s excludes it)"}}
           if point.train.eval_every_samples else {}),
        "loss": {
            "final_train": r0["epochs"][-1]["train_loss"],
            "test": r0["test_loss"],
            "test_accuracy": r0["test_accuracy"],
            "epochs": r0["epochs"],
            "curve": r0["curve"],
            "every_steps": point.train.loss_every_steps,
        },
        "anatomy": anatomy.summarize([r["anatomy"] for r in per_rank], step, exposed, bool(r0.get("cuda_graphs"))),
        "kernels": r0["kernels"],
        **({"cuda_graphs": r0["cuda_graphs"]} if r0.get("cuda_graphs") else {}),
        "replicas_identical": len({r["weights_checksum"] for r in per_rank}) == 1,
        "weights_checksum": r0["weights_checksum"],
        "ranks": [r["facts"] for r in per_rank],
    }
