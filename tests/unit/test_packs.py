"""resources.pack: which points share an allocation (plan/packs.py), how a re-run finds the points
of a live packed allocation in squeue (launch/slurm.py), and a point's turn inside it."""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import pandas as pd
import pytest

import plan
from launch import allocation, slurm

BASE = {
    "study": "packs",
    "repeats": 4,
    "model": {"impl": ["kanscale"], "basis": ["bspline"], "widths": [2, 8, 1], "grid_size": 5},
    "experiments": {"comm": {"samples": 1024, "batch_per_rank": 64,
                             "topologies": [{"nodes": 1, "gpus_per_node": 1}, {"nodes": 2, "gpus_per_node": 2}]},
                    "allreduce": {"enabled": False}},
    "resources": {"runtime_min": 5, "pack": {"max_points": 3, "max_runtime_min": 60}},
}


def _packs(cfg: dict, todo=None):
    cfg = plan.validate_config(json.loads(json.dumps(cfg)))
    points = plan.build_points(cfg)
    runtimes = plan.point_runtimes(cfg, points)
    return points, plan.packs.form_packs(cfg["study"], points, list(todo if todo is not None else points), runtimes,
                                         plan.launch_settings(cfg), cfg["resources"]["pack"])


def test_points_of_one_geometry_share_packs_of_at_most_max_points():
    points, packs = _packs(BASE)
    assert len(points) == 8
    # 4 points per geometry, 3 an allocation: 3 + 1 each
    sizes = sorted((pk["geometry"]["nodes"], len(pk["points"])) for pk in packs.values())
    assert sizes == [(1, 1), (1, 3), (2, 1), (2, 3)]
    for pk in packs.values():
        assert {points[p].placement.nodes for p in pk["points"]} == {pk["geometry"]["nodes"]}
        assert pk["runtime_min"] == 5 * len(pk["points"])
    every = [p for pk in packs.values() for p in pk["points"]]
    assert sorted(every) == sorted(points)  # each point in exactly one pack


def test_the_summed_time_limit_bounds_a_pack():
    cfg = json.loads(json.dumps(BASE))
    cfg["resources"]["pack"] = {"max_points": 10, "max_runtime_min": 12}
    _, packs = _packs(cfg)
    assert sorted(len(pk["points"]) for pk in packs.values()) == [2, 2, 2, 2]  # 2 x 5 min <= 12 < 3 x 5
    assert all(pk["runtime_min"] <= 12 for pk in packs.values())


def test_a_point_longer_than_an_allocation_is_a_config_error_naming_the_key():
    cfg = json.loads(json.dumps(BASE))
    cfg["resources"]["pack"] = {"max_points": 3, "max_runtime_min": 4}
    with pytest.raises(plan.ConfigError, match=r"resources\.pack\.max_runtime_min is 4.*asks for 5 min"):
        _packs(cfg)


def test_only_the_points_still_to_run_are_packed_and_ids_follow_the_content():
    points, all_packs = _packs(BASE)
    some = list(points)[:3]
    _, packs = _packs(BASE, todo=some)
    assert sorted(p for pk in packs.values() for p in pk["points"]) == sorted(some)
    # a pack's id names its content: a re-run's new pack never takes a live pack's id
    assert not set(packs) & set(all_packs) or all(
        packs[g]["points"] == all_packs[g]["points"] for g in set(packs) & set(all_packs))
    for gid in packs:
        assert gid.startswith("kanpack-") and "_" not in gid


def test_tuned_points_never_share_a_pack_with_the_sweep_they_wait_for():
    cfg = json.loads(json.dumps(BASE))
    cfg["training"] = {"lr": "tuned", "lr_candidates": [0.01, 0.1], "eval_every_samples": 512}
    points, packs = _packs(cfg)
    for pk in packs.values():
        kinds = {bool(points[p].train.tuned) for p in pk["points"]}
        assert len(kinds) == 1, pk
    assert any(pk["geometry"]["after_sweep"] for pk in packs.values())
    assert any(not pk["geometry"]["after_sweep"] for pk in packs.values())


