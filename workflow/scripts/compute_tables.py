"""Workflow step: measurements.csv, loss_curves.csv, allreduce.csv, val_curves.csv (+ the raw records, read only)
-> the scaling tables, points.csv, allreduce_sizes.csv, fits.json and provenance.json (with the Slurm
jobs' queue wait apart from run time)."""

import sys
from pathlib import Path

from scaling.common.io import TABLES, read_csv, step_args, write_csv, write_json
from scaling.common.settings import Settings
from scaling.tables.all_tables import compute_tables
from scaling.tables import queue
from scaling.tables.provenance import provenance
from scaling.tables.tidy import read_record


def main(inputs: dict, points_dir: str, settings: Settings, out: dict) -> None:
    measurements = read_csv(inputs["measurements"])
    tables = compute_tables(measurements, settings, read_csv(inputs["loss_curves"]), read_csv(inputs["allreduce"]),
                            read_csv(inputs["val_curves"]))
    for name in TABLES:
        write_csv(tables[name], out[name])
    write_json(tables["fits"], out["fits"])
    # the records collect read: every point with a record (not missing, not still running)
    measured = measurements.loc[~measurements["status"].isin(["missing", "running"]), "point_id"] \
        if len(measurements) else []
    prov = provenance([read_record(Path(points_dir) / f"{pid}.json") for pid in measured])
    waited = queue.summary(measurements)  # Slurm jobs only: queue wait apart from run time
    if waited is not None:
        prov["queue"] = waited
    write_json(prov, out["provenance"])
    print({name: len(tables[name]) for name in TABLES}, file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(inp, inp["points_dir"], Settings.from_thresholds(params["thresholds"]), out)
