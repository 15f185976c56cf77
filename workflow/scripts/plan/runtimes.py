"""What a study costs: each point's step count and estimated minutes, from the step times of ok
records with the same model, placement and per-rank batch (this study's and plan.estimate_from's),
and the time limit each point's job asks for.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from kan.contract import record as records
from kan.contract.point import LaunchSettings, Point, PointError

from .config_keys import launch_settings

DEFAULT_OVERHEAD_S = 30.0  # start-up + teardown of a point when no measured job says otherwise
ESTIMATE_RULE = ("minutes = (steps x median synced step time of ok records with the same model, placement, "
                 "per-rank batch, device and threads + median job overhead) / 60")
# the longest time limit a point may ask for (LaunchSettings.runtime_min's bound, the schema's too)
_MAX_RUNTIME_MIN = LaunchSettings.__dataclass_fields__["runtime_min"].metadata["hi"]


def _step_key(p: Point, auto: str = "cpu") -> str:
    """What a step's time depends on (not samples or epochs). A record says the device it ran on; a
    planned point may say "auto": it runs on `auto` ("cuda" where the study requests GPUs). Threads per
    rank matter on CPUs only (a GPU rank's step does not run on its CPU threads)."""
    device = auto if p.placement.device == "auto" else p.placement.device
    threads = p.placement.threads_per_rank if device == "cpu" else None
    return json.dumps([p.model.measured(), p.train.batch_per_rank, p.train.ddp, p.placement.nodes,
                       p.placement.gpus_per_node, device, threads], sort_keys=True)


def _num_steps(p: Point) -> int:
    t, world = p.train, p.placement.world_size
    per_epoch = -(-(-(-t.samples // world)) // t.batch_per_rank)
    return min(t.epochs * per_epoch, t.max_steps) if t.max_steps else t.epochs * per_epoch


def measured_steps(folders: list[Path]) -> tuple[dict[str, list[float]], list[float]]:
    """({step key: synced step times of ok training records}, [job overhead seconds]) in `folders`
    (results/<study> folders)."""
    times: dict[str, list[float]] = {}
    overheads: list[float] = []
    for folder in folders:
        for path in sorted((folder / "points").glob("*.json")):
            try:
                rec = records.read(path, path.stem)
                pt = Point.from_json(rec["point"])
            except (records.InvalidRecord, PointError, ValueError, TypeError):
                continue
            if rec["status"] != "ok" or pt.experiment in ("allreduce", "readiness"):  # no training steps timed
                continue
            times.setdefault(_step_key(pt), []).append(rec["timing"]["step_time_s"])
            bench = folder / "benchmarks" / f"{path.stem}.tsv"
            try:
                with open(bench) as f:
                    wall = float(list(csv.DictReader(f, delimiter="\t"))[-1]["s"])
                overheads.append(wall - rec["timing"]["train_time_s"])
            except (OSError, KeyError, IndexError, ValueError):
                pass
    return times, overheads


def point_runtimes(cfg: dict, points: dict[str, Point], workdir: Path = Path(".")) -> dict[str, dict]:
    """{id: {runtime_min, source, estimated_min}}: the time limit each point's job asks for. An explicit
    resources.runtime_min wins; else with plan.derive_runtime, safety_factor x the estimate (at least
    min_runtime_min) where there is one; else LaunchSettings' default."""
    pc = cfg["plan"]
    explicit = cfg["resources"]["runtime_min"]
    default = LaunchSettings().runtime_min  # the schema's null: the trainer's own default
    folders = [workdir / "results" / cfg["study"], *(workdir / f for f in pc["estimate_from"])]
    times, overheads = measured_steps(folders)
    auto = "cuda" if launch_settings(cfg).request_gpus else "cpu"
    overhead = sorted(overheads)[len(overheads) // 2] if overheads else DEFAULT_OVERHEAD_S
    out = {}
    for pid, p in points.items():
        est = None
        ts = times.get(_step_key(p, auto)) if p.experiment != "allreduce" else None
        if ts:
            est = (_num_steps(p) * sorted(ts)[len(ts) // 2] + overhead) / 60
        if explicit is not None:
            out[pid] = {"runtime_min": explicit, "source": "resources.runtime_min", "estimated_min": est}
        elif pc["derive_runtime"] and est is not None:
            minutes = max(pc["min_runtime_min"], math.ceil(pc["safety_factor"] * est))
            out[pid] = {"runtime_min": min(minutes, _MAX_RUNTIME_MIN), "source": f"{pc['safety_factor']:g} x estimate",
                        "estimated_min": est}
        else:
            out[pid] = {"runtime_min": default, "source": "default", "estimated_min": est}
    return out
