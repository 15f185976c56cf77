"""profiles/slurm on a real Slurm (tests/slurm/slurm-local.sh: nodes n1, n2 with 2 fake GPUs each).

    pytest -m slurm tests/slurm        # as root on Debian/Ubuntu; ~4 minutes

Only what Slurm shows is tested here (what the workflow does with records is the local tests'; the
adaptive looks run once, locally: tests/e2e/test_adaptive.py): the sbatch line of each placement and
what Slurm granted, ranks per node, a re-run that submits only the missing point (every rule but
the measurement, the looks included, is local), a rendezvous that cannot complete, the srun
launcher, and a packed study (resources.pack: few allocations, a failed point inside a pack, kill -9
of snakemake mid-pack and the squeue-aware re-run; tests/unit/test_packs.py reads squeue's lines
of single jobs and packs alike).
The main study tests/slurm/study.yaml has one point per placement 1x1, 1x2, 2x1, 2x2 (nodes x
GPUs per node); snakemake runs with `--profile profiles/slurm
--profile tests/slurm/profile` (the second holds only what the local Slurm needs: squeue status
checks, short polling). It runs in a temporary copy of the workflow; KANSCALE_KEEP_SLURM_WORKDIR=1
keeps that copy (records, logs, snakemake-*.log with every sbatch line) for inspection.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import workflow_runs

import plan

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]

STUDY = "slurmci"
PLACEMENTS = [(1, 1), (1, 2), (2, 1), (2, 2)]  # (nodes, gpus per node)
MEM_MB_PER_RANK, CPUS_PER_RANK, RUNTIME_MIN = 500, 1, 5  # as in tests/slurm/study.yaml
RUNTIME_PACK_MIN = 2  # tests/slurm/study-pack.yaml
# each study's config files, layered in this order (paths relative to the work folder)
CONFIGS = {STUDY: ["study.yaml"], "slurmbroken": ["study.yaml", "study-broken.yaml"],
           "slurmsrun": ["study.yaml", "study-srun.yaml"],
           "slurmemu": ["study.yaml", "study-emulated.yaml"], "slurmpack": ["study.yaml", "study-pack.yaml"]}


def configfiles(study: str) -> list[str]:
    return [f"tests/slurm/{name}" for name in CONFIGS[study]]


def point_id(nodes: int, gpus: int, study: str = STUDY) -> str:
    """The id of the comm point at nodes x gpus of the study's config (tests/slurm/*.yaml, layered)."""
    return _ids(study)[(nodes, gpus)]


def study_config(study: str) -> dict:
    """The study's validated config (tests/slurm/*.yaml, layered as snakemake layers them)."""
    cfg: dict = {}
    files = [(REPO / "tests" / "slurm" / name, plan.read_yaml(REPO / "tests" / "slurm" / name)) for name in CONFIGS[study]]
    for _, raw in files:
        plan._merge(cfg, copy.deepcopy(raw))
    # a factory's relative path: from its config file to the working folder (the checkout's root
    # here, the work folder's for snakemake: the same string, so the same point ids)
    return plan.validate_config(cfg, files=files)


def _points(study: str) -> list:
    """Every planned point of the study's config."""
    return list(plan.build_points(study_config(study)).values())


def _ids(study: str) -> dict:
    return {(p.placement.nodes, p.placement.gpus_per_node): p.id for p in _points(study)
            if p.experiment == "comm" and p.rep == 0}


def snakemake(workdir: Path, study: str, extra_env: dict | None = None, timeout_s: int = 600) -> tuple[int, str, float]:
    """Run the study's default target with the Slurm profile (--verbose: the sbatch lines);
    (exit code, full output, wall seconds)."""
    run = workflow_runs.snakemake(workdir, configfiles(study), "--nolock", profile="slurm", env=extra_env,
                                  timeout=timeout_s, check=False)
    return run.returncode, run.out, run.wall_s


def sbatch_calls(log: str) -> dict[str, list[str]]:
    """{job comment (rule + wildcards): sbatch arguments} from the plugin's `sbatch call:` lines."""
    calls = {}
    for line in log.splitlines():
        if "sbatch call:" not in line:
            continue
        args = shlex.split(line.split("sbatch call:", 1)[1].split(" --wrap=")[0])
        comment = args[args.index("--comment") + 1]
        calls[comment] = args
    return calls


