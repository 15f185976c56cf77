"""What a study sets beside its points: the limits that catch typos, and what each point's job asks
the scheduler for. Neither changes what a point measures, so neither is part of a point's id (a new
time limit or a raised limit re-runs nothing). kan/contract/point.py re-exports both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .fields import PointError, from_dict, meta, plain, validate


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Upper bounds that catch typos (a width of 10,000,000 would try a multi-GB allocation) while
    letting a real cluster go beyond them: each is a key of the config's `limits:` section."""

    max_nodes: int = field(default=1024, metadata=meta("largest nodes per point", lo=1))
    max_ranks_per_node: int = field(default=64, metadata=meta("largest gpus_per_node", lo=1))
    max_width: int = field(default=65536, metadata=meta("largest layer width", lo=1))
    max_grid_size: int = field(default=1024, metadata=meta("largest grid size", lo=1))
    max_samples: int = field(default=10**9, metadata=meta("largest data set (samples)", lo=1))
    max_epochs: int = field(default=100_000, metadata=meta("largest number of epochs", lo=1))
    max_repeats: int = field(default=1000, metadata=meta("largest number of repeats", lo=1))
    max_allreduce_bytes: int = field(default=2**34, metadata=meta("largest all-reduce buffer (bytes)", lo=4))

    def __post_init__(self) -> None:
        validate(self, "limits.", None)

    def to_json(self) -> dict:
        return plain(self)



@dataclass(frozen=True, kw_only=True)
class LaunchSettings:
    """What a point's job asks the scheduler for and how long its launcher waits; none of it changes
    what is measured, so none of it is part of a point's id (a new time limit re-runs nothing)."""

    runtime_min: int = field(default=30, metadata=meta(
        "wall-time limit of one point; the launcher records a timeout shortly before", "min", lo=1, hi=10080))
    mem_mb_per_rank: int = field(default=4000, metadata=meta("host memory per rank", "MB", lo=100))
    cpus_per_rank: int = field(default=2, metadata=meta("CPU cores per rank asked from the scheduler", lo=1))
    request_gpus: bool = field(default=True, metadata=meta(
        "on Slurm, ask for gpus_per_node GPUs per node (--gres); false on CPU-only clusters"))
    gpu_type: str = field(default="", metadata=meta("Slurm GPU type (--gres=gpu:<type>:N); empty = any"))
    exclusive: bool = field(default=True, metadata=meta(
        "on Slurm, ask for whole nodes (--exclusive) so no other job shares a point's nodes and timings"))
    warm_start: bool = field(default=True, metadata=meta(
        "locally, fork CPU trainers from a server that has imported torch (no import time per point)"))
    rdzv_join_s: int = field(default=60, metadata=meta(
        "how long torchrun agents wait for every node to join", "s", lo=5))
    rdzv_read_s: int = field(default=20, metadata=meta("rendezvous store read timeout", "s", lo=1))
    pg_timeout_s: int = field(default=120, metadata=meta("process-group (collective) timeout", "s", lo=10))

    def __post_init__(self) -> None:
        validate(self, "launch.", None)
        if not re.fullmatch(r"[A-Za-z0-9_.]*", self.gpu_type):
            raise PointError("launch.gpu_type", f"{self.gpu_type!r} must be letters, digits, _ and . only")

    def to_json(self) -> dict:
        return plain(self)

    @classmethod
    def from_json(cls, d: dict) -> LaunchSettings:
        return from_dict(cls, d, "launch")



def parse_limits(text: str) -> Limits:
    """Limits from the trainer's --limits flag: name=value pairs, comma-separated."""
    kw = {}
    for item in filter(None, text.split(",")):
        k, _, v = item.partition("=")
        kw[k] = int(v)
    return from_dict(Limits, kw, "limits")
