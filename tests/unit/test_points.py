"""Points are built from config in one function; ids are unique, stable and change exactly when the
measurement changes; a point round-trips through JSON and the trainer's command line."""

import copy
import json

import pytest

import plan
from kan.contract import record as records
from kan.contract.point import Point, PointError, TrainConfig
from kan.train import parse

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


def points(cfg=None):
    return plan.build_points(plan.validate_config(copy.deepcopy(cfg or CFG)))


def find(pts, experiment, impl="kanscale", basis="bspline", nodes=1, gpus=1, rep=0, ddp=True, hidden=16):
    hits = [p for p in pts.values() if p.experiment == experiment and p.model.impl == impl
            and (impl == "mlp" or p.model.basis == basis) and p.placement.nodes == nodes
            and p.placement.gpus_per_node == gpus and p.rep == rep and p.train.ddp == ddp
            and (p.experiment == "allreduce" or p.model.widths[1] == hidden)]
    assert len(hits) == 1, [p.id for p in hits]
    return hits[0]


def test_counts_and_axes():
    pts = points()
    training = [p for p in pts.values() if p.experiment != "allreduce"]
    # combos: kanscale x {bspline, rbf} + mlp once = 3; placements: 2 strong + 1 strong non-DDP + 1 weak
    # + 1 weak non-DDP + 2 model_size = 7
    assert len(training) == 3 * 7 * 2
    assert {p.model.impl for p in training} == {"kanscale", "mlp"}
    assert {p.model.basis for p in training if p.model.impl == "mlp"} == {"bspline"}
    # allreduce: every distinct multi-rank placement of the training experiments, per repeat
    sweeps = sorted((p.placement.nodes, p.placement.gpus_per_node) for p in pts.values() if p.experiment == "allreduce")
    assert sweeps == [(1, 2), (1, 2), (1, 4), (1, 4), (2, 2), (2, 2)]


def test_batch_and_samples_rules():
    pts = points()
    s4 = find(pts, "strong", nodes=2, gpus=2)
    assert (s4.placement.world_size, s4.train.batch_per_rank, s4.train.samples) == (4, 16, 1000)
    base = find(pts, "strong", ddp=False)
    assert (base.placement.world_size, base.train.batch_per_rank) == (1, 64) and "_noddp-" in base.id
    w = find(pts, "weak", basis="rbf", gpus=4, rep=1)
    assert (w.train.samples, w.train.batch_per_rank) == (400, 10)
    m = find(pts, "model_size", impl="mlp", gpus=2, hidden=32)
    assert m.model.widths == (2, 32, 1)


def test_ids_unique_stable_and_adding_a_width_keeps_old_ids():
    a = points()
    assert list(a) == list(points())  # stable order and values
    assert all(pid == p.id for pid, p in a.items())
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["model_size"]["hidden_widths"].append(64)
    b = points(cfg)
    assert set(a) < set(b)
    assert {p.model.widths[1] for k, p in b.items() if k not in a} == {64}


def test_changing_what_is_measured_changes_the_id_and_launch_settings_do_not():
    a = points()
    cfg = copy.deepcopy(CFG)
    cfg["model"]["grid_size"] = 7
    b = points(cfg)
    changed = {k for k in a if a[k].experiment != "allreduce" and a[k].model.impl != "mlp"}
    assert not changed & set(b)  # every KAN point has a new id: old records are never overwritten
    assert {k for k in a if a[k].model.impl == "mlp"} <= set(b)  # a plain MLP has no grid
    cfg = copy.deepcopy(CFG)
    cfg["resources"] = {"runtime_min": 7, "mem_mb_per_rank": 1000}
    cfg["timeouts"] = {"pg_s": 99}
    assert list(points(cfg)) == list(a)


def test_json_and_command_line_round_trip():
    for p in points().values():
        assert Point.from_json(json.loads(json.dumps(p.to_json()))) == p
        back, _ = parse([*p.to_argv(), "--out=x.json"])
        assert back == p and back.id == p.id


def test_an_integer_for_a_float_key_gives_the_id_the_trainer_rebuilds():
    """YAML reads `lr: 1` and `step_tolerance_pct: 2` as integers, the trainer's flags as floats: one
    value, one id, or the trainer's record would be refused as another point's."""
    cfg = {**CFG, "training": {"lr": 1, "step_tolerance_pct": 2}}
    for p in points(cfg).values():
        back, _ = parse([*p.to_argv(), "--out=x.json"])
        assert back.id == p.id
        if p.experiment != "allreduce":
            assert p.train.lr == 1.0 and isinstance(p.train.lr, float)


