"""Snakemake script: the scaling tables, loss curves and model.json -> results/<study>/plots/ (PNG
figures + figures.json)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling.columns import clean_curves  # noqa: E402
from scaling.io import read_tables  # noqa: E402
from scaling.plots import load_reference, plot_figures  # noqa: E402


def main(inputs: dict, folder: str, reference_dir: str | None, thresholds: dict) -> None:
    tables = read_tables(inputs)
    tables["loss_curves"] = clean_curves(tables.get("loss_curves"))
    manifest = plot_figures(tables, folder, load_reference(reference_dir), thresholds)
    for name, entry in manifest.items():
        print(f"{name}: {entry.get('file') or 'missing: ' + entry['missing']}", file=sys.stderr)


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:  # noqa: F821
        sys.stderr = log
        main(dict(snakemake.input.items()), snakemake.output[0], snakemake.params.reference_dir,  # noqa: F821
             snakemake.params.thresholds)  # noqa: F821
