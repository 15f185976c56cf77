"""Triton only where it wins: which B-spline kernels a point's steps run, and why.

On CUDA the fused Triton kernels (kan/kernels/triton_bspline.py) save memory passes, which at small sizes
cost nothing: the first GPU run measured them at 0.78x ([2,64,1] grid 10) and 0.92x ([64,256,256,1]
grid 5) of the eager kernels' throughput at batch 4096 on an H200 (BENCHMARKS.md, "First GPU run").
So they are not assumed: before the clock starts, on the point's own model, data and per-rank
batch, CHOICE_STEPS compute-only steps (DDP's no_sync) run with each path, interleaved so that a
drift of the machine falls on both alike; the path with the lower median wins (the slowest rank's
median, so that every rank takes the same path). The weights and random state are put back after,
as the start-up and the anatomy do, so no sample is trained for free. The choice holds for the
whole process (one point).

On a CPU no choice is timed: numba's fused kernels (kan/kernels/numba_bspline.py), where installed, measured
faster than eager at every size in BENCHMARKS.md's Kernels table. A model with no cubic B-spline
layer has nothing to fuse. The record's `kernels` says which path ran and why.
"""

from __future__ import annotations

import statistics
from time import perf_counter

CHOICE_STEPS = 5  # per path; at a few ms a step: well under 0.1 s a point


def fused_layers(model) -> int:
    """Layers that a fused kernel can serve (cubic B-spline KANLinear)."""
    from ..layers import KANLinear

    return sum(1 for m in model.modules()
               if isinstance(m, KANLinear) and m.basis == "bspline" and m.spline_order == 3)


def decide(triton_ms: float, eager_ms: float, batch: int, steps: int = CHOICE_STEPS) -> dict:
    """The timed choice: the faster median wins; a tie keeps eager (fewer moving parts)."""
    path = "triton" if triton_ms < eager_ms else "eager"
    ratio = eager_ms / triton_ms if triton_ms > 0 else float("inf")
    return {"path": path, "timed_ms": {"triton": triton_ms, "eager": eager_ms},
            "why": (f"timed at start-up on this device: a compute-only step at per-rank batch {batch} took "
                    f"{triton_ms:.3f} ms fused (Triton) against {eager_ms:.3f} ms eager (median of {steps}, "
                    f"slowest rank): triton is {ratio:.2f}x eager's speed, so {path} runs")}


def _untimed(model, device) -> dict:
    from ..kernels import numba_bspline, triton_bspline

    if not fused_layers(model):
        return {"path": "eager", "timed_ms": None, "why": "no cubic B-spline layer: nothing to fuse"}
    if device.type != "cuda":
        if numba_bspline.available():
            return {"path": "numba", "timed_ms": None,
                    "why": "CPU: numba's fused kernels, faster than eager at every measured size (BENCHMARKS.md, Kernels)"}
        return {"path": "eager", "timed_ms": None, "why": "CPU without numba: the eager kernels"}
    if not triton_bspline.available():
        return {"path": "eager", "timed_ms": None, "why": "CUDA without an importable triton: the eager kernels"}
    return {}


def choose(net, model, loss_fn, xb, yb, lr: float, device, ddp: bool, steps: int = CHOICE_STEPS) -> dict:
    """Time both paths where there is a choice, keep the faster for this process; the record's `kernels`."""
    import torch
    import torch.distributed as dist

    from ..kernels import triton_bspline
    from .anatomy import compute_only_step, leaves_no_trace
    from ..distributed import sync

    known = _untimed(model, device)
    if known:
        return known
    times: dict[bool, list[float]] = {True: [], False: []}
    with leaves_no_trace(model, device):
        opt = torch.optim.Adam(net.parameters(), lr=lr, fused=True)
        for _ in range(steps):
            for fused in (True, False):
                triton_bspline.set_enabled(fused)
                sync(device)
                t0 = perf_counter()
                compute_only_step(net, opt, loss_fn, xb, yb, ddp)
                sync(device)
                times[fused].append(perf_counter() - t0)
    medians = torch.tensor([statistics.median(times[True]), statistics.median(times[False])], device=device)
    if ddp and dist.is_initialized():
        dist.all_reduce(medians, op=dist.ReduceOp.MAX)  # every rank takes the same path
    choice = decide(1e3 * float(medians[0]), 1e3 * float(medians[1]), len(xb), steps)
    triton_bspline.set_enabled(choice["path"] == "triton")
    sync(device)
    return choice
