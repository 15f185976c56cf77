"""Workflow step: the scaling tables and model.json + the config's report.expect ->
results/<study>/expectations.json (pass / fail / inconclusive / not measured per expectation)."""

import sys

from scaling.common.io import read_tables, step_args, write_json
from scaling.decide.expectations import evaluate, validate_expectations


def main(tables: dict, expect: list, out: str) -> None:
    result = evaluate(validate_expectations(expect), read_tables(tables))
    write_json(result, out)
    for e in result["expectations"]:
        print(f"{e['status']}: {e['name']}", file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(inp, params["expect"], out["expectations"])
