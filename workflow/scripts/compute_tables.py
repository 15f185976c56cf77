"""Snakemake script: measurements.csv, loss_curves.csv, allreduce.csv (+ the raw records, read only)
-> the scaling tables, points.csv, allreduce_sizes.csv, fits.json and provenance.json."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.io import TABLES, read_csv, write_csv, write_json  # noqa: E402
from scaling.provenance import provenance  # noqa: E402
from scaling.tables import compute_tables  # noqa: E402
from scaling.tidy import read_record  # noqa: E402


def main(inputs: dict, records: list[str], thresholds: dict, out: dict) -> None:
    tables = compute_tables(read_csv(inputs["measurements"]), read_csv(inputs["loss_curves"]),
                            read_csv(inputs["allreduce"]), thresholds)
    for name in TABLES:
        write_csv(tables[name], out[name])
    write_json(tables["fits"], out["fits"])
    write_json(provenance([read_record(p) for p in records]), out["provenance"])
    print({name: len(tables[name]) for name in TABLES}, file=sys.stderr)


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        inp = snakemake.input  # noqa: F821
        main({k: inp[k] for k in ("measurements", "loss_curves", "allreduce")}, list(inp.records),
             snakemake.params.thresholds, dict(snakemake.output.items()))  # noqa: F821