def report_target(workdir: Path, study: str) -> str:
    """The study's final output: the report, or the tidy table where the report rules are absent."""
    report_rules = (workdir / "workflow" / "rules" / "report.smk").read_text()
    if "rule render_report" in report_rules:
        return f"reports/{study}/report.html"
    return f"results/{study}/measurements.csv"


@pytest.fixture(scope="module")
def e2e(workdir: Path):
    target = report_target(workdir, STUDY)
    rc, log, wall = snakemake(workdir, STUDY)  # rule all: records + report
    print(f"\n[slurm] e2e study ({len(PLACEMENTS)} points) took {wall:.0f} s", file=sys.stderr)
    assert rc == 0, log[-5000:]
    return {"log": log, "wall": wall, "target": target}


def load_record(workdir: Path, pid: str, study: str = STUDY) -> dict:
    return json.loads((workdir / "results" / study / "points" / f"{pid}.json").read_text())


@pytest.mark.parametrize("nodes,gpus", PLACEMENTS, ids=[f"{n}x{g}" for n, g in PLACEMENTS])
def test_sbatch_asks_for_exactly_the_point(e2e, workdir, nodes, gpus):
    calls = sbatch_calls(e2e["log"])
    comment = f"rule_measure_point_wildcards_{STUDY}_{point_id(nodes, gpus)}"
    assert comment in calls, f"no sbatch call for {comment}; calls: {list(calls)}"
    args = calls[comment]
    # torchrun launcher: one task (torchrun agent) per node holding all the node's ranks' CPUs
    expected = [f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", f"--gres=gpu:{gpus}",
                f"--cpus-per-task={gpus * CPUS_PER_RANK}", "--exclusive"]
    for flag in expected:
        assert flag in args, f"{flag} missing from sbatch {shlex.join(args)}"
    assert args[args.index("--mem") + 1] == str(gpus * MEM_MB_PER_RANK)  # --mem is per node
    assert args[args.index("-t") + 1] == str(RUNTIME_MIN)
    assert not any(a.startswith(("--gpus=", "--ntasks-per-gpu")) for a in args), shlex.join(args)
    # and Slurm granted exactly that (scontrol show job, stored in the record)
    rec = load_record(workdir, point_id(nodes, gpus))
    job = rec["provenance"]["slurm"]["requested"]["job"]
    assert job["NumNodes"] == str(nodes)
    assert job["TresPerNode"] == f"gres:gpu:{gpus}"
    # whole nodes: the record says so, and saw no other job on them
    isolation = rec["launch"]["isolation"]
    assert isolation["exclusive"] is True and not isolation["contended"], isolation


@pytest.mark.parametrize("nodes,gpus", PLACEMENTS, ids=[f"{n}x{g}" for n, g in PLACEMENTS])
def test_records_have_world_nodes_and_ranks(e2e, workdir, nodes, gpus):
    rec = load_record(workdir, point_id(nodes, gpus))
    assert rec["status"] == "ok", rec.get("reason")
    assert rec["world_size"] == nodes * gpus
    assert rec["num_nodes"] == nodes and rec["ranks_per_node"] == gpus
    assert rec["launcher"] == "torchrun"
    # the fake GPUs are no usable CUDA devices: device auto fell back to CPU + gloo, and says so
    assert rec["device_type"] == "cpu" and rec["backend"] == "gloo"
    slurm = rec["provenance"]["slurm"]
    assert slurm["slurm_job_id"].isdigit()
    expected_nodes = ["n1", "n2"][:nodes]
    listed = subprocess.run(["scontrol", "show", "hostnames", slurm["slurm_job_nodelist"]],
                            capture_output=True, text=True, check=True).stdout.split()
    assert len(listed) == nodes
    ranks = rec["ranks"]
    assert len(ranks) == nodes * gpus
    per_node = Counter(r["slurm_nodename"] for r in ranks)
    assert sorted(per_node) == sorted(listed) and set(per_node.values()) == {gpus}, per_node
    if nodes == 2:
        assert sorted(per_node) == expected_nodes
    for r in ranks:  # each rank sees its node's GPUs (Slurm's CUDA_VISIBLE_DEVICES for the gres)
        assert len(r["cuda_visible_devices"].split(",")) == gpus
    req = slurm["requested"]
    assert (req["nodes"], req["gpus_per_node"], req["gres_per_node"]) == (nodes, gpus, f"gpu:{gpus}")
    assert req["mem_mb_per_node"] == gpus * MEM_MB_PER_RANK and req["runtime_min"] == RUNTIME_MIN
    launch = rec["provenance"]["launch_command"]
    if nodes == 1:
        assert "--standalone" in launch
    else:
        job_id = slurm["slurm_job_id"]
        assert f"--rdzv-id={job_id}" in launch and "--rdzv-backend=c10d" in launch
        assert re.search(rf"--rdzv-endpoint={listed[0]}:\d+", launch), launch


