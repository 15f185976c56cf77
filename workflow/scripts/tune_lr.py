"""Workflow step: the lr sweep's records (experiment lr_tune, training.lr: tuned) -> each
implementation's rate in results/<study>/lr_tuning.json, under the sweep model's display name
(scaling/tables/lrtune.py says how it is chosen). The workflow then gives each tuned point its rate
in the point JSON its launcher gets (common_tune.smk tuned_point, workflow/scripts/launch/tuned.py)."""

import sys
from pathlib import Path

from kan.contract import record as records
from kan.contract.point import Point
from scaling.common.io import step_args, write_json
from scaling.tables.lrtune import choose, sweep_run
from scaling.tables.tidy import model_label


def main(points_dir: str, ids: list[str], candidates: list[float], target: dict | None, out: str) -> None:
    runs = []
    for pid in ids:
        path = Path(points_dir) / f"{pid}.json"
        try:
            rec = records.read(path, pid)
        except records.InvalidRecord as e:
            print(f"{path}: not used ({e})", file=sys.stderr)
            continue
        runs.append(sweep_run(rec, Point.from_json(rec["point"]).tuning_key, model_label(rec["point"])))
    choice = choose(runs, candidates, target)
    write_json(choice, out)
    for model, c in choice.items():
        print(f"{model}: lr {c['chosen']} ({c['why']})", file=sys.stderr)


if __name__ == "__main__":
    inputs, params, outs = step_args(__doc__)
    main(inputs["points_dir"], params["ids"], params["candidates"], params["target"], outs["lr_tuning"])