def test_pack_off_by_default_and_validated():
    cfg = json.loads(json.dumps(BASE))
    del cfg["resources"]["pack"]
    assert plan.validate_config(cfg)["resources"]["pack"] is None
    cfg["resources"]["pack"] = {"max_points": 0, "max_runtime_min": 10}
    with pytest.raises(plan.ConfigError, match="max_points"):
        plan.validate_config(cfg)
    cfg["resources"]["pack"] = {"max_points": 2}
    with pytest.raises(plan.ConfigError, match="max_runtime_min"):
        plan.validate_config(cfg)


def test_squeue_lines_of_single_jobs_and_packs(tmp_path):
    (tmp_path / "kanpack-n1x1-abc.json").write_text(json.dumps({"points": ["p1", "p2", "p3"]}))
    out = "\n".join([
        "11|RUNNING|rule_measure_point_wildcards_s_p9|None|2026-12-06T01:00:00",
        "12|PENDING|rule_kanpack-n1x1-abc_measure_point|Resources|2026-12-06T01:00:01",
        "13|RUNNING|rule_kanpack-n2x1-other_measure_point|None|2026-12-06T01:00:02",  # another study's
        "14|RUNNING|rule_measure_point_wildcards_t_p8|None|2026-12-06T01:00:03",  # another study
        "garbage",
    ])
    jobs = slurm.parse_point_jobs(out, "s", tmp_path)
    assert set(jobs) == {"p9", "p1", "p2", "p3"}
    assert jobs["p9"]["job_id"] == "11" and "pack" not in jobs["p9"]
    assert jobs["p2"] == {"job_id": "12", "state": "PENDING", "reason": "Resources",
                          "submitted": "2026-12-06T01:00:01", "pack": "kanpack-n1x1-abc"}
    assert slurm.pack_of_comment("rule_measure_point_wildcards_s_p9") is None


def test_a_live_packs_points_it_has_recorded_are_not_running(tmp_path):
    from kan.contract import record as records

    cfg = plan.validate_config(json.loads(json.dumps(BASE)))
    a, b = list(plan.build_points(cfg).values())[:2]
    packs, points = tmp_path / "packs", tmp_path / "points"
    packs.mkdir()
    points.mkdir()
    (packs / "kanpack-n1x1-abc.json").write_text(json.dumps({"points": [a.id, b.id]}))
    rec = records.failure(a.to_json(), "failed", "a record written inside job 12")
    rec["launch"] = {"slurm": {"job_id": "12"}}
    records.write(points / f"{a.id}.json", rec)
    line = "12|RUNNING|rule_kanpack-n1x1-abc_measure_point|None|2026-12-06T01:00:01"
    assert set(slurm.parse_point_jobs(line, "packs", packs)) == {b.id}
    # a record of an earlier job does not count: the live pack measures the point again
    rec["launch"]["slurm"]["job_id"] = "7"
    records.write(points / f"{a.id}.json", rec)
    assert set(slurm.parse_point_jobs(line, "packs", packs)) == {a.id, b.id}


