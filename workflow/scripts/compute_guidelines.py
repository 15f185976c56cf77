"""Workflow step: the scaling tables, model.json, holdout.json and, with the batch experiment,
critical_batch.json -> guidelines.json (rules, texts, cited numbers)."""

import sys
from pathlib import Path

from scaling.common.io import read_json, read_tables, step_args, write_json
from scaling.common.settings import Settings
from scaling.decide.guidelines import compute_guidelines


def main(tables: dict, model: str, thresholds: dict, out: str, critical: str | None = None,
         holdout: str | None = None) -> None:
    """`thresholds`: the step's param as the rule passed it (guidelines.json echoes it, report.target
    only where set, as the report's config echo: a study without one reads as it always did);
    `critical`: critical_batch.json (None: no batch experiment)."""
    crit = read_json(critical) if critical and Path(critical).exists() else None
    held = read_json(holdout) if holdout else None
    guidelines = compute_guidelines(read_tables(tables), Settings.from_thresholds(thresholds), read_json(model), crit,
                                    held)
    echo = {k: v for k, v in thresholds.items() if not (k == "target" and v is None)}
    write_json({"thresholds": echo, "guidelines": guidelines}, out)
    counts = {s: sum(g["status"] == s for g in guidelines) for s in ("advice", "inconclusive", "not_enough_data")}
    print(f"{len(guidelines)} guidelines: {counts}", file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main({k: inp[k] for k in ("strong", "weak", "comm", "model_size", "ddp", "anatomy") if k in inp}, inp["model"],
         params["thresholds"], out["guidelines"], params.get("critical"), inp.get("holdout"))
