"""Step timing summaries, peak memory and provenance of a rank (no pandas)."""

from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from . import env

# git, found once when this module is imported: by a fresh trainer at its start, by the warm-start
# server (workflow/scripts/launch/warm_server.py) when it preloads this module, with its owner's PATH; a forked trainer's
# provenance never looks git up again, so nothing a request carries can choose which git runs
GIT = shutil.which("git")


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
        if GIT is None:
            return None
        try:
            out = subprocess.run([GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=10)
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
        **env.rank_env(),
        "num_threads": torch.get_num_threads(),
        "pid": os.getpid(),
    }


def launch_facts() -> dict:
    """The trainer's own command line (`python -m kan.train ...`, or the pykan driver's script)."""
    entry = ["-m", "kan.train"] if sys.argv[0].endswith(("kan/train.py", "-m")) else [sys.argv[0]]
    return {"argv": [sys.executable, *entry, *sys.argv[1:]], **env.launch_env()}
