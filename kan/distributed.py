"""The only module that reads the launcher's environment (torchrun or srun) and owns the
process group. Everything else gets a `DistInfo`."""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

LAUNCHERS = ("torchrun", "srun", "none")


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    num_nodes: int
    launcher: str  # torchrun | srun | none

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _int(env: Mapping[str, str], key: str) -> int:
    try:
        return int(env[key])
    except KeyError:
        raise ValueError(f"environment variable {key} is required by the launcher but not set") from None
    except ValueError:
        raise ValueError(f"environment variable {key} must be an integer, got {env[key]!r}") from None


def read_env(launcher: str = "torchrun", env: Mapping[str, str] | None = None) -> DistInfo:
    """Rank layout from the environment. torchrun sets RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE;
    with `launcher="srun"` one Slurm task is one rank (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID),
    the seed paper's way; with neither, a single process."""
    env = os.environ if env is None else env
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {LAUNCHERS}, got {launcher!r}")
    if launcher == "srun":
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        local_rank = _int(env, "SLURM_LOCALID")
        num_nodes = int(env.get("SLURM_NNODES", env.get("SLURM_JOB_NUM_NODES", "1")))
        local_world = world // num_nodes
    elif launcher == "torchrun" and "RANK" in env:
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local_rank, local_world = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE")
        num_nodes = world // local_world
    else:
        rank, world, local_rank, local_world, num_nodes = 0, 1, 0, 1, 1
        launcher = "none"
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    return DistInfo(rank, world, local_rank, local_world, num_nodes, launcher)


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
