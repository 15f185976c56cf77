"""training.cuda_graphs at plan time: an implementation whose training step cannot be captured as a
CUDA graph (kan/probes/capture.py) is refused, naming the config file, the key, the implementation and the
operator; kanscale's own KAN and the MLPs plan (they pass on every path, so they start no child);
your own factories are checked in the factory check's child process, so user code that exits there
is one error naming the model being checked."""

import copy
from pathlib import Path

import pytest
import yaml

import plan
from plan import factories

FIXTURES = Path(__file__).parents[1] / "fixtures"
NOT_CAPTURABLE = FIXTURES / "factory_not_capturable.py"


def study(impl: list[str], training: dict | None = None, **experiments) -> dict:
    return {"study": "captured", "device": "cuda", "repeats": 1,
            "model": {"impl": impl, "widths": [2, 8, 1], "grid_size": 5},
            "training": {"epochs": 1, "warmup_steps": 1, "max_steps": 4, **(training or {})},
            "experiments": {"strong": {"samples": 256, "global_batch": 32, "non_ddp_baseline": False,
                                       "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
                            "allreduce": {"enabled": False}, **experiments}}


def write(folder: Path, cfg: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_model_that_builds_a_tensor_in_its_forward_is_refused_naming_file_impl_and_operator(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{NOT_CAPTURABLE}:builds_a_tensor"
    path = write(tmp_path, study(["kanscale", "mlp", impl], training={"cuda_graphs": True}))
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(path)
    msg = str(e.value)
    assert "\n" not in msg, msg  # one problem: kanscale's KAN and the MLP pass
    assert msg.startswith(f"{path}: training.cuda_graphs: true, and model.impl {impl!r} cannot be captured as a "
                          f"CUDA graph: torch.tensor in the forward of 0 (Offsets)"), msg
    assert "a host-to-device copy" in msg and "registered buffer" in msg and "allowed: false" in msg


def test_the_same_study_without_cuda_graphs_plans(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{NOT_CAPTURABLE}:builds_a_tensor"
    cfg = plan.load_config(write(tmp_path, study(["kanscale", impl])))
    assert any(p.model.impl == impl for p in plan.build_points(cfg).values())


def test_kanscale_on_every_basis_and_the_mlps_plan_captured_without_a_child(tmp_path, monkeypatch):
    # they pass on every basis and kernel path (tests/unit/test_capture.py): no ~5 s child per plan
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(factories, "run_check", lambda *a, **k: pytest.fail("a child for the built-in models"))
    cfg = study(["kanscale", "mlp", "mlp_matched"], training={"cuda_graphs": True})
    cfg["model"]["basis"] = ["bspline", "rbf", "chebyshev"]
    cfg = plan.load_config(write(tmp_path, cfg))
    assert cfg["training"]["cuda_graphs"] is True and plan.build_points(cfg)


def test_the_ddp_experiments_captured_setting_is_the_key_blamed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{NOT_CAPTURABLE}:builds_a_tensor"
    cfg = study([impl], ddp={"topology": {"nodes": 1, "gpus_per_node": 2}, "cuda_graphs": [False, True]})
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(write(tmp_path, cfg))
    assert "experiments.ddp.cuda_graphs[1]: true, and model.impl" in str(e.value) and "torch.tensor" in str(e.value)


def test_user_code_that_exits_in_the_capture_check_is_one_error_naming_the_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{NOT_CAPTURABLE}:exits_in_backward"
    path = write(tmp_path, study([impl], training={"cuda_graphs": True}))
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(path)
    assert str(e.value) == (f"{path}: model.impl: {factories.CAPTURE_CHECK}: exited with code 3 at model.impl "
                            f"{impl!r}")


def test_a_snakemake_of_one_job_does_not_check_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{NOT_CAPTURABLE}:builds_a_tensor"
    monkeypatch.setitem(factories.BUILD, "enabled", False)
    cfg = plan.load_config(write(tmp_path, study([impl], training={"cuda_graphs": True})))
    assert cfg["training"]["cuda_graphs"] is True


def test_a_step_that_cannot_run_on_meta_plans_with_a_warning_not_a_refusal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{NOT_CAPTURABLE}:through_numpy"
    cfg = plan.load_config(write(tmp_path, study([impl], training={"cuda_graphs": True})))
    (line,) = [w for w in plan.config_warnings(cfg) if "CUDA-graph capture" in w]
    assert line.startswith(f"model.impl {impl!r}: CUDA-graph capture not checked: the training step cannot run on "
                           f"the meta device"), line


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the planner on a machine without CUDA")
def test_a_factory_that_needs_cuda_is_checked_on_meta_with_cuda_turned_into_meta(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{FIXTURES / 'factory_needs_cuda.py'}:build"
    seen = []
    real = factories.capture_checks
    monkeypatch.setattr(factories, "capture_checks", lambda models, t: seen.extend(real(models, t)) or seen)
    cfg = plan.load_config(write(tmp_path, study([impl], training={"cuda_graphs": True})))
    (r,) = seen
    assert r["pass"] is True, r  # its .cuda() and device="cuda" ran on meta
    assert not [w for w in plan.config_warnings(cfg) if "CUDA-graph capture" in w]


# a CPU study: training.cuda_graphs is refused there, at plan time (these lived in test_graphs.py,
# which the GPU check runs on a machine without jsonschema: the planner's tests stay here)
CFG = {"study": "g", "device": "cpu", "repeats": 1, "model": {"widths": [2, 16, 1], "grid_size": 5},
       "training": {"epochs": 1, "warmup_steps": 2, "max_steps": 12},
       "experiments": {"strong": {"samples": 2048, "batch_per_rank": 64,
                                  "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
                       "allreduce": {"enabled": False}}}


def test_a_cpu_study_with_cuda_graphs_is_refused_at_plan_time_naming_the_key():
    cfg = copy.deepcopy(CFG)
    cfg["training"]["cuda_graphs"] = True
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(copy.deepcopy(cfg), source="s.yaml")
    msg = str(e.value)
    assert msg.startswith("s.yaml: training.cuda_graphs: true ") and "device cpu" in msg and "allowed: false" in msg
    cfg["device"] = "auto"  # may find GPUs: the point decides when it runs
    pts = plan.build_points(plan.validate_config(copy.deepcopy(cfg)))
    assert all(p.train.cuda_graphs for p in pts.values() if p.experiment == "strong")
    # at its default the key leaves every id as it was
    plain = plan.build_points(plan.validate_config({**copy.deepcopy(CFG), "device": "auto"}))
    assert set(pts).isdisjoint(plain) and all("cuda_graphs" not in p.train.measured() for p in plain.values())


def test_the_ddp_experiments_graph_list_is_refused_on_cpu_too():
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["ddp"] = {"samples": 4096, "batch_per_rank": 64, "topology": {"nodes": 1, "gpus_per_node": 2},
                                 "cuda_graphs": [False, True]}
    with pytest.raises(plan.ConfigError, match=r"^s\.yaml: experiments\.ddp\.cuda_graphs\[1\]: true "):
        plan.validate_config(copy.deepcopy(cfg), source="s.yaml")
    cfg["device"] = "cuda"
    labels = sorted(p.train.ddp_label for p in plan.build_points(plan.validate_config(cfg)).values()
                    if p.experiment == "ddp")
    assert labels == ["none", "none graphs"]
