"""training.lr: tuned on a user's CSV through the local workflow: the one-rank
sweep runs first, lr_tuning.json names each implementation's rate, every tuned point trains at it
and says why, the report shows the sweep; a sweep point measured again to the same choice re-runs
no tuned point, and a sweep whose choice changed re-runs exactly that implementation's points."""

import json

import numpy as np
import pandas as pd
import pytest
import workflow_runs
from model_names import stray_names
from workflow_runs import copy_workflow, measured

pytestmark = pytest.mark.e2e

CANDS = [0.003, 0.01, 0.03]


def _csv(path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 3))
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * x[:, 2] > 0).astype(int)
    path.write_text("a,b,c,label\n" + "".join(f"{a:.4f},{b:.4f},{c:.4f},{k}\n" for (a, b, c), k in zip(x, y)))


def _config():
    return {
        "study": "tuned", "device": "cpu", "cpu_threads_per_rank": 1, "repeats": 1,
        "data": {"kind": "file", "path": "rows.csv", "target": "label", "task": "classification"},
        "model": {"impl": ["kanscale", "mlp_matched"], "widths": [3, 6, 2], "grid_size": 4},
        "training": {"epochs": 1, "warmup_steps": 2, "lr": "tuned", "lr_candidates": CANDS,
                     "eval_every_samples": 512},
        "experiments": {
            "strong": {"samples": 2048, "global_batch": 64, "non_ddp_baseline": False,
                       "topologies": [{"nodes": 1, "gpus_per_node": 1}, {"nodes": 1, "gpus_per_node": 2}]},
            "allreduce": {"enabled": False},
            "batch": {"samples": 2048, "global_batches": [16, 64, 256]},
        },
        "report": {"bootstrap_samples": 20, "reference": "none",
                   "target": {"metric": "val_accuracy", "from_reference": 0.95}},
        "resources": {"runtime_min": 5, "mem_mb_per_rank": 1000, "cpus_per_rank": 1},
    }


