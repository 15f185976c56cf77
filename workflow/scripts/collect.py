"""Workflow step: the planned points and their records -> results/<study>/{measurements,loss_curves,allreduce,val_curves}.csv (tidy)."""

import sys
from pathlib import Path

from scaling.common.io import read_json, step_args, write_csv
from kan.contract.repeats import RepeatPlan, requested_points
from scaling.tables.tidy import collect, read_job_wall


def main(points: list[dict], running: dict, points_dir: str, benchmarks_dir: str, out: dict) -> None:
    """Every planned point's state from its record in `points_dir` (a running one's is not read) and
    its job's wall time from Snakemake's benchmark file in `benchmarks_dir`."""
    walls = {p["id"]: read_job_wall(Path(benchmarks_dir) / f"{p['id']}.tsv") for p in points if p["id"] not in running}
    tables = collect(points, {}, running, walls, points_dir=Path(points_dir))
    for name, df in tables.items():
        write_csv(df, out[name])
    counts = tables["measurements"]["status"].value_counts().to_dict()
    print(f"{len(tables['measurements'])} points: {counts}", file=sys.stderr)


def asked_for(planned: list[dict], repeats: dict, look: str | None) -> list[dict]:
    """The points the study asks for: with adaptive repeats, the repeats the last look requested
    (`look`: its file), or the first `min` of each point before any look; else all of them."""
    plan = RepeatPlan.from_json(repeats)
    if not plan.adaptive:
        return planned
    return requested_points(planned, read_json(look)["requested"] if look else {}, plan)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    points = asked_for(read_json(inp["planned"]), params["repeats"], params["requested"])
    main(points, params["running"], inp["points_dir"], inp["benchmarks_dir"], out)
