"""`make plan`'s printout: the summary and its cost first, one line per experiment x placement, the
per-point table only on request (plan.csv always has every point)."""

from types import SimpleNamespace

import pandas as pd
import pytest

import study
from plan import plan_summary

PAPER = "config/paper.yaml"


def plan_output(root, tmp_path, monkeypatch, capsys, *extra) -> list[str]:
    monkeypatch.chdir(tmp_path)  # results/<study>/plan.csv goes here, not into the checkout
    assert study.main(["plan", str(root / PAPER), *extra]) == 0
    return capsys.readouterr().out.splitlines()


def test_paper_plan_puts_its_cost_first_and_fits_a_screen(root, tmp_path, monkeypatch, capsys):
    out = plan_output(root, tmp_path, monkeypatch, capsys)
    # 285 points: one line each would push the summary off any screen
    assert len(out) <= 80, len(out)
    head = "\n".join(out[:20])
    assert "285 points, one job each; 0 records present (0 ok), 285 still to run" in out[0]
    assert "at most 444.0 GPU-hours (285.0 node-hours) if every job ran to its time limit" in head
    assert "with retries: 1 " in head and "at most 888.0 GPU-hours" in head
    assert "largest job: 4 nodes x 2 GPUs" in head and "allocations (resources.pack" in head
    # the cost is never stated as a bare request that reads as the bill
    assert "requested" not in "\n".join(out)
    groups = [line for line in out if line.startswith(("lr_tune ", "strong ", "allreduce "))]
    assert "lr_tune     1 node x 1 GPU        36  36 not submitted      30 min               18.0" in groups
    assert not any("mem_mb_per_node" in line for line in out)
    plan = pd.read_csv(tmp_path / "results" / "paper" / "plan.csv")
    assert len(plan) == 285 and list(plan.columns) == [
        "point", "experiment", "nodes", "gpus_per_node", "world_size", "tasks", "cpus_per_task", "mem_mb_per_node", "runtime_min",
        "runtime_from", "estimated_min", "gpu_hours", "node_hours", "state"]


def test_points_flag_prints_every_point_after_the_summary(root, tmp_path, monkeypatch, capsys):
    out = plan_output(root, tmp_path, monkeypatch, capsys, "--points")
    assert out[0].startswith("study paper") and "if every job ran to its time limit" in out[1]
    plan = pd.read_csv(tmp_path / "results" / "paper" / "plan.csv")
    text = "\n".join(out)
    assert all(pid in text for pid in plan["point"]) and len(out) > 285


def rows(*specs):
    """(experiment, nodes, gpus_per_node, runtime_min, state) -> plan rows, and stand-ins for their
    points (the summary reads only a point's ranks per node)."""
    out, ranks = [], {}
    for i, (exp, nodes, gpus, minutes, state) in enumerate(specs):
        out.append({"point": f"p{i}", "experiment": exp, "nodes": nodes, "gpus_per_node": gpus,
                    "runtime_min": minutes, "estimated_min": None, "state": state,
                    "gpu_hours": nodes * gpus * minutes / 60, "node_hours": nodes * minutes / 60})
        ranks[f"p{i}"] = SimpleNamespace(placement=SimpleNamespace(gpus_per_node=gpus))
    return out, ranks


def test_groups_sum_to_the_total_and_say_states_and_limits_in_words():
    rs, points = rows(("weak", 2, 4, 30, "ok"), ("weak", 2, 4, 60, "pending"), ("weak", 2, 4, 30, "not submitted"),
                      ("strong", 1, 1, 30, "failed"), ("weak", 1, 1, 30, "ok"))
    lines = plan_summary.group_lines(rs, points, gpus=True)
    assert lines[0].split() == ["experiment", "placement", "points", "states", "time", "limit", "GPU-hours", "at",
                                "most"]
    # experiments in the config's order (first seen), placements smallest first
    assert [line.split()[0] for line in lines[1:]] == ["weak", "weak", "strong"]
    assert "2 nodes x 4 GPUs" in lines[2] and "1 ok, 1 pending, 1 not submitted" in lines[2]
    assert "30-60 min" in lines[2] and lines[2].endswith("16.0")  # 8 GPUs x (0.5 + 1 + 0.5) h
    total = sum(float(line.split()[-1]) for line in lines[1:])
    assert total == pytest.approx(sum(r["gpu_hours"] for r in rs))


