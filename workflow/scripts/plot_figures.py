"""Snakemake script: the scaling tables, loss curves and model.json (of this study and of the studies
in report.compare) -> results/<study>/plots/ (PNG figures + figures.json)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.columns import clean_curves  # noqa: E402
from scaling.compare import read_studies  # noqa: E402
from scaling.io import read_tables  # noqa: E402
from scaling.plots import load_reference, plot_figures  # noqa: E402


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
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        inp = snakemake.input  # noqa: F821
        main({k: inp[k] for k in ("strong", "weak", "comm", "model_size", "allreduce_sizes", "loss_curves", "model")},
             snakemake.output[0], snakemake.params.reference, snakemake.params.thresholds,  # noqa: F821
             snakemake.wildcards.study, snakemake.params.compare)  # noqa: F821
