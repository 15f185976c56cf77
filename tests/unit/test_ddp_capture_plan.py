"""Only what can be captured is planned: in a device: cuda study (planning needs no GPU) the ddp
experiment's lists crossing a comm hook that cannot run under CUDA-graph capture (PowerSGD; any
hook no CUDA test has shown capture-safe) with cuda_graphs true plan no such point, `make plan`
says which combinations were left out and why, and a study asking only for them is refused
naming both keys."""

import copy

import pytest
import yaml

import plan
import study
from plan import plan_summary

CFG = {"study": "cap", "device": "cuda", "repeats": 1, "model": {"widths": [2, 16, 1], "grid_size": 5},
       "training": {"epochs": 1, "warmup_steps": 2, "max_steps": 12},
       "experiments": {"strong": {"samples": 2048, "batch_per_rank": 64,
                                  "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
                       "ddp": {"samples": 4096, "batch_per_rank": 64, "topology": {"nodes": 1, "gpus_per_node": 2},
                               "comm_hook": ["none", "powersgd"], "cuda_graphs": [False, True]},
                       "allreduce": {"enabled": False}}}


def ddp_labels(cfg: dict) -> list[str]:
    pts = plan.build_points(plan.validate_config(copy.deepcopy(cfg)))
    return sorted(p.train.ddp_label for p in pts.values() if p.experiment == "ddp")


def test_powersgd_crossed_with_graphs_is_not_planned_and_the_plan_says_why(tmp_path, monkeypatch, capsys):
    assert ddp_labels(CFG) == ["none", "none graphs", "powersgd-rank1"]
    left = plan.ddp_left_out(plan.validate_config(copy.deepcopy(CFG)))
    assert [(s["comm_hook"], s["cuda_graphs"]) for s, _ in left] == [("powersgd", True)]
    assert "synchronises the device" in left[0][1]

    path = tmp_path / "cap.yaml"
    path.write_text(yaml.safe_dump(CFG))
    monkeypatch.chdir(tmp_path)  # results/<study>/plan.csv goes here
    assert study.main(["plan", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    said = [line for line in out if line.startswith("left out")]
    assert said == ["left out of experiments.ddp: 1 setting with comm_hook powersgd and cuda_graphs true, which "
                    "cannot run under CUDA-graph capture: PowerSGD synchronises the device inside its hook (illegal "
                    "while capturing) and keeps per-bucket error state in Python that a replay would freeze"]
    # the line comes with the summary, before the per-placement table
    assert out.index(said[0]) < next(i for i, line in enumerate(out) if line.startswith("experiment "))


def test_hooks_not_shown_capture_safe_are_left_out_too_one_line_per_reason():
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"]["comm_hook"] = ["none", "fp16", "bf16", "powersgd"]
    cfg["experiments"]["ddp"]["bucket_cap_mb"] = [25, 1]
    assert ddp_labels(cfg) == sorted(
        [f"{h}{b}" for h in ("none", "fp16", "bf16", "powersgd-rank1") for b in ("", " bucket-1")]
        + ["none graphs", "none bucket-1 graphs"])
    lines = plan_summary.left_out_lines(plan.ddp_left_out(plan.validate_config(cfg)))
    assert len(lines) == 2
    assert lines[0].startswith("left out of experiments.ddp: 4 settings with comm_hook fp16, bf16 and cuda_graphs true")
    assert lines[0].endswith("no CUDA test has shown the hook runs inside a captured step")
    assert lines[1].startswith("left out of experiments.ddp: 2 settings with comm_hook powersgd and")


def test_a_plan_without_graphs_leaves_nothing_out():
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"]["cuda_graphs"] = [False]
    assert plan.ddp_left_out(plan.validate_config(cfg)) == []
    assert plan_summary.left_out_lines([]) == []


@pytest.mark.parametrize("hooks", [["powersgd"], ["fp16", "powersgd"]])
def test_a_study_asking_only_for_captured_hooks_is_refused_naming_both_keys(hooks):
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"].update(comm_hook=hooks, cuda_graphs=[True])
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="s.yaml")
    msg = str(e.value)
    assert msg.startswith(f"s.yaml: experiments.ddp.comm_hook: [{', '.join(hooks)}] with experiments.ddp.cuda_graphs "
                          "[true] asks only for settings that cannot run under CUDA-graph capture")
    assert "PowerSGD synchronises the device" in msg
