"""The process group and the device of a rank. The rank layout comes from kan.env.dist_info
(the one module that reads the environment); everything here gets a `DistInfo`."""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import torch
import torch.distributed as dist

from .env import DistInfo


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously): before a timer is read."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pick_device(requested: str, info: DistInfo) -> torch.device:
    """`auto` = this rank's CUDA device when CUDA is usable, else CPU. Slurm may hand out GPUs
    that CUDA cannot use (our CI's fake GPUs): then `auto` falls back to CPU."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be one of auto, cpu, cuda; got {requested!r}")
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("device=cuda was requested but torch sees no usable CUDA device")
    return torch.device("cuda", info.local_rank % torch.cuda.device_count())


@contextlib.contextmanager
def process_group(info: DistInfo, device: torch.device, timeout_s: float) -> Iterator[str | None]:
    """Initialise the process group once (NCCL on CUDA, else gloo) and always destroy it.
    Yields the backend actually used. Without a launcher (`python -m kan.train`) the group is a
    one-rank group on an in-process store, so the DDP baseline needs no torchrun either."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    kwargs = {}
    if info.launcher == "srun":  # torchrun provides the store; for srun we name the rendezvous
        kwargs = {"init_method": "env://", "rank": info.rank, "world_size": info.world_size}
    elif info.launcher == "none":
        kwargs = {"store": dist.HashStore(), "rank": 0, "world_size": 1}
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    try:
        yield backend
    finally:
        dist.destroy_process_group()
