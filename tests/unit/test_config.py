"""Config validation: defaults filled, and every bad input gets one line naming the file (or
--config) and the key; the schema and kan.config's dataclasses agree on defaults and bounds."""

import copy
import dataclasses

import pytest
import yaml

import plan
from kan.config import Point

MINIMAL = {"experiments": {"strong": {"global_batch": 64, "topologies": [{"nodes": 1, "gpus_per_node": 2}]}}}


def test_defaults_filled():
    cfg = plan.validate_config(copy.deepcopy(MINIMAL))
    assert cfg["model"]["impl"] == ["kanscale"]
    assert cfg["model"]["grid_size"] == 10
    assert cfg["training"]["epochs"] == 40
    assert cfg["timeouts"]["rdzv_join_s"] == 60
    assert cfg["experiments"]["strong"]["samples"] == 100000
    assert cfg["experiments"]["strong"]["enabled"] is True
    assert cfg["experiments"]["strong"]["non_ddp_baseline"] is True
    assert cfg["resources"]["exclusive"] is True


def _strong(**over):
    return {"experiments": {"strong": {"samples": 1000, "global_batch": 64,
                                       "topologies": [{"nodes": 1, "gpus_per_node": 2}], **over}}}


# (patch merged into MINIMAL, key the one-line message must name, text it must contain)
BAD = [
    ({"launcher": "mpirun"}, "launcher", "'torchrun', 'srun'"),
    ({"model": {"basis": ["fourier"]}}, "model.basis[0]", "'bspline', 'rbf', 'chebyshev'"),
    ({"model": {"impl": ["pykan2"]}}, "model.impl[0]", "'kanscale', 'mlp', 'mlp_matched'"),
    ({"model": {"impl": ["pykan"], "basis": ["rbf"]}}, "model.basis", "allowed for pykan: 'bspline'"),
    ({"devcie": "cpu"}, "<top level>", "allowed keys:"),
    ({"training": {"epochs": 0}}, "training.epochs", "minimum of 1"),
    ({"training": {"comm_probe_every": 1}}, "training.comm_probe_every", "not allowed"),
    (_strong(topologies=[{"nodes": 0, "gpus_per_node": 1}]), "experiments.strong.topologies[0].nodes", "minimum of 1"),
    ({"experiments": {"weak": {"batch_per_rank": 8}}}, "experiments.weak", "'topologies' is a required property"),
    ({"device": "tpu"}, "device", "'auto', 'cpu', 'cuda'"),
    ({"study": "my study"}, "study", "does not match"),
    ({"model": {"grid_size": 10.0}}, "model.grid_size", "not an integer"),
    ({"repeats": 2.5}, "repeats", "not an integer"),
    ({"training": {"lr": float("nan")}}, "training.lr", "not a finite number"),
    ({"training": {"noise": float("inf")}}, "training.noise", "not a finite number"),
    ({"model": {"grid_range": [float("-inf"), 2.0]}}, "model.grid_range[0]", "not a finite number"),
    ({"training": {"seed": 2**63}}, "training.seed", "maximum"),
    ({"training": {"seed": -1}}, "training.seed", "minimum"),
    (_strong(topologies=[{"nodes": 100000, "gpus_per_node": 1}], global_batch=100000, samples=10**6),
     "experiments.strong.topologies[0].nodes", "limits.max_nodes"),
    ({"model": {"widths": [2, 10000000, 1]}}, "model.widths[1]", "limits.max_width"),
    (_strong(samples=100, global_batch=512, topologies=[{"nodes": 1, "gpus_per_node": 1}]),
     "experiments.strong (1x1)", "more than the 100 samples per rank"),
    (_strong(samples=3, global_batch=4, topologies=[{"nodes": 1, "gpus_per_node": 4}], non_ddp_baseline=False),
     "experiments.strong (1x4)", "3 samples cannot feed 4 ranks"),
    (_strong(topologies=[{"nodes": 1, "gpus_per_node": 2}, {"nodes": 1, "gpus_per_node": 2}]),
     "experiments.strong.topologies[1]", "same placement as topologies[0]"),
    ({"model": {"widths": [2, 16, 2]}}, "model.widths", "1 target"),
    ({"model": {"widths": [2, 1]}}, "model.widths", "is too short"),
    ({**_strong(samples=256, global_batch=64), "training": {"warmup_steps": 1000, "epochs": 1}},
     "experiments.strong (1x2)", "no timed step would remain"),
    ({"experiments": {**MINIMAL["experiments"], "model_size": {"hidden_widths": [8, 70000]}}},
     "experiments.model_size.hidden_widths[1]", "limits.max_width"),
    ({"repeats": 0}, "repeats", "minimum of 1"),
    (_strong(batch_per_rank=32), "experiments.strong", "give exactly one of global_batch"),
    (_strong(global_batch=63), "experiments.strong.global_batch", "not divisible by the world size 2"),
    ({"model": {"grid_range": [2.0, -2.0]}}, "model.grid_range", "hi > lo"),
    ({"resources": {"runtime_min": 0}}, "resources.runtime_min", "minimum of 1"),
    ({"gpu_type": "a100;rm"}, "gpu_type", "does not match"),
    ({"experiments": {**MINIMAL["experiments"], "allreduce": {"sizes_bytes": [4096, 1001]}}},
     "experiments.allreduce.sizes_bytes[1]", "multiple of 4"),
    ({"limits": {"max_width": 0}}, "limits.max_width", "minimum of 1"),
    ({"experiments": {"strong": {"enabled": False, "global_batch": 64,
                                 "topologies": [{"nodes": 1, "gpus_per_node": 1}]}}}, "experiments",
     "no training experiment enabled"),
]


