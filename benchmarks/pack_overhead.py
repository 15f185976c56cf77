"""Few allocations (resources.pack) against one Slurm job per point, on the local Slurm of
tests/slurm/slurm-local.sh: the same 12 points (6 on 1 node, 6 on 2 nodes), run once packed (at most
3 points an allocation) and once one job per point, each in a fresh copy of the workflow.

    make slurm-up && .venv/bin/python benchmarks/pack_overhead.py

Prints, per run: sbatch jobs, the study's makespan (snakemake's wall), the summed queue wait of
its jobs (each job once), and per point inside a pack the overhead from the previous point's record
to the next point's first step: the gap between the two (the job step's snakemake, the launcher)
plus the next point's own start-up (its wall minus its training loop: interpreter, imports,
process group). One job per point pays the same start-up plus a job (sbatch, queue, the job step)
per point.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import workflow_runs  # noqa: E402  the tests' way to copy the workflow and run snakemake

STUDY = "packbench"


def config(packed: bool) -> dict:
    return {"study": STUDY, "launcher": "torchrun", "device": "cpu", "cpu_threads_per_rank": 1, "repeats": 6,
            "model": {"impl": ["kanscale"], "basis": ["bspline"], "widths": [2, 16, 1], "grid_size": 5},
            "training": {"epochs": 1, "warmup_steps": 2, "comm_probe_every": 2, "max_steps": 6},
            "experiments": {"comm": {"samples": 2048, "batch_per_rank": 64,
                                     "topologies": [{"nodes": 1, "gpus_per_node": 1},
                                                    {"nodes": 2, "gpus_per_node": 1}]},
                            "allreduce": {"enabled": False}},
            "report": {"bootstrap_samples": 20},
            "resources": {"runtime_min": 2, "mem_mb_per_rank": 500, "cpus_per_rank": 1, "exclusive": True,
                          **({"pack": {"max_points": 3, "max_runtime_min": 30}} if packed else {})},
            "timeouts": {"rdzv_join_s": 20, "rdzv_read_s": 10, "pg_s": 60}}


def run(packed: bool) -> dict:
    work = Path(tempfile.mkdtemp(prefix="kanscale-packbench-"))
    try:
        workflow_runs.copy_workflow(work, extra=("kan", "tests/slurm"))
        (work / "bench.json").write_text(json.dumps(config(packed)))
        t0 = time.monotonic()
        r = workflow_runs.snakemake(work, ["bench.json"], "--nolock", targets=[f"results/{STUDY}/measurements.csv"],
                                    profile="slurm", timeout=1200)
        makespan = time.monotonic() - t0
        jobs = [ln for ln in r.out.splitlines() if "sbatch call:" in ln and "measure_point" in ln]
        recs = [json.loads(p.read_text()) for p in sorted((work / "results" / STUDY / "points").glob("*.json"))]
        return {"packed": packed, "jobs": len(jobs), "makespan_s": makespan, "records": recs}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summary(res: dict) -> None:
    recs = res["records"]
    ok = [r for r in recs if r["status"] == "ok"]
    waits = {r["launch"]["slurm"]["job_id"]: r["launch"]["slurm"]["queue_wait_s"] for r in recs}
    startup = {r["point"]["id"]: r["launch"]["wall_s"] - r["timing"]["train_time_s"] for r in ok}
    print(f"{'packed' if res['packed'] else 'one job per point'}: {len(ok)}/{len(recs)} ok, {res['jobs']} sbatch jobs, "
          f"makespan {res['makespan_s']:.0f} s, queue wait summed over jobs {sum(w or 0 for w in waits.values()):.0f} s")
    print(f"  start-up inside the point (wall - training loop): median {statistics.median(startup.values()):.2f} s")
    if not res["packed"]:
        return
    by_job: dict = {}
    for r in ok:
        by_job.setdefault(r["launch"]["slurm"]["job_id"], []).append(r)
    for nodes in (1, 2):
        overheads, gaps = [], []
        for rs in by_job.values():
            rs.sort(key=lambda r: r["launch"]["slurm"]["pack_index"])
            if rs[0]["world_size"] != nodes:
                continue
            for a, b in zip(rs, rs[1:]):
                gap = b["launch"]["slurm"]["offset_s"] - (a["launch"]["slurm"]["offset_s"] + a["launch"]["wall_s"])
                gaps.append(gap)
                overheads.append(gap + startup[b["point"]["id"]])
        if overheads:
            print(f"  {nodes} node(s): previous record -> next first step, median {statistics.median(overheads):.2f} s "
                  f"(range {min(overheads):.2f}-{max(overheads):.2f}; of it between the points "
                  f"{statistics.median(gaps):.2f} s), {len(overheads)} pairs")


def main() -> int:
    if subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0:
        print("no Slurm here: make slurm-up first", file=sys.stderr)
        return 2
    for packed in (True, False):
        summary(run(packed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
