"""A point's one-time costs, each by name: what `timing.startup_s` sums.

Before its training clock starts a rank pays costs that no step pays again. The record names each
part that ran, in seconds (`timing.startup_parts`, the slowest rank's: the rank whose parts sum
highest), and `timing.startup_s` is their sum. A part that did not run is absent, never 0:

    imports        torch, DDP's torch._dynamo and the trainer's modules, imported by this process
                   (kan/train.py); absent in a trainer forked from the warm server, which had them
    first_steps    kan/loop.py's STARTUP_STEPS untimed steps: numba loading its compiled kernels (the
                   JIT's cost), thread pools, first allocations, DDP's bucket rebuild
    kernel_choice  the timed choice between the Triton and the eager B-spline kernels (CUDA with
                   Triton and a cubic B-spline layer: kan/probes/kernel_choice.py); elsewhere the path is
                   looked up, not timed
    anatomy        the anatomy probe: compute-only steps at two batches, one watched step (kan/probes/anatomy.py)
    capture        training.cuda_graphs: the eager warm-up steps and the capture (kan/graphs.py)

The DDP-readiness check runs as a point of its own (experiment readiness), never inside a training
point, so it is no part here. No torch import: the workflow's tables read PARTS.
"""

from __future__ import annotations

import contextlib
from time import perf_counter

PARTS = ("imports", "first_steps", "kernel_choice", "anatomy", "capture")
LABELS = {"imports": "imports", "first_steps": "first steps (JIT)", "kernel_choice": "kernel choice",
          "anatomy": "anatomy probe", "capture": "graph warm-up + capture"}


def column(part: str) -> str:
    """A part's column in the tables: startup_<part>_s."""
    return f"startup_{part}_s"


COLUMNS = tuple(column(p) for p in PARTS)


class Clock:
    """The parts one rank paid, in the order they ran: `parts` {name: seconds}."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}

    def add(self, part: str, seconds: float | None) -> None:
        """Record a part that ran (None: it did not, and stays absent)."""
        if part not in PARTS:
            raise ValueError(f"unknown start-up part {part!r}; allowed: {', '.join(PARTS)}")
        if seconds is not None:
            self.parts[part] = self.parts.get(part, 0.0) + float(seconds)

    @contextlib.contextmanager
    def part(self, name: str):
        """Time the block as part `name` (also when it raises: the cost was paid)."""
        t0 = perf_counter()
        try:
            yield
        finally:
            self.add(name, perf_counter() - t0)

    def total(self) -> float:
        return sum(self.parts.values())


def slowest(per_rank: list[dict]) -> dict[str, float]:
    """The parts of the rank whose parts sum highest (every rank waits for it before the clock starts),
    from each rank's {name: seconds}; {} when none ran."""
    return dict(max(per_rank, key=lambda p: sum(p.values()), default={}))


def text(parts: dict[str, float], fmt=lambda v: f"{v:.3g}") -> str:
    """'imports 1.9, first steps (JIT) 0.35' in PARTS' order ('' when no part is known)."""
    return ", ".join(f"{LABELS[p]} {fmt(parts[p])}" for p in PARTS if p in parts)
