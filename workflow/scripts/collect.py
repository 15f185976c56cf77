"""Snakemake script: point records -> results/<study>/{measurements,loss_curves,allreduce}.csv (tidy)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.io import write_csv  # noqa: E402
from scaling.tidy import collect, read_job_wall  # noqa: E402


def main(points: list[dict], record_paths: list[str], benchmark_paths: list[str], running: dict,
         out: dict) -> None:
    paths = {Path(p).stem: p for p in record_paths}
    walls = {Path(p).stem: read_job_wall(p) for p in benchmark_paths}
    tables = collect(points, paths, running, walls, points_dir=Path(out["measurements"]).parent / "points")
    for name, df in tables.items():
        write_csv(df, out[name])
    counts = tables["measurements"]["status"].value_counts().to_dict()
    print(f"{len(tables['measurements'])} points: {counts}", file=sys.stderr)


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        main(snakemake.params.points, list(snakemake.input.records), list(snakemake.input.benchmarks),  # noqa: F821
             dict(snakemake.params.running), dict(snakemake.output.items()))  # noqa: F821
