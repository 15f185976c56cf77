"""Packing (resources.pack): points that ask Slurm for the same allocation run one after another
inside one job of that shape, so a study queues a few times instead of once per point.

A pack is a Snakemake group (common.smk gives each point its pack's id as `group:` and sets the
group's component count), so each point stays its own job with its own record, log and re-run;
the Slurm executor plugin submits a group as one sbatch. Packs are formed when the workflow is
read, from the points still to run, so a re-run packs only what is missing.

What may share an allocation (the geometry key): nodes, tasks per node, CPUs per task, memory per
node, the GPU request and the other sbatch options (a group takes its first job's string
resources, so every one of them is in the key), and whether the point waits for the rate sweep
(a tuned point depends on lr_tuning.json, which depends on the sweep's points: both in one group
would be a cycle through the group).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from kan.contract.point import LaunchSettings, Point
from kan.contract import geometry as geo  # one definition of what a point's job asks for
from kan.contract.atomic import write_text

from .schema import ConfigError

# the prefix of every pack's group id; the Slurm job's comment is rule_<group id>_measure_point
PREFIX = "kanpack"


def geometry(point: Point, launch: LaunchSettings) -> dict:
    """What the point's allocation looks like (kan/contract/geometry.py computes the same for sbatch)."""
    return {"nodes": point.placement.nodes, "tasks_per_node": geo.tasks_per_node(point),
            "cpus_per_task": geo.cpus_per_task(point, launch), "mem_mb_per_node": geo.mem_mb_per_node(point, launch),
            "gres": geo.gres(point, launch), "slurm_extra": geo.slurm_extra(point, launch),
            "after_sweep": bool(point.train.tuned)}


def shape(geom: dict) -> str:
    """A short readable name of a geometry, e.g. n2x1-gpu:1 (nodes x tasks per node, GPUs)."""
    text = f"n{geom['nodes']}x{geom['tasks_per_node']}" + (f"-{geom['gres']}" if geom["gres"] else "")
    return text + ("-tuned" if geom["after_sweep"] else "")


def _group_id(study: str, geom: dict, members: list[str]) -> str:
    """Unique per pack content: a live pack's manifest stays right while a re-run forms new packs."""
    digest = hashlib.sha1(json.dumps([study, geom, members]).encode()).hexdigest()[:10]
    # group ids become Slurm comments, log folders and file names: letters, digits and - only
    # (the comment is rule_<group id>_measure_point: no _ inside the id)
    return f"{PREFIX}-{re.sub(r'[^A-Za-z0-9-]', '', shape(geom))}-{digest}"


def form_packs(study: str, points: dict[str, Point], todo: list[str], runtimes: dict, launch: LaunchSettings,
               pack: dict, source: str = "config") -> dict[str, dict]:
    """{group id: {shape, geometry, points, runtime_min}} for the points in `todo` (plan order kept),
    at most pack.max_points each and at most pack.max_runtime_min of summed time limits."""
    by_geom: dict[str, list[str]] = {}
    geoms: dict[str, dict] = {}
    for pid in todo:
        g = geometry(points[pid], launch)
        key = json.dumps(g, sort_keys=True)
        geoms[key] = g
        by_geom.setdefault(key, []).append(pid)
    limit = pack["max_runtime_min"]
    out = {}
    for key, pids in by_geom.items():
        chunk: list[str] = []
        total = 0

        def close():
            gid = _group_id(study, geoms[key], chunk)
            out[gid] = {"shape": shape(geoms[key]), "geometry": geoms[key], "points": list(chunk),
                        "runtime_min": total}

        for pid in pids:
            minutes = runtimes[pid]["runtime_min"]
            if minutes > limit:
                raise ConfigError(f"{source}: resources.pack.max_runtime_min is {limit}, but point {pid} alone asks "
                                  f"for {minutes} min (resources.runtime_min or its estimate): raise "
                                  f"max_runtime_min to at least {minutes}, or lower the point's time limit")
            if chunk and (len(chunk) >= pack["max_points"] or total + minutes > limit):
                close()
                chunk, total = [], 0
            chunk.append(pid)
            total += minutes
        if chunk:
            close()
    return out


def write_manifests(folder: Path, packs: dict[str, dict]) -> None:
    """results/<study>/packs/<group id>.json: which points a pack's Slurm job runs (a re-run asks
    squeue for live packs and reads their points here, so it submits none of them twice)."""
    folder.mkdir(parents=True, exist_ok=True)
    for gid, pack in packs.items():
        path = folder / f"{gid}.json"
        if not path.exists():
            write_text(path, json.dumps(pack, sort_keys=True, indent=1))

