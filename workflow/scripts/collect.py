"""Snakemake script: point records -> results/<study>/measurements.csv (tidy)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.tidy import read_job_wall, read_record, tidy  # noqa: E402


def collect(points: list[dict], record_paths: list[str], benchmark_paths: list[str], out: str) -> None:
    by_id = {p["id"]: p for p in points}
    records = {pid: read_record(path) for pid, path in zip(by_id, record_paths)}
    walls = {pid: read_job_wall(path) for pid, path in zip(by_id, benchmark_paths)}
    df = tidy(points, records, walls)
    tmp = Path(out).with_suffix(".csv.tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(out)
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} points: {counts}", file=sys.stderr)


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        collect(snakemake.params.points, list(snakemake.input.records), list(snakemake.input.benchmarks),  # noqa: F821
                snakemake.output[0])  # noqa: F821
