"""Workflow step: the batch experiment's held-out curves (val_curves.csv) and report.target ->
results/<study>/critical_batch.json, each model's critical batch with its bootstrap interval
(scaling/tables/critical.py says how)."""

import sys

from scaling.common.io import read_csv, step_args, write_json
from scaling.tables.critical import critical_batches


def main(val_curves: str, target: dict | None, resamples: int, level: float, out: str) -> None:
    result = critical_batches(read_csv(val_curves), target, resamples, level) if target else {}
    write_json(result, out)
    for model, r in result.items():
        print(f"{model}: {r['status']}, B_crit {r['b_crit']} {r['ci']}: {r['why']}", file=sys.stderr)


if __name__ == "__main__":
    inputs, params, outs = step_args(__doc__)
    main(inputs["val_curves"], params["target"], params["resamples"], params["level"], outs["critical_batch"])
