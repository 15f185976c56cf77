"""model.impl as your own factory (kan/factory.py, plan/factories.py): resolved against the config
file, checked at plan time with one clear error per cause, carried into the point's id with the
file's content hash, and built by the trainer's model factory."""

import copy
import json

import pytest
import torch

import plan
from kan import factory
from kan.config import ModelConfig, Point, PointError
from kan.models import build_model

GOOD = """
import torch
from torch import nn

def build(widths, grid_size):
    return nn.Sequential(nn.Linear(widths[0], grid_size), nn.SiLU(), nn.Linear(grid_size, widths[-1]))
"""


def study(impl: list[str], **model) -> dict:
    return {"study": "own", "device": "cpu", "repeats": 1,
            "model": {"impl": impl, "widths": [2, 8, 1], "grid_size": 5, **model},
            "training": {"epochs": 1, "warmup_steps": 1, "max_steps": 4},
            "experiments": {"strong": {"samples": 256, "global_batch": 32,
                                       "non_ddp_baseline": False, "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
                            "allreduce": {"enabled": False}}}


def write_config(folder, impl, **model):
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study(impl, **model)))
    return path


def factory_points(cfg) -> list[Point]:
    return [p for p in plan.build_points(cfg).values() if factory.is_factory(p.model.impl) and p.experiment == "strong"]


def test_a_file_factory_relative_to_its_config_file_plans_with_its_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.py").write_text(GOOD)
    cfg = plan.load_config(write_config(tmp_path / "configs", ["kanscale", "../models/mine.py:build"]))
    # written relative to the working folder (a moved checkout plans the same points)
    assert cfg["model"]["impl"] == ["kanscale", "models/mine.py:build"]
    (p,) = factory_points(cfg)
    assert p.model.impl == "models/mine.py:build" and p.model.impl_sha256 == factory.file_sha256("models/mine.py")
    assert p.model.label == "mine_build" and p.id.startswith("strong-mine_build-2x8x1-n1g1-r0-")
    # the trainer's factory builds it, seeded like every model: the same weights on every rank
    torch.manual_seed(0)
    a = build_model(p.model)
    torch.manual_seed(0)
    b = build_model(p.model)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert a(torch.zeros(3, 2)).shape == (3, 1)
    # the point round-trips through its JSON and its command line
    assert Point.from_json(json.loads(json.dumps(p.to_json()))) == p
    from kan.point_args import point_from_args
    from kan.train import build_parser

    assert point_from_args(build_parser().parse_args([*p.to_argv(), "--out=x.json"])) == p


