"""Workflow step: the readiness check points' records (experiment readiness, kan/probes/readiness.py) ->
results/<study>/ddp_readiness.json, each implementation's checks (scaling/tables/readiness_table.py)."""

import json
import sys
from pathlib import Path

from scaling.common.io import step_args, write_json
from scaling.tables.readiness_table import verdicts


def main(planned: str, points_dir: str, out: str) -> None:
    found = verdicts(json.loads(Path(planned).read_text()), Path(points_dir))
    write_json(found, out)
    for name, checks in found.items():
        print(f"{name}: " + ", ".join(f"{c['check']} {c['pass']}" for c in checks), file=sys.stderr)


if __name__ == "__main__":
    inputs, params, outs = step_args(__doc__)
    main(inputs["planned"], inputs["points_dir"], outs["readiness"])
