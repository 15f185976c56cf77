"""Workflow step: the scaling tables, loss curves, held-out curves (val_curves.csv), model.json and
guidelines.json (of this study and of the studies in report.compare), and critical_batch.json where
the batch experiment ran -> results/<study>/plots/ (PNG figures + figures.json)."""

import sys
from pathlib import Path

from scaling.common.columns import clean_curves
from scaling.common.io import read_json, read_tables, step_args
from scaling.common.settings import Settings
from scaling.report.compare import read_studies
from scaling.report.plots import plot_figures
from scaling.report.reference import load_reference
from scaling.tables.heldout import clean_val_curves


def main(inputs: dict, folder: str, reference: str | None, settings: Settings, study: str | None = None,
         compare: list[str] | None = None, critical: str | None = None) -> None:
    """`reference`: the config's report.reference name; `compare`: other studies' results folders;
    `critical`: critical_batch.json (None: no batch experiment)."""
    tables = read_tables({k: v for k, v in inputs.items() if k != "guidelines"})
    # the headline figure draws the predicted time to a held-out target from its guidelines' numbers
    tables["guidelines"] = read_json(inputs["guidelines"])["guidelines"] if inputs.get("guidelines") else None
    tables["critical"] = read_json(critical) if critical and Path(critical).exists() else None
    tables["loss_curves"] = clean_curves(tables.get("loss_curves"))
    tables["val_curves"] = clean_val_curves(tables.get("val_curves"))
    others = read_studies(compare or [])
    for s in others:
        s["tables"]["loss_curves"] = clean_curves(s["tables"].get("loss_curves"))
    manifest = plot_figures(tables, folder, load_reference(reference), settings, others, study)
    for name, entry in manifest.items():
        print(f"{name}: {entry.get('file') or 'missing: ' + entry['missing']}", file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(inp, out["plots"], params["reference"], Settings.from_thresholds(params["thresholds"]), params["study"],
         params["compare"], params.get("critical"))
