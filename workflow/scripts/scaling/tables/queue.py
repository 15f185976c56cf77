"""Queue wait kept apart from run time: a study's Slurm jobs (one per point, or packed allocations of
several) from the tidy rows' launch facts.

A packed allocation's points all carry their job's queue wait, but only the first waited: waits
are counted once per job. Run time is the points' own job walls (Snakemake's benchmark of each
point), summed. The makespan runs from the first job's submission to the last record.
"""

from __future__ import annotations

import math
from datetime import datetime

import pandas as pd

from ..common.fmt import plural


def _unix(utc: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(utc).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def summary(points: pd.DataFrame | None) -> dict | None:
    """{jobs, points, packed, queue_total_s, queue_median_s, queue_longest_s, run_total_s, makespan_s}
    of the rows with a Slurm job and a queue wait; None when there are none (a local study)."""
    if points is None or "queue_wait_s" not in points:
        return None
    rows = points[points["slurm_job_id"].notna() & points["queue_wait_s"].notna()]
    if rows.empty:
        return None
    jobs = rows.groupby(rows["slurm_job_id"].astype(str))
    waits = jobs["queue_wait_s"].first().astype(float)
    walls = pd.to_numeric(rows["job_wall_s"], errors="coerce")
    submits = pd.to_numeric(rows["slurm_submit_unix"], errors="coerce").dropna()
    ends = [t for t in (_unix(u) for u in rows["finished_utc"]) if t is not None]
    makespan = (max(ends) - submits.min()) if len(submits) and ends else math.nan
    return {"jobs": int(len(waits)), "points": int(len(rows)),
            "packed": int(rows["pack"].notna().sum()) if "pack" in rows else 0,
            "queue_total_s": float(waits.sum()), "queue_median_s": float(waits.median()),
            "queue_longest_s": float(waits.max()), "run_total_s": float(walls.sum(min_count=1)),
            "makespan_s": float(makespan)}


def duration(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "unknown"
    s = round(s)
    return f"{s // 3600} h {s % 3600 // 60} min" if s >= 3600 else f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def text(q: dict | None) -> str:
    """One sentence for the report's Method and `make status`."""
    if q is None:
        return ""
    jobs = (f"{plural(q['jobs'], 'Slurm allocation')} for {q['points']} points ({q['packed']} packed, resources.pack)"
            if q["packed"] else f"{plural(q['jobs'], 'Slurm job')}, one per point")
    span = (f"; makespan {duration(q['makespan_s'])} from the first submission to the last record"
            if math.isfinite(q["makespan_s"]) else "")
    return (f"{jobs}: queue wait {duration(q['queue_total_s'])} in all (median {duration(q['queue_median_s'])} a job, "
            f"longest {duration(q['queue_longest_s'])}), apart from run time {duration(q['run_total_s'])} summed over "
            f"the points{span}.")
