"""Workflow step: the config's `import:` source -> one record per planned point (plan/imports.py
matched them at plan time), each marked `source: imported` with where it came from and what it lacks
(plan/imports.py imported_record says what each field holds).
"""

import sys
from pathlib import Path

from kan.contract import record

import plan
from plan import imports
from scaling.common.io import step_args


def main(config: dict, points_dir: Path) -> None:
    spec = config["import"]
    points = plan.build_points(config)
    runs = imports.match(points, imports.read_runs(spec), "import")
    for pid, run in runs.items():
        rec = record.check(imports.imported_record(points[pid], run, spec, plan.repeat_plan(config).min), pid)
        record.write(points_dir / f"{pid}.json", rec)
    print(f"{len(runs)} records imported from {spec['path']}", file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(params["config"], Path(out["points_dir"]))
