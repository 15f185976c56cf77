"""The ddp experiment end to end through real Snakemake and real gloo process groups: DDP's hooks
at 1x2 on this machine, each combination a point with its own id; a point that fails when it runs
(one PowerSGD repeat, an invalid trainer flag injected) comes back as a failed point with its reason
while the study finishes (bf16, which gloo cannot run, is refused at plan time in a CPU study:
tests/unit/test_ddp_plan.py); each hook learns
what none learns (fp16 closely, PowerSGD more loosely) and the fp16 and PowerSGD records count
fewer bytes per step than none, with identical replicas; the tables, figures, guideline and the
report's "DDP settings" section are built from them; a re-run retries only the failed points."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from workflow_runs import ROOT, copy_workflow, measured, snakemake

import plan

pytestmark = pytest.mark.e2e
STUDY = "ddpt"
CONFIG = ROOT / "tests" / "configs" / "ddp-small.yaml"
# the second repeat of PowerSGD fails when it starts (an invalid trainer flag, launch/commands.py)
BROKEN = next(pid for pid, p in plan.build_points(plan.load_config(CONFIG)).items()
              if p.train.comm_hook == "powersgd" and p.rep == 1)


def run(work: Path) -> str:
    return snakemake(work, env={"KANSCALE_FAULT": "bad-flag", "KANSCALE_FAULT_POINTS": BROKEN}).out


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    # a space in the path, as a user's checkout may have
    work = copy_workflow(tmp_path_factory.mktemp("ddp study"), config=CONFIG)
    return work, run(work)


def test_every_setting_is_a_point_and_a_point_that_fails_is_a_failed_record_with_its_reason(study):
    work, _ = study
    recs = [json.loads(p.read_text()) for p in (work / "results" / STUDY / "points").glob("*.json")]
    by = {}
    for r in recs:
        by.setdefault(r["point"]["train"].get("comm_hook", "none"), []).append(r)
    assert sorted(by) == ["fp16", "none", "powersgd"] and all(len(v) == 2 for v in by.values())
    assert len({r["point"]["id"] for r in recs}) == 6
    for r in recs:
        if r["point"]["id"] == BROKEN:
            assert r["status"] == "failed" and "grid" in r["reason"], r["reason"]
        else:
            assert r["status"] == "ok", r.get("reason")
    nbytes = {h: by[h][0]["comm"]["bytes_per_step"] for h in ("none", "fp16", "powersgd")}
    assert nbytes["fp16"] == pytest.approx(nbytes["none"] / 2, rel=0.02), nbytes
    assert nbytes["powersgd"] < nbytes["fp16"], nbytes


@pytest.mark.parametrize("hook,tolerance", [
    ("fp16", 0.05),      # 16-bit gradients: the same curve within a few %
    ("powersgd", 0.5),   # rank-2 gradients with error feedback: looser
])
def test_a_hook_learns_what_none_learns_and_sends_what_it_should(study, hook, tolerance):
    """Repeat 0 of each setting (the same seed): the loss curve at the same steps, the replicas
    identical, the bytes a rank sends per step counted from what the hook sends."""
    work, _ = study
    rep0 = {}
    for p in (work / "results" / STUDY / "points").glob("*.json"):
        r = json.loads(p.read_text())
        if r["point"]["rep"] == 0:
            rep0[r["point"]["train"].get("comm_hook", "none")] = r
    baseline, rec = rep0["none"], rep0[hook]
    assert rec["point"]["train"]["comm_hook"] == hook and rec["comm"]["comm_hook"] == hook
    assert f"-{hook}" in rec["point"]["id"] and rec["replicas_identical"] is True
    base, mine = baseline["loss"]["curve"], rec["loss"]["curve"]
    assert [c["step"] for c in base] == [c["step"] for c in mine]
    first, last = base[0]["train_loss"], base[-1]["train_loss"]
    assert last < 0.5 * first  # the baseline learns at all, so the comparison means something
    assert abs(mine[-1]["train_loss"] - last) <= tolerance * first, (mine[-1], base[-1])
    n = baseline["comm"]["bytes_per_step"]
    assert n == 4 * baseline["model"]["num_params"]
    sent = rec["comm"]["bytes_per_step"]
    if hook == "fp16":
        assert sent == pytest.approx(n / 2, rel=0.01)  # every gradient once, in 2 bytes
    else:
        # PowerSGD sends P and Q of rank 2 for the 2-D weights, the rest uncompressed: far less than n
        assert 0 < sent < 0.5 * n
    assert "counted" in rec["comm"]["bytes_per_step_source"]


def test_table_guideline_and_report_section(study):
    work, _ = study
    out = work / "results" / STUDY
    t = pd.read_csv(out / "ddp.csv")
    assert list(t["ddp_setting"]) == ["none", "fp16", "powersgd-rank2"]
    assert t.set_index("ddp_setting").loc["powersgd-rank2", ["n_ok", "n_failed"]].tolist() == [1, 1]
    fp16 = t.set_index("ddp_setting").loc["fp16"]
    assert fp16["bytes_ratio"] == pytest.approx(0.5, rel=0.02) and fp16["final_loss_ratio"] > 0
    guidelines = json.loads((out / "guidelines.json").read_text())["guidelines"]
    (g,) = [g for g in guidelines if g["topic"] == "ddp"]
    assert g["status"] in ("advice", "inconclusive"), g
    assert set(g["numbers"]["verdict_by_setting"]) == {"none", "fp16", "powersgd-rank2"}, g["numbers"]
    model = json.loads((out / "model.json").read_text())
    entries = {e["ddp_setting"]: e for e in next(iter(model["ddp_settings"].values()))}
    assert entries["fp16"]["bytes_factor"] == pytest.approx(0.5, rel=0.02)
    html = (work / "reports" / STUDY / "report.html").read_text()
    section = html.split('<section id="ddp">')[1].split("</section>")[0]
    assert section.count("data:image/png;base64,") == 2 and 'id="table-ddp"' in section
    assert re.search(r"failed: [^<]*grid", section), section[:3000]


def test_a_rerun_retries_only_the_failed_points(study):
    """A failed point is retried on the next run (how a study recovers from a transient failure);
    every ok point is left alone, and the broken point fails again with the same reason."""
    work, _ = study
    again = measured(run(work))
    assert again == {BROKEN}, again
    rec = json.loads((work / "results" / STUDY / "points" / f"{BROKEN}.json").read_text())
    assert rec["status"] == "failed" and "grid" in rec["reason"]
