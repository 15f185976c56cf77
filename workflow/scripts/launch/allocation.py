"""A point inside its Slurm job: the job's queue facts, and its turn when the job is a pack.

A packed allocation (resources.pack, plan/packs.py) runs several points; Snakemake runs them one
after another today, but that rests on how the executor's job step starts a group (its inner
snakemake gets --jobs 1), not on a promise. So a point takes the allocation's lock before it starts
its ranks: two points of one allocation never share its nodes, whatever Snakemake does. The lock
file is also the pack's ledger: one line per point that started in it, so a point knows its
position (the first pays the queue wait and the cold start; later ones do not).

Queue wait is kept apart from run time: Slurm's submit, eligible and start times of the job come
from scontrol (the executor's job step hides SLURM_JOB_START_TIME from the rule), and the point's
own start is taken when it has its turn.
"""

from __future__ import annotations

import fcntl
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from . import slurm


def _epoch(text: str | None) -> float | None:
    """scontrol's local time (2026-12-06T02:40:00) as seconds since the epoch; None for Unknown/None."""
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


class Allocation:
    """Enter with the point's id: waits for the allocation's lock (poll, so a dead snakemake is noticed)."""

    def __init__(self, job_id: str, attempts: Path, packs: Path, point_id: str, stop=lambda: False) -> None:
        self.job_id, self.point_id, self.packs, self.stop = job_id, point_id, packs, stop
        self.path = attempts / f".allocation-{job_id}.lock"
        self.fd: int | None = None
        self.index = 0
        self.started = 0.0

    def __enter__(self) -> Allocation:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link planted in the study's folder does not redirect our writes (SECURITY.md)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if self.stop():
                    break
                time.sleep(0.2)
        with open(self.path) as f:
            self.index = sum(1 for line in f if line.strip())
        os.write(self.fd, f"{self.point_id}\n".encode())
        self.started = time.time()
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None

    def facts(self) -> dict:
        """What the record keeps of the job: its times, the queue wait, the pack and the point's turn."""
        try:
            job = slurm.job_info(self.job_id)
        except Exception as e:  # noqa: BLE001  a record without queue facts, not a failed point
            return {"job_id": self.job_id, "error": f"scontrol show job failed: {type(e).__name__}: {e}"}
        submit, eligible, start = (_epoch(job.get(k)) for k in ("SubmitTime", "EligibleTime", "StartTime"))
        gid = slurm.pack_of_comment(job.get("Comment", ""))
        manifest = slurm.read_manifest(self.packs, gid) if gid else None
        planned = len(manifest["points"]) if manifest else None
        return {"job_id": self.job_id, "submit": job.get("SubmitTime"), "eligible": job.get("EligibleTime"),
                "start": job.get("StartTime"),
                # the same instants as seconds since the epoch, read where Slurm's local time is known
                "submit_unix": submit, "start_unix": start,
                # the job's wait, Eligible -> Start (a dependency or a hold is not queueing); every
                # point of a pack carries it, only its first (pack_index 0) waited
                "queue_wait_s": round(start - (eligible or submit), 3) if start and (eligible or submit) else None,
                "pack": gid, "pack_index": self.index, "pack_points": planned,
                "point_start_utc": datetime.fromtimestamp(self.started, timezone.utc).isoformat(timespec="milliseconds"),
                # from the allocation's start to this point's turn: the points before it, plus overhead
                "offset_s": round(self.started - start, 3) if start else None}
