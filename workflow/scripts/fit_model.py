"""Workflow step: measurements.csv + allreduce.csv -> model.json (the performance model: fitted
terms with CIs, leave-one-world-size-out validation, predictions, a recommendation per model) and
holdout.json (report.holdout's world sizes predicted without them: scaling/model/holdout.py)."""

import sys

from scaling.common.columns import clean, clean_allreduce
from scaling.common.io import read_csv, step_args, write_json
from scaling.common.settings import Settings
from scaling.model.perf_model import fit_performance_model
from scaling.model.holdout import holdout


def main(measurements: str, allreduce: str, settings: Settings, out: str, holdout_out: str) -> None:
    df, ar = clean(read_csv(measurements)), clean_allreduce(read_csv(allreduce))
    model = fit_performance_model(df, ar, settings)
    write_json(model, out)
    held = holdout(df, ar, settings.holdout, settings.bootstrap_samples)
    write_json(held, holdout_out)
    for name, rows in held.items():
        for r in rows:
            print(f"held out {name} {r['experiment']} p={r['world_size']}: measured {r['measured_step_s']:.4g} s, "
                  f"predicted {r['predicted_step_s']} s, error {r['error_pct']} %", file=sys.stderr)
    for name, m in model["models"].items():
        for cls, entry in m.get("placements", {}).items():
            v = entry.get("validation", {})
            print(f"{name} {cls}: LOO MAPE {v.get('loo_mape_pct')} {v.get('reason', entry.get('reason', ''))}",
                  file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(inp["measurements"], inp["allreduce"], Settings.from_thresholds(params["thresholds"]), out["model"],
         out["holdout"])