@pytest.mark.parametrize("nodes, ranks, gpus, words", [(1, 1, True, "1 node x 1 GPU"), (2, 4, True, "2 nodes x 4 GPUs"),
                                                       (1, 4, False, "1 node x 4 ranks")])
def test_placement_in_words(nodes, ranks, gpus, words):
    assert plan_summary.placement_words(nodes, ranks, gpus) == words


def test_retries_multiply_only_the_jobs_still_to_run():
    rs, _ = rows(("weak", 1, 2, 60, "ok"), ("weak", 1, 2, 60, "not submitted"))
    first, retried = plan_summary.cost_lines(rs, rs[1:], retries=2, profile="profiles/slurm", gpus=True)
    assert first == ("at most 4.0 GPU-hours (2.0 node-hours) if every job ran to its time limit; "
                     "the 1 still to run: at most 2.0 GPU-hours (1.0 node-hours)")
    assert "at most 6.0 GPU-hours" in retried and "ran 3 times" in retried
    assert "also the worst case" in plan_summary.cost_lines(rs, rs[1:], 0, "p", True)[1]


def _row(state="not submitted", est=None, world=2, minutes=30):
    return {"point": "p", "state": state, "estimated_min": est, "world_size": world, "nodes": 1,
            "gpus_per_node": world, "gpu_hours": world * minutes / 60, "node_hours": minutes / 60}


def test_the_expected_cost_names_its_source_and_never_covers_an_unmeasured_point():
    rows = [_row(est=60.0), _row(est=30.0, world=4), _row(), _row(state="ok", est=10.0)]
    lines = plan_summary.estimate_lines(rows, "RULE", ["results/seed_paper_import"], ["results/other"], True)
    # 2 ranks x 1 h + 4 ranks x 0.5 h: the ok point is done and costs nothing more
    assert lines[0].startswith("expected: about 4 GPU-hours for the 2 points still to run whose step was measured")
    assert "from results/seed_paper_import; rule: RULE" in lines[0]
    assert lines[1].startswith("the other 1 point still to run: no step measured like theirs") and "at most 1.0 GPU" in lines[1]
    assert lines[2].startswith("plan.estimate_from: results/other holds no records yet")
    none = plan_summary.estimate_lines([_row()], "RULE", [], [], False)
    assert none[0].startswith("1 point still to run: no step measured") and "at most 0.5 node-hours" in none[0]


def test_a_planned_auto_point_matches_the_records_of_the_device_the_study_asks_for():
    from kan.contract.point import Point
    from plan.runtimes import _step_key
    spec = {"study": "s", "experiment": "strong", "rep": 0,
            "model": {"impl": "pykan", "basis": "bspline", "widths": [2, 64, 1], "grid_size": 10, "spline_order": 3,
                      "grid_range": [-2.0, 2.0]},
            "train": {"samples": 10000, "epochs": 1, "batch_per_rank": 512},
            "placement": {"nodes": 1, "gpus_per_node": 2, "device": "auto", "threads_per_rank": 4}}
    planned = Point.from_json(spec)
    ran = Point.from_json({**spec, "placement": {**spec["placement"], "device": "cuda", "threads_per_rank": 1}})
    # on GPUs a rank's CPU threads do not set its step: the imported A100 runs estimate a GPU study's points
    assert _step_key(planned, "cuda") == _step_key(ran, "cuda")
    assert _step_key(planned, "cpu") != _step_key(ran, "cuda")
