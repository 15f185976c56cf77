"""Snakemake script: measurements.csv (+ the raw records, read only) -> the scaling tables,
points.csv, fits.json and provenance.json."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pandas as pd  # noqa: E402
from scaling.io import write_csv, write_json  # noqa: E402
from scaling.provenance import provenance  # noqa: E402
from scaling.tables import compute_tables  # noqa: E402
from scaling.tidy import read_record  # noqa: E402


def main(measurements: str, records: list[str], out: dict) -> None:
    tables = compute_tables(pd.read_csv(measurements))
    for name in ("points", "strong", "weak", "comm", "model_size"):
        write_csv(tables[name], out[name])
    write_json(tables["fits"], out["fits"])
    write_json(provenance([read_record(p) for p in records]), out["provenance"])
    print({name: len(tables[name]) for name in ("points", "strong", "weak", "comm", "model_size")}, file=sys.stderr)


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        main(snakemake.input.measurements, list(snakemake.input.records), dict(snakemake.output.items()))  # noqa: F821
