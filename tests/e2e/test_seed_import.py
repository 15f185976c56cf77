"""The seed paper's own 21 runs imported (config/seed-paper-import.yaml) through the whole workflow:
nothing is measured, the report says the records were imported, the 8-GPU step is predicted from the
1, 2 and 4-GPU runs, 1 GPU is soonest to the 8-GPU run's final training loss, and the DDP overhead is
said not to be communication."""

import json
import re
import subprocess
import sys

import pytest
from report_noise import findings
from workflow_runs import copy_workflow, job_counts, snakemake

pytestmark = pytest.mark.e2e

STUDY = "seed_paper_import"


def test_seed_runs_imported_and_analysed(tmp_path):
    # 100 bootstrap resamples instead of 500: seconds less; the assertions hold at either
    work = copy_workflow(tmp_path / "w", config={"report": {"bootstrap_samples": 100}})
    run = snakemake(work, ["config/seed-paper-import.yaml", "study.yaml"], timeout=600)
    jobs = job_counts(run.out)
    assert jobs.get("import_records") == 1 and "measure_point" not in jobs, jobs
    results = work / "results" / STUDY

    (strong8,) = [r for r in json.loads((results / "holdout.json").read_text())["pykan [2,64,1]"]
                  if r["experiment"] == "strong"]
    assert strong8["world_size"] == 8 and strong8["measured_step_s"] == pytest.approx(0.1461, abs=2e-4)
    assert abs(strong8["error_pct"]) < 5 and strong8["interval"][0] < strong8["predicted_step_s"]
    # the strong, weak and comm runs of one step differ by about 1%: that spread widens the interval
    # past the model's own, enough to hold the measured step
    (lo, hi), (mlo, mhi) = strong8["interval"], strong8["model_interval"]
    assert lo < mlo < mhi < hi and lo <= strong8["measured_step_s"] <= hi and 0.3 < strong8["run_to_run_pct"] < 2

    guidelines = {g["id"]: g for g in json.loads((results / "guidelines.json").read_text())["guidelines"]}
    soonest = guidelines["time-to-accuracy-strong-pykan [2,64,1]"]
    assert soonest["numbers"]["soonest"]["world_size"] == 1 and "training loss" in soonest["text"]
    assert guidelines["overhead-not-comm-pykan [2,64,1]"]["status"] == "advice"
    assert guidelines["holdout-pykan [2,64,1]"]["status"] == "advice"

    # the seed's A100 steps give config/paper.yaml (plan.estimate_from) an expected cost for its pykan
    # points, with its source; the other implementations' points get only their bound
    plan = subprocess.run([sys.executable, "workflow/scripts/study.py", "plan", "config/paper.yaml"], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    expected = next(line for line in plan.stdout.splitlines() if line.startswith("expected: about "))
    assert "GPU-hours for the 72 points still to run" in expected and "from results/seed_paper_import" in expected
    assert "the other 213 points still to run: no step measured like theirs" in plan.stdout

    # the paper's own 5.97x and 74.7% at 8 GPUs, checked against its runs: above both, one run each
    expect = {e["name"]: e for e in json.loads((results / "expectations.json").read_text())["expectations"]}
    speedup = expect["the paper's 5.97x speedup at 8 GPUs"]
    assert speedup["status"] == "inconclusive" and 6.1 < speedup["rows"][0]["value"] < 6.3
    assert expect["the paper's 74.7% efficiency at 8 GPUs"]["rows"][0]["value"] > 0.747

    html = (work / "reports" / STUDY / "report.html").read_text()
    # no e-notation, zero-width interval, negative share or "(s)" plural (A100 runs: GPU-hours are right)
    assert not findings(html, gpu=True), "\n".join(findings(html, gpu=True)[:20])
    answer = html[html.index('<section id="answer"'):html.index("</section>", html.index('<section id="answer"'))]
    assert "runs were imported from workflow/report/reference/seed-paper-a100-runs" in answer
    assert "not communication" in answer and "global batch grows with the ranks" in answer
    assert "not measured by kanscale" in answer and "repeats (one run per point)" in answer
    # the first line is short (the verdicts come next); where from and what they lack follow them
    runs_line = answer[answer.index('id="runs"'):answer.index("</p>", answer.index('id="runs"'))]
    assert "elsewhere, not by kanscale: 21 imported runs" in runs_line and "lack" not in runs_line
    assert answer.index('class="answers"') < answer.index('id="imported"')
    assert "Where to run: where each model reached training loss" in answer
    assert "the runs were imported: measure those repeats on your cluster, or import them" in answer
    # every section's call for repeats says where imported repeats come from, once
    settles = re.findall(r'class="settle">To settle it: ([^<]*)<', html)
    asks = [s for s in settles if "more repeat" in s]
    assert asks and all(s.count("the runs were imported") == 1 for s in asks), asks
    # the baseline is the one-GPU run without DDP (no DDP run at one rank was imported): figures say so
    assert "samples/s at the baseline (1 rank without DDP)" in html
    operator = html[html.index('<section id="operator"'):]
    assert "No run here has a no_sync step (imported runs have none)" in operator[:operator.index("</section>")]

    again = snakemake(work, ["config/seed-paper-import.yaml", "study.yaml"], timeout=300)
    assert "Nothing to be done" in again.out
