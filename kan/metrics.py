"""Step timing summaries, peak memory, provenance and the atomic JSON record (no pandas)."""

from __future__ import annotations

import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch


def summarize(times_s: Sequence[float]) -> dict | None:
    """Median, p10, p90, mean and count of per-step times (seconds); None when empty."""
    if not times_s:
        return None
    xs = sorted(times_s)

    def q(p: float) -> float:  # linear interpolation between closest ranks
        pos = p * (len(xs) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return {"median": q(0.5), "p10": q(0.1), "p90": q(0.9), "mean": statistics.fmean(xs), "n": len(xs)}


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


def git_state(cwd: str | Path = ".") -> dict:
    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha, "git_dirty": None if status is None else bool(status)}


def software_versions() -> dict:
    cuda = torch.cuda.is_available()
    nccl = None
    if cuda:
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # NCCL may be missing from a build
            nccl = None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "platform": platform.platform(),
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def rank_facts(device: torch.device) -> dict:
    """What one rank knows about itself (gathered to rank 0)."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    return {
        "hostname": socket.gethostname(),
        "device": str(device),
        "device_name": name,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_nodename": os.environ.get("SLURMD_NODENAME"),
        "slurm_procid": os.environ.get("SLURM_PROCID"),
        "slurm_localid": os.environ.get("SLURM_LOCALID"),
        "num_threads": torch.get_num_threads(),
        "pid": os.getpid(),
    }


def slurm_facts() -> dict:
    """The Slurm job this rank runs in, and what the point asked Slurm for (set by launch_slurm)."""
    keys = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_JOB_PARTITION",
            "SLURM_CLUSTER_NAME", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
            "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_NODE")
    facts = {k.lower(): os.environ[k] for k in keys if k in os.environ}
    if "KANSCALE_SLURM_REQUEST" in os.environ:
        facts["requested"] = json.loads(os.environ["KANSCALE_SLURM_REQUEST"])
    return facts


def launch_facts() -> dict:
    env_keys = [k for k in sorted(os.environ) if k.startswith(("NCCL_", "GLOO_", "TORCH_NCCL", "OMP_NUM_THREADS"))]
    return {
        "argv": [sys.executable, "-m", "kan.train", *sys.argv[1:]],
        "launch_command": os.environ.get("KANSCALE_LAUNCH_CMD"),
        "env": {k: os.environ[k] for k in env_keys},
    }


def write_json_atomic(path: str | Path, obj: dict) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a record."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