def test_study_output_renders(e2e, workdir):
    out = workdir / e2e["target"]
    assert out.exists() and out.stat().st_size > 0
    if out.suffix == ".csv":
        import pandas as pd

        df = pd.read_csv(out)
        assert sorted(df["world_size"].unique()) == [1, 2, 4]


def test_incremental_one_missing_record_one_sbatch(e2e, workdir):
    points = [point_id(n, g) for n, g in PLACEMENTS]
    gone = point_id(2, 1)
    records = {p: workdir / "results" / STUDY / "points" / f"{p}.json" for p in points}
    before = {p: records[p].stat().st_mtime_ns for p in points}
    records[gone].unlink()
    # the default target (rule all) names every record, so a deleted one is measured again
    rc, log, wall = snakemake(workdir, STUDY)
    print(f"\n[slurm] incremental re-run took {wall:.0f} s", file=sys.stderr)
    assert rc == 0, log[-5000:]
    calls = sbatch_calls(log)
    measured = [c for c in calls if c.startswith("rule_measure_point_")]
    assert measured == [f"rule_measure_point_wildcards_{STUDY}_{gone}"], list(calls)
    # anything else submitted can only be the aggregation downstream of the new record; the
    # workflow's rules of seconds of pandas say `localrule: True` (no reason to queue them), so
    # the re-run is exactly one sbatch
    assert all(c.startswith(("rule_measure_point_", "rule_collect_", "rule_compute_", "rule_plot_",
                             "rule_render_")) for c in calls), list(calls)
    sources = [workdir / "Snakefile", *sorted((workdir / "workflow" / "rules").glob("*.smk"))]
    assert any(re.search(r"^\s+localrule: True$", f.read_text(), re.M) for f in sources)
    # the adaptive looks (tests/e2e/test_adaptive.py) are local rules too, never jobs
    look = (workdir / "workflow" / "rules" / "looks.smk").read_text().split("checkpoint look:", 1)[1]
    assert re.search(r"^    localrule: True$", look.split("\n\n\n")[0], re.M), look
    assert len(calls) == 1, list(calls)
    assert records[gone].exists() and load_record(workdir, gone)["status"] == "ok"
    for p in points:
        if p != gone:
            assert records[p].stat().st_mtime_ns == before[p], f"{p} was re-measured"


def test_broken_rendezvous_fails_fast_and_rest_completes(workdir):
    study = "slurmbroken"
    target = report_target(workdir, study)
    rc, log, wall = snakemake(workdir, study, extra_env={"KANSCALE_FAULT": "drop-last-agent"})  # within 600 s
    print(f"\n[slurm] broken-rendezvous study took {wall:.0f} s", file=sys.stderr)
    assert rc == 0, log[-5000:]
    assert (workdir / target).exists()
    ok = load_record(workdir, point_id(1, 1, study), study)
    assert ok["status"] == "ok"
    bad = load_record(workdir, point_id(2, 1, study), study)
    assert bad["status"] == "failed"
    # names the error and what it means: RendezvousTimeoutError -- not every node's torchrun agent joined ...
    # so it failed by its configured join timeout (rdzv_join_s), not the point's deadline (a "timeout"
    # record) nor torchrun's default 10 minutes
    assert "RendezvousTimeoutError" in bad["reason"] and "rdzv_join_s" in bad["reason"], bad["reason"]