def test_a_tuned_csv_study_chooses_trains_reports_and_reruns_only_what_changed(tmp_path):
    work = copy_workflow(tmp_path / "w w", config=_config())  # a path with a space, as users have
    _csv(work / "rows.csv")
    out = workflow_runs.snakemake(work).out
    recs = workflow_runs.records(work, "tuned")
    sweep = {pid: r for pid, r in recs.items() if pid.startswith("lr_tune-")}
    tuned = {pid: r for pid, r in recs.items() if pid.startswith("strong-")}
    batch = {pid: r for pid, r in recs.items() if pid.startswith("batch-")}
    assert len(sweep) == 6 and len(tuned) == 4 and len(batch) == 6 and all(r["status"] == "ok" for r in recs.values())
    # the batch points train at the tuned rate too; the critical batch has a verdict per model
    assert all(r["point"]["train"]["lr_tuned_from"] == CANDS and r["point"]["train"]["lr"] in CANDS
               for r in batch.values())
    crit = json.loads((work / "results/tuned/critical_batch.json").read_text())
    assert len(crit) == 2 and all(c["batches"] == [16, 64, 256] for c in crit.values())
    # what these data give (one repeat, E on the 512-sample evaluation grid): the KAN at its tuned 0.003
    # reaches its target at batches 16 and 64 only, too few to fit; the MLP after 512, 512 and 1,024
    # samples, a knee inside the batches tried (B_crit ~200)
    status = {m.split(" ")[0]: c["status"] for m, c in crit.items()}
    assert status == {"kan-bspline": "not enough batches", "mlp_matched": "ok"}, {m: c["why"] for m, c in crit.items()}
    choice = json.loads((work / "results/tuned/lr_tuning.json").read_text())
    # each choice under its model's display name (every table's), with the key tuned points look it up by
    assert {k: c["tuning_key"] for k, c in choice.items()} == {
        "kan-bspline [3,6,2] on file rows.csv:label": "kanscale_bspline on file rows.csv:label",
        "mlp_matched [3,6,2] on file rows.csv:label": "mlp_matched on file rows.csv:label"}
    for key, c in choice.items():
        assert c["chosen"] in CANDS and c["why"] and [x["lr"] for x in c["candidates"]] == CANDS
        assert all(x["repeats"] == 1 for x in c["candidates"])
    for pid, r in tuned.items():
        key = next(k for k, c in choice.items() if c["tuning_key"].startswith(r["point"]["model"]["impl"]))
        assert r["point"]["train"]["lr"] == choice[key]["chosen"] == r["optimizer"]["lr_effective"], pid
    # the rate each point trained at, in measurements.csv under the record's names
    rows = pd.read_csv(work / "results/tuned/measurements.csv").set_index("point_id")
    for pid, r in recs.items():
        assert (rows.loc[pid, "lr"], rows.loc[pid, "lr_effective"]) == (
            r["optimizer"]["lr"], r["optimizer"]["lr_effective"]), pid
    # the sweep ran before every tuned point: each tuned record started after the last sweep record ended
    last_sweep = max(r["finished_utc"] for r in sweep.values())
    assert min(r["started_utc"] for r in tuned.values()) >= last_sweep[:19]
    html = (work / "reports/tuned/report.html").read_text()
    assert "Each model at its own tuned rate" in html and "(chosen)" in html
    # the critical batch: its table, and its figure whenever some batch reached the target
    assert 'id="table-critical-batch"' in html
    figs = json.loads((work / "results/tuned/plots/figures.json").read_text())
    assert ("critical_batch" in figs) == any(c["reached"] for c in crit.values())
    assert ('id="figure-critical-batch"' in html) == ("critical_batch" in figs)
    assert "Updating checkpoint dependencies" in out
    # the verdict: a soonest world size per model (or why not) and the KAN against the MLP at one target
    verdict = {g["id"]: g for g in json.loads((work / "results/tuned/guidelines.json").read_text())["guidelines"]
               if g["topic"] == "time-to-accuracy"}
    model = " [3,6,2] on file rows.csv:label"
    kan, mlp = f"time-to-accuracy-strong-kan-bspline{model}", f"time-to-accuracy-strong-mlp_matched{model}"
    assert {kan, mlp, f"{kan}-vs-mlp_matched{model}"} <= set(verdict), set(verdict)
    # past the measured world sizes: predicted, and marked so (decide/totarget.py)
    assert all("predicted" in g["text"] and "not measured" in g["text"]
               for gid, g in verdict.items() if gid.startswith("time-to-accuracy-predicted-"))
    # one repeat (repeats: 1 < min_repeats) cannot earn advice: every decided-looking verdict stays inconclusive
    assert all(g["status"] in ("inconclusive", "not_enough_data") for g in verdict.values()), verdict
    reached = [g for g in verdict.values() if "soonest" in g["numbers"]]
    assert all(g["numbers"]["soonest"]["world_size"] in (1, 2) for g in reached)
    assert "Time to the held-out target" in html
    # one model, one name: every CSV and JSON names each model by its display name (tidy.model_label)
    assert stray_names(work / "results/tuned") == {}

    # a sweep point measured again (its record deleted) to the same choice: no tuned point re-runs
    gone = next(pid for pid in sweep if "mlp_matched" in pid)
    (work / f"results/tuned/points/{gone}.json").unlink()
    out = workflow_runs.snakemake(work).out
    assert measured(out) == {gone}, measured(out)
    assert json.loads((work / "results/tuned/lr_tuning.json").read_text()) == choice

    # the KAN's sweep now makes another rate best: only the KAN's tuned points run again, at that rate
    kan = choice["kan-bspline [3,6,2] on file rows.csv:label"]["chosen"]
    other = next(lr for lr in CANDS if lr != kan)
    pid = next(p for p, r in sweep.items() if "kanscale" in p and r["point"]["train"]["lr"] == other)
    path = work / f"results/tuned/points/{pid}.json"
    rec = json.loads(path.read_text())
    for entry in rec["validation"]["curve"]:
        entry["val_accuracy"], entry["val_loss"] = 1.0, 0.0
    path.write_text(json.dumps(rec))  # newer than lr_tuning.json: the choice is made again
    out = workflow_runs.snakemake(work).out
    rerun = measured(out)
    assert rerun == {p for p in (*tuned, *batch) if "kanscale" in p}, rerun
    again = workflow_runs.records(work, "tuned", "strong-kanscale*")
    assert all(r["point"]["train"]["lr"] == other for r in again.values())
