"""Points are built from config in one function; ids are unique and stable."""

import copy
import json

import plan

CFG = {
    "study": "s",
    "repeats": 2,
    "model": {"impl": ["kanscale", "mlp"], "basis": ["bspline", "rbf"], "widths": [2, 16, 1]},
    "experiments": {
        "strong": {"samples": 1000, "global_batch": 64,
                   "topologies": [{"nodes": 1, "gpus_per_node": 1}, {"nodes": 2, "gpus_per_node": 2}]},
        "weak": {"samples_per_rank": 100, "batch_per_rank": 10, "topologies": [{"nodes": 1, "gpus_per_node": 4}]},
        "model_size": {"hidden_widths": [8, 32], "topology": {"nodes": 1, "gpus_per_node": 2}},
    },
}


def points():
    return plan.build_points(plan.validate_config(copy.deepcopy(CFG)))


def test_counts_and_axes():
    pts = points()
    # combos: kanscale x {bspline, rbf} + mlp once = 3; experiments: 2 strong + 1 weak + 2 model_size = 5 placements
    assert len(pts) == 3 * 5 * 2
    assert {p["impl"] for p in pts.values()} == {"kanscale", "mlp"}
    assert {p["basis"] for p in pts.values() if p["impl"] == "mlp"} == {"bspline"}


def test_batch_and_samples_rules():
    pts = points()
    s4 = pts[plan.point_id("strong", "kanscale", "bspline", [2, 16, 1], 2, 2, 0)]
    assert (s4["world_size"], s4["batch_per_rank"], s4["global_batch"], s4["samples"]) == (4, 16, 64, 1000)
    w = pts[plan.point_id("weak", "kanscale", "rbf", [2, 16, 1], 1, 4, 1)]
    assert (w["samples"], w["batch_per_rank"], w["global_batch"]) == (400, 10, 40)
    m = pts[plan.point_id("model_size", "mlp", "bspline", [2, 32, 1], 1, 2, 0)]
    assert m["widths"] == [2, 32, 1] and m["hidden_width"] == 32


def test_resources_derived_from_point():
    cfg = copy.deepcopy(CFG)
    cfg["resources"] = {"runtime_min": 7, "mem_mb_per_rank": 1000, "cpus_per_rank": 3}
    pts = plan.build_points(plan.validate_config(cfg))
    p = pts[plan.point_id("strong", "kanscale", "bspline", [2, 16, 1], 2, 2, 0)]
    assert (p["runtime_min"], p["mem_mb"], p["cpus_per_task"]) == (7, 2000, 6)


def test_ids_unique_stable_and_adding_a_width_keeps_old_ids():
    a = points()
    assert list(a) == list(points())  # stable order
    assert all(pid == p["id"] for pid, p in a.items())
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["model_size"]["hidden_widths"].append(64)
    b = plan.build_points(plan.validate_config(cfg))
    assert set(a) < set(b)
    assert all(a[k] == b[k] for k in a)
    assert {p["hidden_width"] for k, p in b.items() if k not in a} == {64}


def test_retry_token(tmp_path):
    rec = tmp_path / "p.json"
    assert plan.retry_token(rec) == ""  # no record yet
    rec.write_text(json.dumps({"status": "ok", "point": {"retry_token": ""}}))
    assert plan.retry_token(rec) == ""  # finished: never re-runs
    rec.write_text(json.dumps({"status": "timeout", "point": {"retry_token": ""}, "finished_utc": "T1"}))
    tok = plan.retry_token(rec)
    assert tok.startswith("retry-after-timeout") and "T1" in tok
    assert plan.retry_token(rec, rerun_failed=False) == ""
    # the re-run succeeded and stored the token it ran with: stable from now on
    rec.write_text(json.dumps({"status": "ok", "point": {"retry_token": tok}}))
    assert plan.retry_token(rec) == tok
