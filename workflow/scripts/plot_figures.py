"""Workflow step: the scaling tables, loss curves and model.json (of this study and of the studies
in report.compare) -> results/<study>/plots/ (PNG figures + figures.json)."""

import sys

from scaling.columns import clean_curves
from scaling.compare import read_studies
from scaling.io import read_tables, step_args
from scaling.plots import load_reference, plot_figures


def main(inputs: dict, folder: str, reference: str | None, thresholds: dict, study: str | None = None,
         compare: list[str] | None = None) -> None:
    """`reference`: the config's report.reference name; `compare`: other studies' results folders."""
    tables = read_tables(inputs)
    tables["loss_curves"] = clean_curves(tables.get("loss_curves"))
    others = read_studies(compare or [])
    for s in others:
        s["tables"]["loss_curves"] = clean_curves(s["tables"].get("loss_curves"))
    manifest = plot_figures(tables, folder, load_reference(reference), thresholds, others, study)
    for name, entry in manifest.items():
        print(f"{name}: {entry.get('file') or 'missing: ' + entry['missing']}", file=sys.stderr)


if __name__ == "__main__":
    inp, params, out = step_args(__doc__)
    main(inp, out["plots"], params["reference"], params["thresholds"], params["study"], params["compare"])