def test_points_of_one_allocation_take_turns(tmp_path, monkeypatch):
    """Two points started at once in one allocation run one after the other, in ledger order."""
    monkeypatch.setattr(slurm, "job_info", lambda job: {
        "SubmitTime": "2026-12-06T01:00:00", "EligibleTime": "2026-12-06T01:00:05",
        "StartTime": "2026-12-06T01:01:05", "Comment": "rule_kanpack-n1x1-abc_measure_point"})
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "kanpack-n1x1-abc.json").write_text(json.dumps({"points": ["a", "b"]}))
    spans, facts = {}, {}

    def point(pid):
        with allocation.Allocation("77", tmp_path / "attempts", tmp_path / "packs", pid) as alloc:
            t0 = time.monotonic()
            facts[pid] = alloc.facts()
            time.sleep(0.3)
            spans[pid] = (t0, time.monotonic())

    threads = [threading.Thread(target=point, args=(pid,)) for pid in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (first, second) = sorted(spans, key=lambda p: spans[p][0])
    assert spans[second][0] >= spans[first][1]  # no overlap
    assert facts[first]["pack_index"] == 0 and facts[second]["pack_index"] == 1
    f = facts[first]
    assert f["queue_wait_s"] == 60.0 and f["pack"] == "kanpack-n1x1-abc" and f["pack_points"] == 2
    assert f["job_id"] == "77"


def test_queue_wait_counted_once_a_job_apart_from_run_time():
    from scaling.tables import queue

    rows = pd.DataFrame([
        # a pack of three: every point carries its job's 60 s wait; only the first waited
        {"slurm_job_id": "1", "queue_wait_s": 60.0, "slurm_submit_unix": 1000.0, "pack": "kanpack-a", "job_wall_s": 5.0,
         "finished_utc": "1970-01-01T00:18:00+00:00"},
        {"slurm_job_id": "1", "queue_wait_s": 60.0, "slurm_submit_unix": 1000.0, "pack": "kanpack-a", "job_wall_s": 5.0,
         "finished_utc": "1970-01-01T00:18:10+00:00"},
        {"slurm_job_id": "1", "queue_wait_s": 60.0, "slurm_submit_unix": 1000.0, "pack": "kanpack-a", "job_wall_s": 5.0,
         "finished_utc": "1970-01-01T00:18:20+00:00"},
        {"slurm_job_id": "2", "queue_wait_s": 10.0, "slurm_submit_unix": 1001.0, "pack": None, "job_wall_s": 7.0,
         "finished_utc": "1970-01-01T00:17:00+00:00"},
        {"slurm_job_id": None, "queue_wait_s": None, "slurm_submit_unix": None, "pack": None, "job_wall_s": 3.0,
         "finished_utc": "1970-01-01T00:30:00+00:00"},  # a local point: no queue
    ])
    q = queue.summary(rows)
    assert q["jobs"] == 2 and q["points"] == 4 and q["packed"] == 3
    assert q["queue_total_s"] == 70.0 and q["queue_median_s"] == 35.0 and q["queue_longest_s"] == 60.0
    assert q["run_total_s"] == 22.0
    assert q["makespan_s"] == 18 * 60 + 20 - 1000.0
    words = queue.text(q)
    assert "2 Slurm allocations for 4 points (3 packed" in words and "queue wait 1 min 10 s in all" in words
    assert queue.summary(rows[rows["slurm_job_id"].isna()]) is None and queue.text(None) == ""


def test_only_one_node_cpu_points_inside_a_pack_are_forked_warm(tmp_path):
    from launch.main import Launch

    cfg = json.loads(json.dumps(BASE))
    cfg["device"] = "cpu"
    cfg = plan.validate_config(cfg)
    points = plan.build_points(cfg)
    one = next(p for p in points.values() if p.placement.nodes == 1)
    two = next(p for p in points.values() if p.placement.nodes == 2)
    launch = plan.launch_settings(cfg)

    def warm(point, facts, launch=launch):
        run = Launch(point, launch, tmp_path / "points" / f"{point.id}.json", "", {"SLURM_JOB_ID": "5"})
        run.slurm_facts = facts
        return run.warm_in_pack()

    packed = {"job_id": "5", "pack": "kanpack-n1x1-abc", "pack_index": 1}
    assert warm(one, packed)
    assert not warm(one, {**packed, "pack": None})  # a lone job: nothing to keep warm
    assert not warm(two, packed)  # its ranks are on two nodes
    assert not warm(one, packed, launch=dataclasses.replace(launch, warm_start=False))
    auto = dataclasses.replace(one, placement=dataclasses.replace(one.placement, device="cuda"))
    assert not warm(auto, packed)  # CUDA must not be initialised in a process that forks


def test_a_requeued_allocation_keeps_what_it_recorded(tmp_path, monkeypatch):
    """A requeued packed job runs every point of its pack again (the job step forces its targets): a
    point this job recorded ok keeps its record; one another job recorded, or a failed one, is
    measured as asked."""
    from launch import main as launch_main

    cfg = plan.validate_config(json.loads(json.dumps(BASE)))
    point = next(iter(plan.build_points(cfg).values()))
    out = tmp_path / "points" / f"{point.id}.json"
    on_disk = {"status": "ok", "launch": {"slurm": {"job_id": "5"}}}
    monkeypatch.setattr(launch_main.records, "read", lambda path, pid=None: on_disk)

    def kept(job):
        run = launch_main.Launch(point, plan.launch_settings(cfg), out, "", {"SLURM_JOB_ID": job})
        return run._measured_by_this_job()

    assert kept("5") and not kept("6")
    on_disk["status"] = "failed"
    assert not kept("5")
