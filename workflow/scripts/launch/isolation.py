"""What else ran where a point ran, when it started: the timings of a shared machine are not the
machine's. Locally: other kanscale ranks or torchrun agents (any study) and the load average
against the core count; on Slurm: whether the nodes are the job's alone (--exclusive) and which
other jobs squeue shows on them. A contended point is flagged in its record and in the report."""

from __future__ import annotations

import os
from pathlib import Path

from . import slurm

MARKERS = ("kan.train", "torch.distributed.run", "launch_point.py")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _ancestors(pid: int) -> set[int]:
    """pid and its ancestors (the shell snakemake started us in mentions launch_point.py too)."""
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # field 4: ppid
    return out


def other_points(own_pid: int) -> list[dict]:
    """Processes of other points on this machine (not this launcher, its ancestors or its children:
    it has none yet when this runs)."""
    out = []
    mine = _ancestors(own_pid)
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) in mine:
            continue
        cmd = _cmdline(int(entry))
        if any(m in cmd for m in MARKERS) and "pytest" not in cmd:
            out.append({"pid": int(entry), "cmd": cmd[:200]})
    return out


def local_snapshot(own_pid: int, ranks: int = 1, threads_per_rank: int = 1, cores: int | None = None) -> dict:
    """`ranks` x `threads_per_rank` threads of this point will share `cores` cores (default: this
    machine's; an emulated node's own CPU set for the ranks of one emulated node)."""
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    host_cores = os.cpu_count() or 1
    own = cores or host_cores
    others = other_points(own_pid)
    reasons = []
    if ranks * threads_per_rank > own:
        reasons.append(f"oversubscribed: {ranks} ranks x {threads_per_rank} thread{'s' if threads_per_rank != 1 else ''} on {own} cores")
    if others:
        reasons.append(f"{len(others)} other kanscale/torchrun process{'es' if len(others) != 1 else ''} ran when it started "
                       f"(pids {', '.join(str(o['pid']) for o in others[:5])})")
    if load1 is not None and load1 > host_cores:
        reasons.append(f"1-minute load average {load1:.1f} > {host_cores} cores")
    return {"contended": bool(reasons), "reasons": reasons, "loadavg_1m": load1, "cpu_count": host_cores,
            "other_processes": others[:10], "exclusive": None}


def slurm_snapshot(job_id: str, job: dict, hosts: list[str]) -> dict:
    """--exclusive shows as OverSubscribe=NO in scontrol; other jobs on the nodes from squeue."""
    exclusive = job.get("OverSubscribe") == "NO" if "OverSubscribe" in job else None
    others = [j for j in slurm.jobs_on_nodes(hosts) if j["job_id"] != job_id]
    reasons = []
    if exclusive is False:
        reasons.append("the nodes were not exclusive to the job (OverSubscribe != NO)")
    if others:
        reasons.append(f"{len(others)} other job(s) ran on the nodes: "
                       + ", ".join(f"{o['job_id']} ({o['user']})" for o in others[:5]))
    return {"contended": bool(reasons), "reasons": reasons, "exclusive": exclusive, "other_jobs": others[:10]}
