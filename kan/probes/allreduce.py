"""The `allreduce` experiment: time torch.distributed.all_reduce of float32 buffers over a size sweep,
like nccl-tests' all_reduce_perf, on the same process group and launch path as the training points.

Per size: `warmup` untimed calls, then `iters` timed calls, each started after a barrier (otherwise
a timed collective mostly measures how late the other ranks arrive) and ended by a device sync.
A rank's time is the median of its calls; the point's time is the slowest rank's median.

    algbw = size / time                      (bytes per second through the call)
    busbw = algbw * 2 (p - 1) / p            (what each link carries in a ring all-reduce; comparable
                                              across world sizes, nccl-tests' definition)
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from . import corun
from .. import metrics
from ..contract.point import AllreduceConfig
from ..distributed import sync
from ..env import DistInfo


def sweep(cfg: AllreduceConfig, info: DistInfo, device: torch.device) -> dict:
    """This rank's per-size timing summaries (seconds), and on CPU its co-run slowdown (kan/probes/corun.py:
    a host fact the performance model needs, measured here because this point runs every multi-rank
    placement of a study with the training points' ranks and threads)."""
    shared = corun.measure(info.rank, info.world_size, device)
    out = []
    for size in cfg.sizes_bytes:
        buf = torch.ones(size // 4, dtype=torch.float32, device=device)
        for _ in range(cfg.warmup):
            dist.all_reduce(buf)
        sync(device)
        times = []
        for _ in range(cfg.iters):
            dist.barrier()
            sync(device)
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            sync(device)
            times.append(time.perf_counter() - t0)
        out.append({"size_bytes": size, "time_s": metrics.summarize(times)})
        del buf
    return {"sizes": out, "facts": metrics.rank_facts(device), "corun": shared}


def summarize_sweep(cfg: AllreduceConfig, info: DistInfo, per_rank: list[dict], backend: str) -> dict:
    """Rank 0: the slowest rank's median per size, with algbw and busbw in GB/s (1e9 bytes/s)."""
    p = info.world_size
    sizes = []
    for i, size in enumerate(cfg.sizes_bytes):
        slowest = max((r["sizes"][i]["time_s"] for r in per_rank), key=lambda s: s["median"])
        t = slowest["median"]
        algbw = size / t / 1e9 if t > 0 else None
        busbw = algbw * 2 * (p - 1) / p if algbw is not None else None
        sizes.append({"size_bytes": size, "time_s": t, "time_p10_s": slowest["p10"], "time_p90_s": slowest["p90"],
                      "algbw_gbps": algbw, "busbw_gbps": busbw, "iters": slowest["n"]})
    return {
        "allreduce": {"dtype": "float32", "iters": cfg.iters, "warmup": cfg.warmup, "backend": backend,
                      "method": "barrier, all_reduce, device sync; median per rank, slowest rank", "sizes": sizes},
        "ranks": [r["facts"] for r in per_rank],
        "corun": corun.summarize([r.get("corun") for r in per_rank]),
    }