def test_step_time_points_are_the_scaling_experiments_only():
    """training.step_tolerance_pct reaches strong, weak, comm and model-size points; the batch
    experiment measures steps to a target and trains its whole work."""
    cfg = {**CFG, "training": {"step_tolerance_pct": 2, "eval_every_samples": 500},
           "report": {"target": {"metric": "val_loss", "from_reference": 1.1}},
           "experiments": {**CFG["experiments"], "batch": {"global_batches": [32, 64, 128], "samples": 1000}}}
    tol = {p.experiment: p.train.step_tolerance_pct for p in points(cfg).values()}
    assert tol == {"strong": 2.0, "weak": 2.0, "model_size": 2.0, "batch": 0.0, "allreduce": 0.0}
    plain = {p.id for p in points().values()}
    assert plain.isdisjoint(p.id for p in points(cfg).values() if p.experiment not in ("batch", "allreduce"))


def test_point_validates_itself():
    with pytest.raises(PointError, match="training.batch_per_rank: 600 is more than the 500"):
        Point(train=TrainConfig(samples=1000, batch_per_rank=600), placement=Point().placement.__class__(
            gpus_per_node=2))
    with pytest.raises(PointError, match="must be an integer, got 2.0"):
        TrainConfig(epochs=2.0)
    with pytest.raises(PointError, match="unknown point field"):
        Point.from_json({**Point().to_json(), "grid": 3})


def test_launch_settings_and_geometry():
    from kan.contract import geometry

    cfg = plan.validate_config(copy.deepcopy({**CFG, "resources": {"runtime_min": 7, "mem_mb_per_rank": 1000,
                                                                    "cpus_per_rank": 3}}))
    launch = plan.launch_settings(cfg)
    p = find(plan.build_points(cfg), "strong", nodes=2, gpus=2)
    assert (launch.runtime_min, geometry.mem_mb_per_node(p, launch), geometry.cpus_per_task(p, launch)) == (7, 2000, 6)
    assert geometry.slurm_extra(p, launch) == "--ntasks-per-node=1 --exclusive"
    assert geometry.gres(p, launch) == "gpu:2"


def _ok_record(pid: str, token: str = "") -> dict:
    return {"record_version": records.RECORD_VERSION, "status": "ok", "point": {"id": pid},
            "finished_utc": "2026-12-01T00:00:00+00:00", "world_size": 1, "ranks": [{}],
            "timing": {"step_time_s": 0.01, "train_time_s": 1.0, "num_steps": 10},
            "throughput": {"samples_per_s": 100.0}, "model": {"num_params": 10}, "memory": {"peak_bytes": 100},
            "loss": {"final_train": 0.1, "curve": [{"step": 10}]}, "launch": {"retry_token": token}}


def test_retry_token(tmp_path):
    rec = tmp_path / "p.json"
    assert plan.retry_token(rec, rerun_failed=True) == ""  # no record yet
    records.write(rec, _ok_record("p"))
    assert plan.retry_token(rec, rerun_failed=True) == ""  # finished: never re-runs
    failed = records.failure({"id": "p"}, "timeout", "too slow")
    failed["launch"] = {"attempt": "A1", "retry_token": ""}
    records.write(rec, failed)
    tok = plan.retry_token(rec, rerun_failed=True)
    assert tok.startswith("retry-after-timeout") and "A1" in tok
    assert plan.retry_token(rec, rerun_failed=False) == ""
    records.write(rec, _ok_record("p", tok))  # the re-run succeeded with that token: stable from now on
    assert plan.retry_token(rec, rerun_failed=True) == tok


@pytest.mark.parametrize("content", ["", '{"status": "ok", "point": {"id": "p"', '{"status": "ok"}', "[1, 2]"])
def test_retry_token_reruns_invalid_records(tmp_path, content):
    rec = tmp_path / "p.json"
    rec.write_text(content)
    tok = plan.retry_token(rec, rerun_failed=True)
    assert tok.startswith("retry-after-corrupt-")
    rec.write_text(content + " ")
    assert plan.retry_token(rec, rerun_failed=True) != tok  # a different file: a different token, so it runs again
