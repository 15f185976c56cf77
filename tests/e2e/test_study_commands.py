"""The study commands an operator runs around the workflow: bad input stops everything before a
byte is written; `make plan` on the paper's matrix. (`make status` and `make report` while a study
runs in the same folder, without taking its lock: beside the demo, tests/e2e/test_workflow.py.)"""

import subprocess
import sys
from pathlib import Path

import pytest
from workflow_runs import ROOT

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
STUDY_PY = ROOT / "workflow" / "scripts" / "study.py"


@pytest.mark.parametrize("text, extra, first_words", [
    ("study: x\nmodel:\n  grid_size: 1.5\nexperiments:\n  comm:\n    topologies: [{nodes: 1, gpus_per_node: 2}]\n",
     [], "{cfg}: model.grid_size: 1.5 is not an integer"),
    ("study: x\nstudy: y\nexperiments:\n  comm:\n    topologies: [{nodes: 1, gpus_per_node: 2}]\n", [],
     "{cfg}: not valid YAML (line 2): duplicate key 'study'"),
    ("study: x\nexperiments:\n  comm:\n    topologies: [{nodes: 1, gpus_per_node: 2}]\n", ["--config", "repeats=0"],
     "--config: repeats: 0 is less than the minimum of 1"),
])
def test_bad_config_stops_snakemake_with_one_line_and_writes_nothing(tmp_path, text, extra, first_words):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    r = subprocess.run([str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "--cores", "1", "--configfile", str(cfg),
                        *extra], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert first_words.format(cfg=cfg) in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("text, problem", [("", "the config file is empty"), ("[1, 2]\n", "must be a mapping"),
                                           ("7\n", "must be a mapping"), (None, "config file not found")])
def test_check_names_empty_list_scalar_and_missing_files(tmp_path, text, problem):
    cfg = tmp_path / "c.yaml"
    if text is not None:
        cfg.write_text(text)
    r = subprocess.run([sys.executable, str(STUDY_PY), "check", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.strip().startswith(f"{cfg}: ") and problem in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_plan_of_the_paper_matrix(tmp_path):
    r = subprocess.run([sys.executable, str(STUDY_PY), "plan", str(ROOT / "config" / "paper.yaml")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "285 points, one job each" in r.stdout and "largest job: 4 nodes x 2 GPUs" in r.stdout
    assert "at most 444.0 GPU-hours (285.0 node-hours) if every job ran to its time limit" in r.stdout
    assert "with retries: 1 " in r.stdout and len(r.stdout.splitlines()) <= 80  # the points: plan.csv, --points
    import pandas as pd

    plan = pd.read_csv(tmp_path / "results" / "paper" / "plan.csv")
    assert len(plan) == 285 and set(plan["state"]) == {"not submitted"}
    # 36 of them the rate sweep: 3 implementations x 4 candidates x 3 repeats, at one rank
    assert plan["point"].str.startswith("lr_tune-").sum() == 36
    # pykan, kanscale and the matched MLP, each at the paper's six placements; 36 DDP-settings points (4 hooks x 3)
    assert plan["point"].str.contains("-pykan-").sum() > 0 and plan["point"].str.contains("-mlp_matched-").sum() > 0


def test_paper_matrix_dry_runs_with_both_implementations(tmp_path):
    r = subprocess.run([str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "-n", "--cores", "1",
                        "--configfile", str(ROOT / "config" / "paper.yaml")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "make_pykan_env" in out and "-pykan-2x64x1-n4g2-" in out and "-kanscale_bspline-2x64x1-n4g2-" in out
    assert "4 node(s) x 2 rank(s) per node, time limit 30 min" in out
