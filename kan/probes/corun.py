"""Co-run slowdown of CPU ranks: how much slower one rank's compute runs while the other ranks of its
host compute at the same time, measured inside the all-reduce sweep's point (same launch, same ranks,
same threads per rank) and used by the performance model (workflow/scripts/scaling/model/).

Why: ranks on one host share more than cores. On the 2-core VM a KAN step's compute at batch 128 took
1.08 ms alone and 1.76 ms beside a second rank (weak scaling, 1 thread per rank, 2 ranks on 2 cores:
no time-sharing, yet 1.6x slower: shared caches, memory bandwidth, the hypervisor's core siblings).
A model fitted to 2- and 4-rank steps without it predicts a lone rank far too slow.

Method: a fixed KAN (widths KERNEL_WIDTHS, batch KERNEL_BATCH, forward + backward) run for a fixed
time, counting iterations:
    alone     each rank in turn, the others waiting at a barrier (ranks of simulated nodes share one
              host, so the turns are global), WINDOW_S seconds each;
    together  every rank at once, after a barrier, WINDOW_S seconds.
slowdown = (iterations per second alone) / (iterations per second together), per rank; the point's
value is the median over ranks. A rate over a window, not a median iteration: ranks that time-share
a core run in scheduler slices of a few ms, longer than an iteration, so single iterations are
either full speed or a whole slice late. The time-sharing itself is in the value too (4 ranks on
2 cores: about 2x the 2-rank slowdown); the model divides it out (scaling/model/terms.py corun_curve).
Only on CPU: a GPU rank computes on its own device.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

KERNEL_WIDTHS = (8, 64, 8)
KERNEL_BATCH = 64
WINDOW_S = 0.25
WARMUP_ITERS = 5


def _kernel():
    from ..models import KAN

    torch.manual_seed(0)
    model = KAN(list(KERNEL_WIDTHS))
    x = torch.randn(KERNEL_BATCH, KERNEL_WIDTHS[0])

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
    return step


def _rate(step, window_s: float) -> float:
    """Iterations per second of `step` over at least `window_s` seconds."""
    n, t0 = 0, time.perf_counter()
    while True:
        step()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= window_s:
            return n / elapsed


def measure(rank: int, world_size: int, device: torch.device, window_s: float = WINDOW_S) -> dict | None:
    """This rank's {'alone_per_s', 'together_per_s', 'slowdown'}; None on a GPU. Every rank of the
    process group must call it (it has barriers)."""
    if device.type != "cpu":
        return None
    step = _kernel()
    for _ in range(WARMUP_ITERS):
        step()
    alone = None
    for turn in range(world_size):
        dist.barrier()
        if turn == rank:
            alone = _rate(step, window_s)
    dist.barrier()
    together = _rate(step, window_s)
    dist.barrier()
    return {"alone_per_s": alone, "together_per_s": together, "slowdown": alone / together}


def summarize(per_rank: list[dict | None]) -> dict | None:
    """The point's co-run record: the median slowdown over ranks and each rank's."""
    ranks = [r for r in per_rank if r]
    if not ranks:
        return None
    return {"slowdown": statistics.median(r["slowdown"] for r in ranks), "per_rank": [r["slowdown"] for r in ranks],
            "kernel": {"widths": list(KERNEL_WIDTHS), "batch": KERNEL_BATCH, "window_s": WINDOW_S},
            "method": "iterations per second alone (ranks in turn) / together (all at once); median over ranks"}
