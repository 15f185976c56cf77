"""model.impl as your own factory (kan/contract/factory.py, plan/factories.py): resolved against the config
file, checked at plan time with one clear error per cause, carried into the point's id with the
file's content hash, and built by the trainer's model factory."""

import copy
import json
import sys
from pathlib import Path

import pytest
import torch

import plan
from kan.contract import factory
from kan.contract.point import ModelConfig, Point, PointError
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
    from kan.contract.point_args import point_from_args
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
    # the check runs in a child: an exit, a signal or output of the user's code is one line too
    ("import sys\nsys.exit(3)\n", "mine.py:build", "'mine.py:build': exited with code 3 at import"),
    ("import os, signal\ndef build(widths):\n    print('building')\n    os.kill(os.getpid(), signal.SIGTERM)\n",
     "mine.py:build", "'mine.py:build': was killed by signal SIGTERM while called"),
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


FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_a_factory_that_never_returns_is_one_error_within_the_limit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{FIXTURES / 'factory_sleeps.py'}:build"
    path = write_config(tmp_path, [impl], factory_check_timeout_s=3)
    # the fixture sleeps forever: the planner returning at all is the limit working (no wall-clock bound here)
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(path)
    assert str(e.value) == (f"{path}: model.impl: {impl!r}: did not return within 3 s (while called; "
                            f"model.factory_check_timeout_s raises the limit)")


def test_a_factory_module_that_parses_arguments_at_import_is_one_error_naming_the_exit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{FIXTURES / 'factory_parses_args.py'}:build"
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(write_config(tmp_path, [impl]))
    msg = str(e.value)
    # the trainer's command line starts as the child's: the module would fail there too
    assert f"model.impl: {impl!r}: exited with code 2 at import (usage: train.py [-h] [--epochs EPOCHS] / " \
           "train.py: error: unrecognized arguments: --impl" in msg and "\n" not in msg, msg


def test_what_a_factory_module_sets_stays_in_its_child(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = torch.get_default_dtype()
    path = FIXTURES / "factory_sets_float64.py"
    cfg = plan.load_config(write_config(tmp_path, [f"{path}:build"]))
    assert factory_points(cfg) and torch.get_default_dtype() == before == torch.float32
    assert f"kanscale_factory_{factory.file_sha256(path)[:16]}" not in sys.modules  # never imported here


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the planner on a machine without CUDA")
def test_a_factory_that_needs_cuda_is_checked_on_meta_or_left_unchecked_not_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    impl = f"{FIXTURES / 'factory_needs_cuda.py'}:build"
    cfg = plan.load_config(write_config(tmp_path, [impl]))
    assert factory_points(cfg)
    assert f"model.impl {impl!r}: checked on the meta device (shapes only): it needs CUDA, which this machine " \
           "lacks (calling it raised AssertionError: Torch not compiled with CUDA enabled)" in plan.config_warnings(cfg)
    # one that reads a value back cannot be checked on meta either: a warning, and it still plans
    (tmp_path / "reads.py").write_text("import torch\nfrom torch import nn\n"
                                       "def build(widths):\n    m = nn.Linear(widths[0], widths[-1]).cuda()\n"
                                       "    m.weight.sum().item()\n    return m\n")
    cfg = plan.load_config(write_config(tmp_path / "b", ["../reads.py:build"]))
    assert factory_points(cfg)
    (line,) = [w for w in plan.config_warnings(cfg) if "reads.py" in w]
    assert "not checked: it needs CUDA, which this machine lacks" in line and "meta" in line, line
