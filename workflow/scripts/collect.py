"""Snakemake script: point records -> results/<study>/measurements.csv (tidy)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.tidy import read_job_wall, read_record, tidy  # noqa: E402


# TEMPORARY stub until the point/record contract lands in main (which replaces this file): the rule's
# loss_curves and allreduce outputs exist, with their headers only, so the analysis can read them.
LOSS_CURVE_HEADER = ("point_id,experiment,model,world_size,nodes,gpus_per_node,placement_class,ddp,rep,step,"
                     "samples_seen,elapsed_s,train_loss\n")
ALLREDUCE_HEADER = ("point_id,nodes,gpus_per_node,world_size,placement_class,rep,backend,size_bytes,time_s,"
                    "time_p10_s,time_p90_s,algbw_gbps,busbw_gbps,status\n")


def write_header_only(path: str, header: str) -> None:
    tmp = Path(path).with_suffix(".csv.tmp")
    tmp.write_text(header)
    tmp.replace(path)


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
                snakemake.output.measurements)  # noqa: F821
        write_header_only(snakemake.output.loss_curves, LOSS_CURVE_HEADER)  # noqa: F821
        write_header_only(snakemake.output.allreduce, ALLREDUCE_HEADER)  # noqa: F821