@pytest.mark.parametrize("patch, key, text", BAD, ids=[b[1] for b in BAD])
def test_bad_config_one_line_naming_file_and_key(patch, key, text):
    cfg = copy.deepcopy(MINIMAL)
    cfg.update(copy.deepcopy(patch))
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="config/x.yaml")
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"config/x.yaml: {key}:"), msg
    assert text in msg, msg


def test_values_from_the_command_line_are_blamed_on_it():
    cfg = copy.deepcopy(MINIMAL)
    cfg["training"] = {"epochs": 0}
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="config/x.yaml", overrides={"training": {"epochs": 0}})
    assert str(e.value).startswith("--config: training.epochs:"), e.value
    cfg = copy.deepcopy(MINIMAL)
    cfg["model"] = {"grid_size": 0}
    with pytest.raises(plan.ConfigError) as e:  # a file value with an unrelated --config value
        plan.validate_config(cfg, source="config/x.yaml", overrides={"study": "other"})
    assert str(e.value).startswith("config/x.yaml: model.grid_size:"), e.value


@pytest.mark.parametrize("text, problem", [
    ("", "the config file is empty"),
    ("- strong\n- weak\n", "must be a mapping of keys"),
    ("3\n", "must be a mapping of keys"),
    ("model: [unclosed\n", "not valid YAML"),
    ("study: a\nstudy: b\n", "duplicate key 'study'"),
    ("model:\n  grid_size: 5\n  grid_size: 6\n", "duplicate key 'grid_size'"),
])
def test_bad_files_are_named(tmp_path, text, problem):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}:") and problem in msg and "\n" not in msg, msg


def test_missing_file_is_named(tmp_path):
    with pytest.raises(plan.ConfigError, match="missing.yaml: config file not found"):
        plan.load_config(tmp_path / "missing.yaml")


def test_several_problems_are_listed_one_per_line():
    cfg = copy.deepcopy(MINIMAL)
    cfg.update({"launcher": "mpirun", "device": "tpu"})
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="c.yaml")
    lines = str(e.value).splitlines()
    assert lines[0] == "2 problems in the study config:"
    assert [ln.strip().split(":")[1].strip() for ln in lines[1:]] == ["device", "launcher"]


def _schema_node(schema: dict, key: str) -> dict:
    node = schema
    for part in key.split("."):
        node = node["properties"][part]
    return node


