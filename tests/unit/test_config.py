"""Config validation: defaults filled, and every bad input names its key and what is allowed."""

import copy

import pytest
import yaml

import plan

MINIMAL = {"experiments": {"strong": {"global_batch": 64, "topologies": [{"nodes": 1, "gpus_per_node": 2}]}}}


def test_defaults_filled():
    cfg = plan.validate_config(copy.deepcopy(MINIMAL))
    assert cfg["model"]["impl"] == ["kanscale"]
    assert cfg["model"]["grid_size"] == 10
    assert cfg["training"]["epochs"] == 40
    assert cfg["timeouts"]["rdzv_join_s"] == 60
    assert cfg["experiments"]["strong"]["samples"] == 100000
    assert cfg["experiments"]["strong"]["enabled"] is True


@pytest.mark.parametrize(
    "patch, key, allowed",
    [
        ({"launcher": "mpirun"}, "launcher", "'torchrun', 'srun'"),
        ({"model": {"basis": ["fourier"]}}, "model.basis[0]", "'bspline', 'rbf', 'chebyshev'"),
        ({"model": {"impl": ["pykan2"]}}, "model.impl[0]", "'kanscale', 'mlp', 'mlp_matched'"),
        ({"devcie": "cpu"}, "<top level>", "allowed keys:"),
        ({"training": {"epochs": 0}}, "training.epochs", "minimum of 1"),
        ({"training": {"comm_probe_every": 1}}, "training.comm_probe_every", "not allowed"),
        ({"experiments": {"strong": {"global_batch": 64, "topologies": [{"nodes": 0, "gpus_per_node": 1}]}}},
         "experiments.strong.topologies[0].nodes", "minimum of 1"),
        ({"experiments": {"weak": {"batch_per_rank": 8}}}, "experiments.weak", "'topologies' is a required property"),
        ({"device": "tpu"}, "device", "'auto', 'cpu', 'cuda'"),
        ({"study": "my study"}, "study", "does not match"),
    ],
)
def test_bad_config_names_key_and_allowed(patch, key, allowed):
    cfg = copy.deepcopy(MINIMAL)
    for k, v in patch.items():
        cfg[k] = v
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="config/x.yaml")
    msg = str(e.value)
    assert msg.startswith("config/x.yaml:"), msg
    assert f"{key}:" in msg, msg
    assert allowed in msg, msg


def test_strong_needs_exactly_one_batch_kind():
    cfg = copy.deepcopy(MINIMAL)
    cfg["experiments"]["strong"]["batch_per_rank"] = 32
    with pytest.raises(plan.ConfigError, match="experiments.strong: give exactly one of global_batch"):
        plan.validate_config(cfg)


def test_global_batch_divisible_by_world():
    cfg = copy.deepcopy(MINIMAL)
    cfg["experiments"]["strong"]["global_batch"] = 63
    with pytest.raises(plan.ConfigError, match=r"global_batch: 63 is not divisible by the world size 2"):
        plan.validate_config(cfg)


def test_no_experiment_enabled():
    cfg = {"experiments": {"strong": {"enabled": False, "global_batch": 64,
                                      "topologies": [{"nodes": 1, "gpus_per_node": 1}]}}}
    with pytest.raises(plan.ConfigError, match="no experiment enabled"):
        plan.validate_config(cfg)


def test_load_config_names_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(plan.ConfigError, match=str(bad)):
        plan.load_config(bad)
    with pytest.raises(plan.ConfigError, match="config file not found"):
        plan.load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", ["config.yaml", "local.yaml", "paper.yaml"])
def test_shipped_configs_are_valid(root, name):
    cfg = plan.load_config(root / "config" / name)
    assert plan.build_points(cfg)


def test_paper_config_matches_the_paper(root):
    """config/paper.yaml describes the seed paper's points (DESIGN.md section 6)."""
    cfg = plan.load_config(root / "config" / "paper.yaml")
    pts = [p for p in plan.build_points(cfg).values() if p["rep"] == 0]
    strong = sorted((p["nodes"], p["gpus_per_node"]) for p in pts if p["experiment"] == "strong")
    assert {p["world_size"] for p in pts if p["experiment"] == "strong"} == {1, 2, 4, 8}
    assert (1, 1) in strong and (4, 2) in strong
    assert all(p["batch_per_rank"] == 512 and p["samples"] == 100000 and p["epochs"] == 40
               for p in pts if p["experiment"] == "strong")
    assert all(p["samples"] == 25000 * p["world_size"] for p in pts if p["experiment"] == "weak")
    ms = [p for p in pts if p["experiment"] == "model_size"]
    assert sorted(p["hidden_width"] for p in ms) == [32, 64, 128, 256]
    assert all((p["nodes"], p["gpus_per_node"]) == (2, 2) and p["samples"] == 50000 for p in ms)
    assert all(p["grid_size"] == 10 and p["spline_order"] == 3 for p in pts)


def test_tiny_test_config_valid(root):
    cfg = yaml.safe_load((root / "tests" / "configs" / "tiny.yaml").read_text())
    plan.validate_config(cfg)
