"""Adaptive repeats through real Snakemake on a tiny study: one command runs the first repeats, the
look and the repeats it adds; the repeats go only to configurations an undecided guideline names;
a re-run does nothing; a larger `max` re-runs the look but never an old repeat; `make status` tells
which repeats were not asked for."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_runs import copy_workflow, measured, snakemake, tiny

from kan.contract.point import Point

pytestmark = pytest.mark.e2e
STUDY = "adapt"


def config(max_repeats: int) -> dict:
    cfg = tiny(strong={"non_ddp_baseline": False}, comm={"topologies": [{"nodes": 1, "gpus_per_node": 2}]},
               allreduce={"enabled": False})
    cfg["study"] = STUDY
    # min_repeats 3 > min 2: after the first look every guideline resting on a point needs one more
    # repeat of it, so the look has something to add whatever the timings
    cfg["repeats"] = {"min": 2, "max": max_repeats, "looks": 2}
    cfg["report"] = {"min_repeats": 3, "bootstrap_samples": 20}
    return cfg


def run(work: Path, cfg_path: Path) -> str:
    return snakemake(work, [cfg_path]).out


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("adaptive"))
    cfg = work / "adapt.yaml"
    cfg.write_text(yaml.safe_dump(config(3)))
    return work, cfg, run(work, cfg)


def records(work: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (work / "results" / STUDY / "points").glob("*.json")}


def test_one_command_runs_the_first_repeats_the_look_and_what_it_adds(study):
    work, cfg, log = study
    look = json.loads((work / "results" / STUDY / "looks" / "look1.json").read_text())
    (entry,) = look["history"]
    undecided = {g["id"] for g in entry["guidelines"] if g["status"] == "inconclusive"}
    assert entry["added"], entry
    for fam, a in entry["added"].items():
        assert set(a["why"]) <= undecided and a["reps"] == [2]  # one more, up to max = 3
    recs = records(work)
    by_family: dict[str, list[int]] = {}
    for rec in recs.values():
        p = Point.from_json(rec["point"])
        by_family.setdefault(p.family, []).append(p.rep)
    for fam, reps in by_family.items():
        assert sorted(reps) == list(range(look["requested"][fam])), (fam, reps)
        assert sorted(reps) == ([0, 1, 2] if fam in entry["added"] else [0, 1])
    assert all(r["status"] == "ok" for r in recs.values())
    html = (work / "reports" / STUDY / "report.html").read_text()
    assert 'id="looks-table"' in html and ("decided at look" in html or "inconclusive at look 2" in html)
    assert "97.5% CI" in html  # deciding intervals at 1 - 0.05 / 2 looks


def test_a_rerun_does_nothing(study):
    work, cfg, _ = study
    assert "Nothing to be done" in run(work, cfg)


def test_status_names_the_repeats_not_asked_for(study):
    work, _, _ = study
    wider = work / "adapt-status.yaml"  # max 4: the look (run with max 3) did not ask for any repeat 4
    wider.write_text(yaml.safe_dump(config(4)))
    look = json.loads((work / "results" / STUDY / "looks" / "look1.json").read_text())
    out = subprocess.run([sys.executable, "workflow/scripts/study.py", "status", str(wider)], cwd=work,
                         capture_output=True, text=True, timeout=120).stdout
    not_asked = sum(4 - n for n in look["requested"].values())
    assert not_asked > 0 and out.count("the looks did not ask for it") == not_asked, out


def test_a_larger_max_reruns_the_look_but_no_old_repeat(study):
    work, cfg, _ = study
    before = set(records(work))
    wider = work / "adapt-max4.yaml"
    wider.write_text(yaml.safe_dump(config(4)))
    log = run(work, wider)
    assert "look 1 of adapt" in log
    assert not measured(log) & before  # every old repeat is reused
    look = json.loads((work / "results" / STUDY / "looks" / "look1.json").read_text())
    new = set(records(work)) - before
    assert {Point.from_json(records(work)[pid]["point"]).rep for pid in new} <= {2, 3}
    assert all(n <= 4 for n in look["requested"].values())
