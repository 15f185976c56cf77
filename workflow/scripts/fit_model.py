"""Workflow step: measurements.csv + allreduce.csv -> model.json (the performance model: fitted
terms with CIs, leave-one-world-size-out validation, predictions, a recommendation per model)."""

import sys

from scaling.common.columns import clean, clean_allreduce
from scaling.common.io import read_csv, step_args, write_json
from scaling.common.settings import Settings
from scaling.model.build import fit_performance_model


def main(measurements: str, allreduce: str, settings: Settings, out: str) -> None:
    model = fit_performance_model(clean(read_csv(measurements)), clean_allreduce(read_csv(allreduce)), settings)
    write_json(model, out)
    for name, m in model["models"].items():
        for cls, entry in m.get("placements", {}).items():
            v = entry.get("validation", {})
            print(f"{name} {cls}: LOO MAPE {v.get('loo_mape_pct')} {v.get('reason', entry.get('reason', ''))}",
                  file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(inp["measurements"], inp["allreduce"], Settings.from_thresholds(params["thresholds"]), out["model"])