def test_srun_launcher_one_task_per_gpu(workdir):
    study = "slurmsrun"
    rc, log, wall = snakemake(workdir, study)
    print(f"\n[slurm] srun-launcher study took {wall:.0f} s", file=sys.stderr)
    assert rc == 0, log[-5000:]
    calls = sbatch_calls(log)
    for nodes, gpus in [(1, 2), (2, 2)]:
        pid = point_id(nodes, gpus, study)
        args = calls[f"rule_measure_point_wildcards_{study}_{pid}"]
        for f in (f"--nodes={nodes}", f"--ntasks={nodes * gpus}", f"--ntasks-per-node={gpus}",
                  f"--cpus-per-task={CPUS_PER_RANK}", f"--gres=gpu:{gpus}"):
            assert f in args, f"{f} missing from sbatch {shlex.join(args)}"
        rec = load_record(workdir, pid, study)
        assert rec["status"] == "ok", rec.get("reason")
        assert rec["launcher"] == "srun" and rec["world_size"] == nodes * gpus and rec["backend"] == "gloo"
        ranks = rec["ranks"]
        assert sorted(int(r["slurm_procid"]) for r in ranks) == list(range(nodes * gpus))
        by_node = {}
        for r in ranks:
            by_node.setdefault(r["slurm_nodename"], []).append(r)
        assert len(by_node) == nodes
        for node_ranks in by_node.values():  # local ids 0..gpus-1, one distinct GPU each
            assert sorted(int(r["slurm_localid"]) for r in node_ranks) == list(range(gpus))
            assert sorted(r["cuda_visible_devices"] for r in node_ranks) == [str(i) for i in range(gpus)]
    # the all-reduce sweep through the same launcher: one task per GPU over the two nodes
    (sweep,) = [p for p in _points(study) if p.experiment == "allreduce"]
    assert f"rule_measure_point_wildcards_{study}_{sweep.id}" in calls
    rec = load_record(workdir, sweep.id, study)
    assert rec["status"] == "ok" and rec["launcher"] == "srun" and rec["world_size"] == 4, rec.get("reason")
    assert [s["size_bytes"] for s in rec["allreduce"]["sizes"]] == [4096, 1048576]
    assert all(s["time_s"] > 0 for s in rec["allreduce"]["sizes"])
    assert (workdir / "reports" / study / "report.html").exists()


def _pack_jobs() -> dict[str, str]:
    """{group id: job id} of the packed allocations (any study) in squeue."""
    out = subprocess.run(["squeue", "-h", "-o", "%k|%i"], capture_output=True, text=True).stdout
    return {m.group(1): job for c, job in (ln.split("|", 1) for ln in out.splitlines() if "|" in ln)
            if (m := re.match(r"rule_(kanpack-[A-Za-z0-9-]+)_", c))}


def _pack_mid_run(packs_dir: Path, records: Path, skip: str) -> tuple[str, str, list[str]] | None:
    """(group id, job id, its recorded points) of a live 2-node pack without `skip` that has recorded
    a point and is measuring the next one now: the allocation's ledger (launch/allocation.py) names
    a started point without a record. (Not in the second between a point's record and the job
    step's snakemake registering it: a stop there lets Snakemake remove the record of the job it
    still counts as running, docs/slurm.md "Few allocations".)"""
    for gid, job in _pack_jobs().items():
        try:
            pack = json.loads((packs_dir / f"{gid}.json").read_text())
            started = (records.parent / "attempts" / f".allocation-{job}.lock").read_text().split()
        except OSError:
            continue  # another study's, or not started
        if skip in pack["points"] or pack["geometry"]["nodes"] != 2:
            continue
        done = [m for m in pack["points"] if (records / f"{m}.json").exists()]
        if done and any(m not in done for m in started):
            return gid, job, done
    return None


