"""A user's CSV through the local Slurm with a tuned rate, the critical batch and a held-out target
(tests/slurm/study-csv.yaml): the one-rank sweep runs first and lr_tuning.json names a
rate per implementation, every tuned point trains at it inside a packed allocation, the batch
experiment gives critical_batch.json, the guidelines carry a time-to-accuracy verdict per model and
the KAN against the MLP, and the report shows the rates, the critical batch and the verdict. The
local twin of this study is tests/e2e/test_lr_tuned_study.py."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from scaling.report.render import slug
import workflow_runs
from test_slurm import sbatch_calls

pytestmark = pytest.mark.slurm
STUDY, CONFIG = "slurmcsv", ["tests/slurm/study-csv.yaml"]


def _csv(path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 3))
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * x[:, 2] > 0).astype(int)
    path.write_text("a,b,c,label\n" + "".join(f"{a:.4f},{b:.4f},{c:.4f},{k}\n" for (a, b, c), k in zip(x, y)))


def test_a_tuned_csv_study_through_slurm_reports_rates_critical_batch_and_verdict(workdir):
    _csv(workdir / "rows.csv")
    run = workflow_runs.snakemake(workdir, CONFIG, "--nolock", "--verbose", profile="slurm", timeout=600, check=False)
    print(f"\n[slurm] CSV study (14 points, packed) took {run.wall_s:.0f} s", file=sys.stderr)
    assert run.returncode == 0, run.out[-5000:]
    recs = workflow_runs.records(workdir, STUDY)
    assert len(recs) == 14 and all(r["status"] == "ok" for r in recs.values()), \
        {p: r.get("reason") for p, r in recs.items() if r["status"] != "ok"}
    # few allocations: every point ran inside a pack, the sweep's before any tuned point's
    jobs = sbatch_calls(run.out)
    assert jobs and all(c.startswith("rule_kanpack-") for c in jobs) and len(jobs) < len(recs), list(jobs)
    assert all(r["launch"]["slurm"]["pack"].startswith("kanpack-") for r in recs.values())
    sweep = [r for p, r in recs.items() if p.startswith("lr_tune-")]
    tuned = [r for p, r in recs.items() if not p.startswith("lr_tune-")]
    assert len(sweep) == 4 and min(r["started_utc"] for r in tuned) >= max(r["finished_utc"] for r in sweep)[:19]
    results = workdir / "results" / STUDY
    choice = json.loads((results / "lr_tuning.json").read_text())
    assert len(choice) == 2 and all(c["chosen"] in (0.01, 0.03) and c["why"] for c in choice.values())
    for r in tuned:
        key = next(k for k, c in choice.items() if c["tuning_key"].startswith(r["point"]["model"]["impl"]))
        assert r["point"]["train"]["lr"] == choice[key]["chosen"] == r["optimizer"]["lr_effective"], r["point"]["id"]
    crit = json.loads((results / "critical_batch.json").read_text())
    assert len(crit) == 2 and all(c["batches"] == [16, 64, 256] for c in crit.values())
    # one repeat, so each batch's samples to target is a point of the 512-sample evaluation grid (512,
    # 1,024, 1,536, 2,048) or not reached: of those 5^3 cases the fit gives these four statuses and never
    # "below the smallest batch tried" (that needs samples growing ~16x from batch 16 to 256; the grid
    # spans 4x). Which one a model gets rests on the rate its sweep chose (the local twin asserts its own)
    assert all(c["status"] in ("ok", "beyond the batches tried", "not enough batches", "not reached")
               for c in crit.values()), {m: c["why"] for m, c in crit.items()}
    verdict = {g["id"]: g for g in json.loads((results / "guidelines.json").read_text())["guidelines"]
               if g["topic"] == "time-to-accuracy"}
    model = " [3,6,2] on file rows.csv:label"
    kan, mlp = f"time-to-accuracy-strong-kan-bspline{model}", f"time-to-accuracy-strong-mlp_matched{model}"
    assert {kan, mlp} <= set(verdict), set(verdict)
    # one repeat (< report.min_repeats) cannot earn advice: each verdict says so and what would settle it
    assert all(g["status"] == "not_enough_data" or (g["status"] == "inconclusive" and g["settle"])
               for g in verdict.values()), verdict
    html = (workdir / "reports" / STUDY / "report.html").read_text()
    assert "Each model at its own tuned rate" in html and 'id="table-critical-batch"' in html
    # the verdict sits in the Time to accuracy section, its id made a linkable slug
    assert '<section id="accuracy">' in html and f'id="guideline-{slug(verdict[kan]["id"])}"' in html
