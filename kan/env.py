"""The only module in kan/ that reads the process environment. Everything else gets values.

What the environment tells a rank: its place in the job (torchrun's RANK/WORLD_SIZE/LOCAL_RANK/
LOCAL_WORLD_SIZE, or srun's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID), the Slurm job it runs in,
the communication settings worth recording (NCCL_*, GLOO_*, TORCH_NCCL*, OMP_NUM_THREADS), the
launcher's own command line, and torch.distributed.elastic's per-rank error file. No torch import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

# who started the ranks, as a rank finds out (DistInfo.launcher; not kan.contract.point's LAUNCHERS, the two a
# point may ask for): torchrun = a torchrun agent; env = the launcher itself, with torchrun's variables
# (one node); srun = one Slurm task per rank; none = a single process without any of these
RANK_LAUNCHERS = ("torchrun", "env", "srun", "none")
SLURM_KEYS = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_JOB_PARTITION",
              "SLURM_CLUSTER_NAME", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
              "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_NODE")
RECORDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
# set by the launcher (workflow/scripts/launch/) for the trainer to record
LAUNCH_CMD = "KANSCALE_LAUNCH_CMD"
SLURM_REQUEST = "KANSCALE_SLURM_REQUEST"
# srun starts every rank with the same environment: each rank names its own error file in this folder
ERROR_DIR = "KANSCALE_ERROR_DIR"


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    num_nodes: int
    launcher: str  # torchrun | env | srun | none

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


def dist_info(launcher: str = "torchrun", env: Mapping[str, str] | None = None) -> DistInfo:
    """Rank layout. torchrun sets RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE; with launcher "srun"
    one Slurm task is one rank (the seed paper's way); with neither, a single process."""
    env = os.environ if env is None else env
    if launcher not in RANK_LAUNCHERS:
        raise ValueError(f"launcher must be one of {RANK_LAUNCHERS}, got {launcher!r}")
    if launcher == "srun":
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        local_rank = _int(env, "SLURM_LOCALID")
        num_nodes = int(env.get("SLURM_NNODES", env.get("SLURM_JOB_NUM_NODES", "1")))
        local_world = world // num_nodes
    elif launcher in ("torchrun", "env") and "RANK" in env:
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local_rank, local_world = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE")
        num_nodes = world // local_world
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    else:
        rank, world, local_rank, local_world, num_nodes = 0, 1, 0, 1, 1
        launcher = "none"
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    return DistInfo(rank, world, local_rank, local_world, num_nodes, launcher)


def rank_env() -> dict:
    """What a rank's environment says about its device and Slurm task."""
    return {
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_nodename": os.environ.get("SLURMD_NODENAME"),
        "slurm_procid": os.environ.get("SLURM_PROCID"),
        "slurm_localid": os.environ.get("SLURM_LOCALID"),
    }


def slurm_env() -> dict:
    """The Slurm job this rank runs in, and what the point asked Slurm for (set by the launcher)."""
    facts = {k.lower(): os.environ[k] for k in SLURM_KEYS if k in os.environ}
    if SLURM_REQUEST in os.environ:
        facts["requested"] = json.loads(os.environ[SLURM_REQUEST])
    return facts


def launch_env() -> dict:
    """The launcher's command line and the communication/threading settings in effect."""
    return {
        "launch_command": os.environ.get(LAUNCH_CMD),
        "env": {k: os.environ[k] for k in sorted(os.environ) if k.startswith(RECORDED_PREFIXES)},
    }


def triton_interpret() -> bool:
    """TRITON_INTERPRET=1: Triton kernels run on CPU tensors (how CPU-only CI checks them)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def error_file(rank: int | None) -> str | None:
    """Where this rank writes its exception (torch.distributed.elastic's error-file format):
    TORCHELASTIC_ERROR_FILE (set per rank by torchrun, or by our launcher for a single rank), else
    <KANSCALE_ERROR_DIR>/rank<r>.error.json, else nowhere."""
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return os.environ["TORCHELASTIC_ERROR_FILE"]
    folder = os.environ.get(ERROR_DIR)
    if not folder:
        return None
    if rank is None:
        rank = os.environ.get("SLURM_PROCID", os.environ.get("RANK", f"unknown-{os.getpid()}"))
    return os.path.join(folder, f"rank{rank}.error.json")


# how long a rank that failed may take to write its record and leave (kan/train.py's bounded exit);
# tests shorten it
FAILED_EXIT = "KANSCALE_FAILED_EXIT_S"


def failed_exit_s() -> float:
    try:
        return max(float(os.environ.get(FAILED_EXIT, "10")), 0.1)
    except ValueError:
        return 10.0