def test_new_code_is_a_new_point_and_the_trainer_refuses_a_file_changed_since_the_plan(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(GOOD)
    cfg = plan.load_config(write_config(tmp_path, ["mine.py:build"]))
    (before,) = factory_points(copy.deepcopy(cfg))
    (tmp_path / "mine.py").write_text(GOOD.replace("nn.SiLU()", "nn.Tanh()"))
    with pytest.raises(factory.FactoryError, match="changed since the study was planned"):
        build_model(before.model)
    (after,) = factory_points(plan.load_config(tmp_path / "study.yaml"))
    assert after.id != before.id and after.model.impl == before.model.impl


def test_builtin_points_keep_their_ids_json_and_command_line():
    m = ModelConfig()
    assert "impl_sha256" not in m.measured()
    p = Point(model=m)
    assert "impl_sha256" not in p.to_json()["model"]
    assert not any(a.startswith("--impl-sha256") for a in p.to_argv())


BAD = [  # (file text or None, impl, words the one line must hold)
    (None, "gone.py:build", "'gone.py:build': file gone.py not found"),
    (None, "no_such_package_xyz.mod:build", "module no_such_package_xyz.mod not found"),
    (GOOD, "mine.py:make", "'mine.py:make': mine.py has no make"),
    ("build = 3\n", "mine.py:build", "build in mine.py is a int, not callable"),
    ("import no_such_package_xyz\n", "mine.py:build", "importing mine.py raised ModuleNotFoundError"),
    ("def build(widths):\n    raise RuntimeError('no GPU here')\n", "mine.py:build",
     "calling it raised RuntimeError: no GPU here"),
    ("def build(widths):\n    return [1, 2]\n", "mine.py:build", "returned a list, not a torch nn.Module"),
    ("from torch import nn\ndef build(widths):\n    return nn.Linear(widths[0], 3)\n", "mine.py:build",
     "maps a (2, 2) batch to (2, 3), not (2, 1) as model.widths [2, 8, 1] says"),
    ("from torch import nn\ndef build(widths):\n    return nn.Linear(5, 1)\n", "mine.py:build",
     "its forward pass of a (2, 2) batch raised RuntimeError"),
]


@pytest.mark.parametrize("text, impl, words", BAD, ids=[b[2][:30] for b in BAD])
def test_a_bad_factory_is_one_line_naming_it_and_the_cause_and_nothing_is_written(tmp_path, monkeypatch, text,
                                                                                    impl, words):
    monkeypatch.chdir(tmp_path)
    if text is not None:
        (tmp_path / "mine.py").write_text(text)
    path = write_config(tmp_path, [impl])
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: model.impl: "), msg
    assert words in msg and "Traceback" not in msg, msg
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_schema_refuses_what_is_neither_a_builtin_nor_a_factory(tmp_path):
    with pytest.raises(plan.ConfigError, match=r"model.impl\[0\]"):
        plan.validate_config(study(["kan scale"]), source="s.yaml")
    with pytest.raises(PointError, match="neither a file ending in .py nor a dotted module name"):
        ModelConfig(impl="a-b/c:build")


def test_a_factory_gets_only_the_settings_it_names():
    seen = {}

    def narrow(widths, grid_range):
        seen["narrow"] = (widths, grid_range)

    def wide(**kw):
        seen["wide"] = kw

    settings = factory.settings(ModelConfig(widths=(2, 4, 1), grid_size=7))
    narrow(**factory.settings_for(narrow, settings))
    wide(**factory.settings_for(wide, settings))
    assert seen["narrow"] == ([2, 4, 1], (-2.0, 2.0))
    assert set(seen["wide"]) == set(factory.SETTINGS) and seen["wide"]["grid_size"] == 7


def test_the_shipped_examples_and_config_plan(root, monkeypatch):
    monkeypatch.chdir(root)
    cfg = plan.load_config(root / "config" / "own_kan.yaml")
    impls = {p.model.impl for p in plan.build_points(cfg).values() if p.experiment != "allreduce"}
    assert impls == {"kanscale", "examples/tiny_kan.py:build", "examples/inkan_kan.py:build"}


def test_the_readiness_point_takes_the_studys_smallest_multi_rank_placement(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(GOOD)
    cfg = study(["mine.py:build"])
    ready = [p for p in plan.build_points(plan.validate_config(copy.deepcopy(cfg))).values()
             if p.experiment == "readiness"]
    assert [(p.placement.nodes, p.placement.gpus_per_node) for p in ready] == [(1, 2)]  # one rank only: 1 x 2
    # nodes of one GPU each: the check asks for what the study asks for
    cfg["experiments"]["strong"]["topologies"] += [{"nodes": 2, "gpus_per_node": 1}, {"nodes": 4, "gpus_per_node": 1}]
    cfg["experiments"]["strong"]["global_batch"] = 64
    ready = [p for p in plan.build_points(plan.validate_config(copy.deepcopy(cfg))).values()
             if p.experiment == "readiness"]
    assert [(p.placement.nodes, p.placement.gpus_per_node) for p in ready] == [(2, 1)]
    assert ready[0].train.max_steps == 8 and ready[0].train.warmup_steps == 0 and ready[0].train.samples == 2 * 32 * 8
