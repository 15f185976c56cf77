"""One model, one name: the files that key models by something of their own (lr_tuning.json from the
lr sweep's records, ddp_readiness.json from the readiness check points') name each model by the
display name measurements.csv gives it (tidy.model_label); tests/model_names.py finds every name a
results folder gives. The e2e studies check the same on every file a real run writes
(tests/e2e/test_lr_tuned_study.py, test_own_kan_study.py)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import plan
from kan.contract import record as records
from model_names import display_names, model_names, stray_names
from scaling.tables.tidy import collect

CANDS = [0.01, 0.1]
CFG = {
    "study": "s",
    "data": {"kind": "sklearn", "name": "breast_cancer"},
    "model": {"impl": ["kanscale", "mlp_matched"], "widths": [30, 8, 2]},
    "training": {"lr": "tuned", "lr_candidates": CANDS, "eval_every_samples": 256},
    "repeats": 1,
    "experiments": {
        "strong": {"samples": 2048, "global_batch": 64, "non_ddp_baseline": False,
                   "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
        "allreduce": {"enabled": False},
    },
}
SCRIPTS = Path(__file__).resolve().parents[2] / "workflow" / "scripts"


def _step(script: str, *args: str) -> None:
    """A workflow step as its rule runs it (--in/--param/--out)."""
    subprocess.run([sys.executable, str(SCRIPTS / script), *args], check=True, capture_output=True)


def test_the_sweep_choice_and_the_readiness_verdicts_name_models_as_the_tables_do(tmp_path):
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["readiness"] = {"enabled": True}
    points = [p.to_json() for p in plan.build_points(plan.validate_config(cfg)).values()]
    results = tmp_path / "results" / "s"
    (results / "plan").mkdir(parents=True)
    (results / "points").mkdir()
    (results / "plan" / "points.json").write_text(json.dumps(points))
    sweep = [p for p in points if p["experiment"] == "lr_tune"]
    for p in sweep:  # failed sweep points: each model still gets its (empty) choice
        rec = records.failure(p, "failed", "boom")
        (results / "points" / f"{p['id']}.json").write_text(json.dumps(rec))
    ids = json.dumps([p["id"] for p in sweep])
    _step("tune_lr.py", f"--in=points_dir={results / 'points'}", f"--param=ids={ids}",
          f"--param=candidates={json.dumps(CANDS)}", "--param=target=null",
          f"--out=lr_tuning={results / 'lr_tuning.json'}")
    _step("ddp_readiness.py", f"--in=planned={results / 'plan' / 'points.json'}",
          f"--in=points_dir={results / 'points'}", f"--out=readiness={results / 'ddp_readiness.json'}")
    collect(points, {}, points_dir=results / "points")["measurements"].to_csv(results / "measurements.csv")

    kan, mlp = "kan-bspline [30,8,2] on sklearn breast_cancer", "mlp_matched [30,8,2] on sklearn breast_cancer"
    assert display_names(results) == {kan, mlp}
    found = model_names(results)
    assert set(found) == {kan, mlp} and stray_names(results) == {}
    assert found[kan] == ["ddp_readiness.json (key)", "lr_tuning.json (key)", "measurements.csv: model column"]
    tuning = json.loads((results / "lr_tuning.json").read_text())
    assert tuning[kan]["tuning_key"] == "kanscale_bspline on sklearn breast_cancer"


def test_a_model_named_another_way_is_found_with_where(tmp_path):
    points = [p.to_json() for p in plan.build_points(plan.validate_config(copy.deepcopy(CFG))).values()]
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "points.json").write_text(json.dumps(points))
    # the forms one model had before: the sweep's tuning key, the implementation alone
    (tmp_path / "lr_tuning.json").write_text(json.dumps({"kanscale_bspline on sklearn breast_cancer": {},
                                                         "mlp_matched on sklearn breast_cancer": {}}))
    (tmp_path / "t.csv").write_text("model,x\nkanscale,1\n\"mlp_matched [30,8,2] on sklearn breast_cancer\",2\n")
    # a dict with other keys too is not keyed by model; a key about a model's placement is its name
    (tmp_path / "g.json").write_text(json.dumps({"n": {"kan": 1, "mlp": 2, "ci": 3},
                                                 "c": {"kan-bspline [30,8,2] on sklearn breast_cancer 1x2": 1}}))
    assert stray_names(tmp_path) == {"kanscale_bspline on sklearn breast_cancer": ["lr_tuning.json (key)"],
                                     "mlp_matched on sklearn breast_cancer": ["lr_tuning.json (key)"],
                                     "kanscale": ["t.csv: model column"]}
