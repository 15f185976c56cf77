"""Snakemake script: the scaling tables -> guidelines.json (rules, texts, cited numbers)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.guidelines import compute_guidelines  # noqa: E402
from scaling.io import read_tables, write_json  # noqa: E402


def main(tables: dict, thresholds: dict, out: str) -> None:
    guidelines = compute_guidelines(read_tables(tables), thresholds)
    write_json({"thresholds": thresholds, "guidelines": guidelines}, out)
    print(f"{len(guidelines)} guidelines", file=sys.stderr)


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        main(dict(snakemake.input.items()), snakemake.params.thresholds, snakemake.output[0])  # noqa: F821