def test_schema_and_point_dataclasses_agree(root):
    """Every config key that lands in a Point field has the field's default and bounds."""
    schema = plan.load_schema()
    for key, (cls, name) in plan.CONFIG_FIELDS.items():
        node = _schema_node(schema, key)
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        if key == "resources.runtime_min":  # null = the dataclass default, or derived (plan.derive_runtime)
            assert node.get("default") is None
        else:
            assert node.get("default") == default, (key, node.get("default"), default)
        meta = f.metadata
        items = node.get("items", node) if isinstance(default, list) else node
        if meta.get("lo") is not None:
            assert items.get("minimum") == meta["lo"], (key, items.get("minimum"), meta["lo"])
        if meta.get("gt") is not None:
            assert items.get("exclusiveMinimum") == meta["gt"], key
        if meta.get("hi") is not None:
            assert items.get("maximum") == meta["hi"], (key, items.get("maximum"), meta["hi"])
        if meta.get("choices"):
            assert tuple(items["enum"]) == meta["choices"], key


def test_impl_and_basis_choices_agree():
    from kan.config import BASES, IMPLS

    schema = plan.load_schema()
    assert tuple(_schema_node(schema, "model.impl")["items"]["enum"]) == IMPLS
    assert tuple(_schema_node(schema, "model.basis")["items"]["enum"]) == BASES
    assert Point().model.grid_size == _schema_node(schema, "model.grid_size")["default"]


@pytest.mark.parametrize("name", ["config.yaml", "local.yaml", "paper.yaml"])
def test_shipped_configs_are_valid(root, name):
    cfg = plan.load_config(root / "config" / name)
    assert plan.build_points(cfg)


def test_paper_config_matches_the_paper(root):
    """config/paper.yaml describes the seed paper's points (DESIGN.md section 6)."""
    cfg = plan.load_config(root / "config" / "paper.yaml")
    pts = [p for p in plan.build_points(cfg).values() if p.rep == 0 and p.experiment != "allreduce"]
    strong = [p for p in pts if p.experiment == "strong" and p.train.ddp]
    assert {p.placement.world_size for p in strong} == {1, 2, 4, 8}
    assert {(p.placement.nodes, p.placement.gpus_per_node) for p in strong} >= {(1, 1), (4, 2)}
    assert all(p.train.batch_per_rank == 512 and p.train.samples == 100000 and p.train.epochs == 40 for p in strong)
    assert all(p.train.samples == 25000 * p.placement.world_size for p in pts if p.experiment == "weak")
    ms = [p for p in pts if p.experiment == "model_size"]
    assert {p.model.impl for p in pts} == {"pykan", "kanscale", "mlp_matched"}  # the paper's, ours, an MLP
    assert sorted(p.model.widths[1] for p in ms if p.model.impl == "pykan") == [32, 64, 128, 256]
    assert all((p.placement.nodes, p.placement.gpus_per_node) == (2, 2) and p.train.samples == 50000 for p in ms)
    assert all(p.model.grid_size == 10 and p.model.spline_order == 3 for p in pts)


def test_pykan_beside_other_bases_runs_bspline_and_says_so():
    """A basis list with bspline keeps the other bases for kanscale; pykan gets bspline, with a warning."""
    cfg = plan.validate_config({**copy.deepcopy(MINIMAL), "model": {"impl": ["pykan", "kanscale"],
                                                                    "basis": ["bspline", "rbf"]}})
    models = {(p.model.impl, p.model.basis) for p in plan.build_points(cfg).values()}
    assert models == {("pykan", "bspline"), ("kanscale", "bspline"), ("kanscale", "rbf")}
    (warning,) = plan.config_warnings(cfg)
    assert "pykan" in warning and "rbf" in warning
    assert plan.config_warnings(plan.validate_config(copy.deepcopy(MINIMAL))) == []


def test_tiny_test_config_valid(root):
    cfg = yaml.safe_load((root / "tests" / "configs" / "tiny.yaml").read_text())
    plan.validate_config(cfg)
