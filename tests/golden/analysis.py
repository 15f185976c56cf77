"""The analysis and report of a recorded study, rebuilt from its committed point records: what the
golden test compares with the outputs the code made when the records were committed.

    python tests/golden/analysis.py STUDY_DIR OUT_DIR

STUDY_DIR holds config.yaml and records/{points,benchmarks,looks} (what results/<study>/ held); OUT_DIR gets the
analysis outputs (GOLDEN_FILES) exactly as the workflow writes them. Snakemake runs only the
analysis rules (plan.ANALYSIS_RULES) on a scratch copy, as `make report` does, so nothing is measured.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("measurements.csv", "points.csv", "strong.csv", "weak.csv", "comm.csv", "model_size.csv", "allreduce.csv",
          "allreduce_sizes.csv", "ddp.csv", "loss_curves.csv", "fits.json", "model.json", "guidelines.json",
          "expectations.json", "provenance.json")
GOLDEN_FILES = TABLES + ("report.html",)
RECORDED = ("points", "benchmarks", "looks")
ANALYSIS_RULES = ("write_plan", "collect_measurements", "compute_tables", "fit_model", "compute_guidelines",
                  "plot_figures", "evaluate_expectations", "render_report", "all")


def normalise(name: str, text: str) -> str:
    """The one line that differs between two renderings of the same records: when it was rendered."""
    if name == "report.html":
        text = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated <time>", text)
    return text


def rebuild(study_dir: Path, out: Path) -> None:
    cfg = yaml.safe_load((study_dir / "config.yaml").read_text())
    study = cfg["study"]
    with tempfile.TemporaryDirectory(prefix="kanscale-golden-") as tmp:
        scratch = Path(tmp)
        for name in RECORDED:
            src = study_dir / "records" / name
            dst = scratch / "results" / study / name
            shutil.copytree(src, dst) if src.exists() else dst.mkdir(parents=True)
        cfg_file = scratch / "study.yaml"
        cfg_file.write_text(yaml.safe_dump({**cfg, "partial": True}, sort_keys=False))
        targets = [f"results/{study}/{n}" for n in TABLES] + [f"reports/{study}/report.html"]
        cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(scratch), "--configfile",
               str(cfg_file), "--cores", "2", "--allowed-rules", *ANALYSIS_RULES, "--", *targets]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)
        if res.returncode != 0:
            raise RuntimeError(f"the analysis failed:\n{(res.stdout + res.stderr)[-4000:]}")
        out.mkdir(parents=True, exist_ok=True)
        for name, target in zip(GOLDEN_FILES, targets):
            (out / name).write_text(normalise(name, (scratch / target).read_text()))


if __name__ == "__main__":
    rebuild(Path(sys.argv[1]), Path(sys.argv[2]))
