"""Workflow step: one look of an adaptive study (scaling/decide/sequential.py). The records of the points
measured so far -> the tables, performance model and guidelines, at the deciding level -> which
configurations get how many more repeats -> results/<study>/looks/look<k>.json:

    {"look": k, "plan": RepeatPlan, "requested": {family: repeats after this look},
     "history": [one entry per look so far: its guidelines' statuses, what it added and why,
                 the rank-hours spent], "stop": why nothing more is added, or null}
"""

import dataclasses
import statistics
import sys
from pathlib import Path

from plan import load_schema
from scaling.common.columns import clean, clean_allreduce
from scaling.common.io import read_json, step_args, write_json
from kan.contract.repeats import RepeatPlan, requested_points
from scaling.common.settings import Settings
from scaling.decide.guidelines import compute_guidelines
from scaling.decide.sequential import family_keys, plan_batch
from scaling.model.perf_model import fit_performance_model
from scaling.tables.all_tables import compute_tables
from scaling.tables.tidy import collect, read_job_wall

from kan.contract.point import Point


def costs(measurements, default_wall_s: float) -> tuple[dict[str, float], float]:
    """({family: rank-hours of one more repeat}, rank-hours spent so far): world size x job wall time
    (Snakemake's benchmark of the point's job); a family without a timed job costs the median job."""
    timed = measurements[measurements["job_wall_s"].notna()]
    median = float(timed["job_wall_s"].median()) if len(timed) else default_wall_s
    per = {}
    for fam, g in measurements.groupby("family"):
        walls = g["job_wall_s"].dropna()
        per[fam] = float(g["world_size"].iloc[0]) * (statistics.median(walls) if len(walls) else median) / 3600
    spent = float((timed["world_size"] * timed["job_wall_s"]).sum()) / 3600
    return per, spent


def look(planned: list[dict], previous: dict | None, points_dir: str, benchmarks_dir: str, running: dict,
         settings: Settings, plan: RepeatPlan, k: int) -> dict:
    requested = dict(previous["requested"]) if previous else {Point.from_json(p).family: plan.min for p in planned}
    points = requested_points(planned, requested, plan)
    walls = {p["id"]: read_job_wall(Path(benchmarks_dir) / f"{p['id']}.tsv") for p in points if p["id"] not in running}
    tidy = collect(points, {}, running, walls, points_dir=Path(points_dir))
    m = tidy["measurements"]
    tables = compute_tables(m, settings, tidy["loss_curves"], tidy["allreduce"], tidy["val_curves"])
    # the bootstrap gives the model's bands, not its decisions (the recommendation rests on point
    # predictions and the leave-one-out error): a look needs no more than the schema's minimum
    fewest = load_schema()["properties"]["report"]["properties"]["bootstrap_samples"]["minimum"]
    model = fit_performance_model(clean(m), clean_allreduce(tidy["allreduce"]),
                                  dataclasses.replace(settings, bootstrap_samples=fewest))
    guidelines = compute_guidelines(tables, settings, model)
    per_repeat, spent = costs(m, default_wall_s=30.0)
    batch = plan_batch(guidelines, family_keys(m), requested, plan, per_repeat, spent)
    after = dict(requested)
    for fam, a in batch["added"].items():
        after[fam] = requested.get(fam, plan.min) + a["more"]
    if not batch["undecided"]:
        stop = "every guideline is decided"
    elif batch["added"]:
        stop = None
    elif batch["over_budget"]:
        stop = "the budget is spent"
    elif batch["at_max"]:
        stop = "the undecided points have max repeats"
    else:
        stop = "no repeat can settle what is undecided"
    entry = {
        "look": k, "num_points": len(points), "spent_rank_hours": spent,
        "guidelines": [{"id": g["id"], "status": g["status"], "rests_on": g.get("rests_on", []),
                        **({"settle": g["settle"]} if "settle" in g else {})} for g in guidelines],
        "added": {fam: {**a, "reps": list(range(requested.get(fam, plan.min), after[fam]))}
                  for fam, a in batch["added"].items()},
        "at_max": batch["at_max"], "over_budget": batch["over_budget"], "not_by_repeats": batch["not_by_repeats"],
        "stop": stop,
    }
    history = (previous["history"] if previous else []) + [entry]
    return {"look": k, "plan": plan.to_json(), "requested": after, "history": history, "stop": stop}


def main(inp: dict, params: dict, out: dict) -> None:
    plan = RepeatPlan.from_json(params["repeats"])
    previous = read_json(inp["previous"]) if inp.get("previous") else None
    result = look(read_json(inp["planned"]), previous, inp["points_dir"], inp["benchmarks_dir"], params["running"],
                  Settings.from_thresholds(params["thresholds"]), plan, int(params["look"]))
    write_json(result, out["look"])
    e = result["history"][-1]
    added = sum(a["more"] for a in e["added"].values())
    print(f"look {e['look']}: {len(e['guidelines'])} guidelines, "
          f"{sum(g['status'] == 'advice' for g in e['guidelines'])} decided; +{added} repeats over "
          f"{len(e['added'])} configuration(s); stop: {e['stop']}", file=sys.stderr)


if __name__ == "__main__":
    main(*step_args(__doc__))
