"""The ddp experiment in the plan: every combination of its lists is a point with its own id, the
settings reach the trainer's flags and come back as the same point (same id), defaults leave the
ids of every other point alone, and the schema names a bad value's key."""

import copy

import pytest

import plan
from kan.contract.point import Point, PointError, TrainConfig
from kan.train import parse

CFG = {"study": "d", "device": "cpu", "repeats": 1, "model": {"widths": [2, 16, 1], "grid_size": 5},
       "training": {"epochs": 1, "warmup_steps": 2, "max_steps": 12},
       "experiments": {"ddp": {"samples": 4096, "batch_per_rank": 64, "topology": {"nodes": 1, "gpus_per_node": 2},
                               "comm_hook": ["none", "fp16", "powersgd"], "bucket_cap_mb": [25, 1],
                               "static_graph": [False, True], "powersgd_rank": 2},
                       "allreduce": {"enabled": False}}}


def points(cfg=CFG):
    return plan.build_points(plan.validate_config(copy.deepcopy(cfg)))


def test_every_combination_is_a_point_that_the_trainer_rebuilds_with_its_id():
    pts = points()
    assert len(pts) == 3 * 2 * 2 and len({p.id for p in pts.values()}) == 12
    for pid, p in pts.items():
        assert p.experiment == "ddp"
        rebuilt, _ = parse([*p.to_argv(), "--out=x.json"])  # YAML's 25 is an int, the flag a float
        assert rebuilt.id == pid
    labels = sorted(p.train.ddp_label for p in pts.values())
    assert "powersgd-rank2 bucket-1 static" in labels and "none" in labels and "fp16 static" in labels


def test_defaults_leave_other_ids_alone_and_powersgd_fields_count_only_with_powersgd():
    t = TrainConfig(samples=1024, batch_per_rank=32, epochs=1, warmup_steps=1)
    assert "comm_hook" not in t.measured() and t.ddp_label == "none"
    a = Point(train=TrainConfig(samples=1024, batch_per_rank=32, epochs=1, warmup_steps=1, powersgd_rank=4))
    assert a.id == Point(train=t).id  # a PowerSGD rank without the PowerSGD hook changes nothing measured
    b = Point(train=TrainConfig(samples=1024, batch_per_rank=32, epochs=1, warmup_steps=1, comm_hook="powersgd",
                                powersgd_rank=4))
    assert b.id != a.id and b.train.measured()["powersgd_rank"] == 4
    with pytest.raises(PointError, match="training.comm_hook"):
        TrainConfig(samples=1024, batch_per_rank=32, epochs=1, warmup_steps=1, ddp=False, comm_hook="fp16")


def test_the_ddp_topology_gets_its_all_reduce_sweep():
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["allreduce"] = {"sizes_bytes": [4096, 65536]}
    assert {(p.placement.nodes, p.placement.gpus_per_node) for p in points(cfg).values()
            if p.experiment == "allreduce"} == {(1, 2)}


@pytest.mark.parametrize("key,value,words", [("comm_hook", ["none", "int8"], "experiments.ddp.comm_hook[1]"),
                                            ("nccl_algo", ["Ring", "Star"], "experiments.ddp.nccl_algo[1]"),
                                            ("powersgd_start_iter", 1, "experiments.ddp.powersgd_start_iter")])
def test_a_bad_setting_names_its_key(key, value, words):
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"][key] = value
    with pytest.raises(plan.ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        points(cfg)


def test_the_baseline_is_measured_even_when_the_lists_leave_it_out():
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"].update(comm_hook=["fp16"], bucket_cap_mb=[1], static_graph=[True])
    labels = [p.train.ddp_label for p in points(cfg).values()]
    assert sorted(labels) == ["fp16 bucket-1 static", "none"]


@pytest.mark.parametrize("key,value,where,words", [
    ("comm_hook", ["none", "bf16"], "experiments.ddp.comm_hook[1]", "bf16 needs NCCL"),
    ("nccl_algo", ["", "Ring"], "experiments.ddp.nccl_algo[1]", "'Ring' is NCCL's algorithm"),
])
def test_a_setting_only_nccl_runs_is_refused_at_plan_time_in_a_cpu_study(key, value, where, words):
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"][key] = value
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(copy.deepcopy(cfg), source="s.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"s.yaml: {where}: ") and words in msg and "device cpu" in msg, msg
    cfg["device"] = "auto"  # may find GPUs: the point decides when it runs
    assert points(cfg)


@pytest.mark.parametrize("patch,where,words", [
    ({"ddp": {"topology": {"nodes": 1, "gpus_per_node": 1}}}, "experiments.ddp.topology", "one rank sends none"),
    ({"ddp": {"comm_hook": ["none"], "bucket_cap_mb": [25], "static_graph": [False]}}, "experiments.ddp",
     "nothing to compare with them"),
    ({"allreduce": {"enabled": True, "topologies": [{"nodes": 1, "gpus_per_node": 2}, {"nodes": 1, "gpus_per_node": 1}]}},
     "experiments.allreduce.topologies[1]", "an all-reduce of one rank moves nothing"),
])
def test_a_comparison_that_cannot_measure_what_it_compares_is_refused_at_plan_time(patch, where, words):
    cfg = copy.deepcopy(CFG)
    for name, over in patch.items():
        cfg["experiments"][name] = {**cfg["experiments"][name], **over}
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="s.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"s.yaml: {where}: ") and words in msg, msg