def _blocker(node: str) -> str:
    """A job that holds all of `node` until scancelled: the packs that need it stay pending (real
    squeue state, not a race with how fast the other packs end). Its job id, once it runs."""
    job = subprocess.run(["sbatch", "--parsable", "-w", node, "--exclusive", "-J", "kanscale-test-blocker",
                          "-t", "30", "-o", "/dev/null", "--wrap", "sleep 1800"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip().split(";")[0]
    end = time.monotonic() + 60
    while time.monotonic() < end:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if state == "RUNNING":
            return job
        time.sleep(0.2)
    subprocess.run(["scancel", job], timeout=60)
    raise AssertionError(f"the blocker job {job} did not start on {node}: {state!r}")


def test_packed_study_few_allocations_a_failed_point_and_kill_9(workdir):
    """resources.pack: 12 points of 2 geometries, at most 3 an allocation, run as 4 sbatch jobs (not
    12) in series inside each; a point that fails inside a pack leaves the next one running; kill -9
    of snakemake mid-pack and a re-run while packs are pending submit no twin of a live allocation
    and lose nothing; a pack scancelled between its points keeps what it recorded, and the next run
    packs only the rest."""
    study = "slurmpack"
    points = _points(study)
    assert len(points) == 12
    # the second point of the first 2-node pack fails (an invalid trainer flag)
    packs = plan.packs.form_packs(study, {p.id: p for p in points}, [p.id for p in points],
                                  plan.point_runtimes(study_config(study), {p.id: p for p in points}),
                                  plan.launch_settings(study_config(study)), study_config(study)["resources"]["pack"])
    assert len(packs) == 4 and all(len(pk["points"]) == 3 for pk in packs.values())
    two_node = [pk for pk in packs.values() if pk["geometry"]["nodes"] == 2][0]["points"]
    broken = two_node[1]
    env = {"KANSCALE_FAULT": "bad-flag", "KANSCALE_FAULT_POINTS": broken}
    cmd = workflow_runs.command(workdir, configfiles(study), "--verbose", profile="slurm")
    records = workdir / "results" / study / "points"
    # node n2 held: the 2-node packs pend until the re-run below has planned (CI's machine ended
    # every pack before a re-run once, so "a live allocation" must not depend on speed)
    blocker = _blocker("n2")
    try:
        first_log = workdir / "snakemake-pack-first.log"
        with open(first_log, "w") as log_f:
            sm = subprocess.Popen(cmd, cwd=workdir, stdout=log_f, stderr=subprocess.STDOUT, env={**os.environ, **env})
            end = time.monotonic() + 240
            # mid-pack: every pack submitted (the plugin submits them one by one), a 1-node allocation
            # has recorded a point, the 2-node ones pend
            while time.monotonic() < end and not (list(records.glob("*.json")) and _pack_jobs() and
                                                  first_log.read_text().count("submitted with SLURM jobid") >= len(packs)):
                time.sleep(0.5)
            sm.kill()  # kill -9: the allocations it submitted keep running or pending
            sm.wait()
        assert _pack_jobs(), "no packed allocation was live when snakemake was killed"
        first = first_log.read_text()
        submitted = sbatch_calls(first)
        assert 1 <= len(submitted) <= 4 and all(c.startswith("rule_kanpack-") for c in submitted), list(submitted)
        for args in submitted.values():  # one point's shape, the points' time limits summed
            assert "--ntasks-per-node=1" in args and ("--nodes=1" in args or "--nodes=2" in args), args
            assert "-t" in args and int(args[args.index("-t") + 1]) == 3 * RUNTIME_PACK_MIN, args
        subprocess.run([*cmd, "--unlock"], cwd=workdir, check=True, capture_output=True, timeout=120)
        rerun_log = workdir / "snakemake-pack-rerun.log"
        with open(rerun_log, "w") as log_f:
            rerun = subprocess.Popen([*cmd, "--nolock"], cwd=workdir, stdout=log_f, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env})
            end = time.monotonic() + 180
            while time.monotonic() < end and rerun.poll() is None and "not submitting it again" not in rerun_log.read_text():
                time.sleep(0.2)
            assert "not submitting it again" in rerun_log.read_text(), rerun_log.read_text()[-5000:]
            # it has planned: the 2-node packs may start now, while it finishes
            subprocess.run(["scancel", blocker], check=True, timeout=60)
            # scancel the other 2-node pack mid-run: what it recorded stays, the rest is left missing
            end = time.monotonic() + 180
            while time.monotonic() < end and not (hit := _pack_mid_run(workdir / "results" / study / "packs",
                                                                          records, broken)):
                time.sleep(0.2)
            assert hit, "no 2-node pack was caught between its points"
            cancelled_gid, cancelled_job, recorded_before = hit
            subprocess.run(["scancel", cancelled_job], check=True, timeout=60)
            assert rerun.wait(timeout=300) == 0, rerun_log.read_text()[-5000:]
    finally:
        subprocess.run(["scancel", blocker], timeout=60)
    cancelled_points = json.loads((workdir / "results" / study / "packs" / f"{cancelled_gid}.json").read_text())["points"]
    again = sbatch_calls(rerun_log.read_text())
    assert not set(again) & set(submitted), "a live allocation was submitted twice"
    end = time.monotonic() + 300
    while time.monotonic() < end and _pack_jobs():
        time.sleep(1)
    assert not _pack_jobs()
    rc, log, _ = snakemake(workdir, study, extra_env=env)  # collects, submits what is missing
    assert rc == 0, log[-5000:]
    total = len(submitted) + len(again) + len(sbatch_calls(log))
    # 2 x ceil(6 / 3) packs, and one more for what the scancel left missing
    assert total <= 2 * -(-6 // 3) + 1, (total, list(again), list(sbatch_calls(log)))
    by_job: dict = {}
    for p in points:
        rec = load_record(workdir, p.id, study)
        outcomes = [json.loads(f.read_text()) for f in
                    sorted((workdir / "results" / study / "attempts" / p.id).glob("*/outcome.json"))]
        if p.id in cancelled_points and p.id not in recorded_before:
            # at most the one point the scancel stopped has an attempt before, cancelled and unrecorded
            assert len(outcomes) <= 2 and all(o["status"] == "cancelled" and "packed allocation" in o["reason"]
                                              for o in outcomes[:-1]), outcomes
        elif p.id == broken:  # failed: the next run may try it again (rerun_failed), and it fails again
            assert 1 <= len(outcomes) <= 2 and all(o["status"] == "failed" for o in outcomes), outcomes
        else:
            assert len(outcomes) == 1, outcomes  # measured exactly once
        if p.id in recorded_before:  # recorded before the scancel, kept
            assert rec["launch"]["slurm"]["job_id"] == cancelled_job
        facts = rec["launch"]["slurm"]
        # 3 a pack; the re-run's pack of what the scancel left has fewer
        assert facts["pack"].startswith("kanpack-") and facts["pack_index"] < facts["pack_points"] <= 3, facts
        assert facts["queue_wait_s"] is not None and facts["queue_wait_s"] >= 0, facts
        by_job.setdefault(facts["job_id"], []).append((facts["pack_index"], rec))
        assert rec["status"] == ("failed" if p.id == broken else "ok"), (p.id, rec.get("reason"))
        if rec["status"] == "ok":  # one node: forked by the allocation's warm server; two: fresh (srun)
            assert set(rec["launch"]["started"]) == ({"warm"} if p.placement.nodes == 1 else {"exec"}), rec["launch"]
    assert "grid" in load_record(workdir, broken, study)["reason"], load_record(workdir, broken, study)["reason"]
    for job, recs in by_job.items():  # in series: each point starts after the one before it ended
        recs.sort(key=lambda r: r[0])
        assert [i for i, _ in recs] == list(range(len(recs))), (job, [i for i, _ in recs])
        for (_, a), (_, b) in zip(recs, recs[1:]):
            end_a = a["launch"]["slurm"]["offset_s"] + a["launch"]["wall_s"]
            assert b["launch"]["slurm"]["offset_s"] >= end_a, (job, end_a, b["launch"]["slurm"])
    # the failed point's pack-mate after it still ran and is ok
    after = two_node[2]
    assert load_record(workdir, after, study)["status"] == "ok"
    # the report's Method keeps queue wait apart from run time, counted once a job
    html = (workdir / "reports" / study / "report.html").read_text()
    jobs = f"{len(by_job)} Slurm allocation{'s' if len(by_job) != 1 else ''}"
    assert f"{jobs} for 12 points (12 packed" in html, html[html.find('id="method"'):][:3000]
    # your own KAN and inkan beside kanscale's, through Slurm (their readiness: test_own_kan_study.py)
    comm = html[html.index('<section id="comm">'):].split("</section>")[0]
    assert all(f"{name} [2,16,1]" in comm for name in ("kan-bspline", "tiny_kan.py:build", "inkan_kan.py:build")), \
        comm[:2000]
    assert all(load_record(workdir, p.id, study)["model"]["num_params"] > 0 for p in points if p.id != broken)
