"""training.lr_scaling / lr_reference_batch / lr_warmup_samples: the rate each point trains with at
1, 2, 4 and 8 ranks, the warm-up ramp the optimiser really runs, ids, JSON and command lines left as
they were at the defaults, and bad values named by their key or flag."""

import copy
import json
import math

import pytest
import torch

import plan
from kan.probes import anatomy
from kan import loop
from kan import lr as lr_rule
from kan.contract import record as records
from kan import train
from kan.contract.point import Placement, Point, PointError, TrainConfig
from kan.train import parse

RANKS = (1, 2, 4, 8)
TOPOS = [{"nodes": 1, "gpus_per_node": n} for n in RANKS]
CFG = {
    "study": "s",
    "training": {"lr": 0.01},
    "experiments": {
        "weak": {"samples_per_rank": 256, "batch_per_rank": 32, "topologies": TOPOS, "non_ddp_baseline": False},
        "strong": {"samples": 2048, "batch_per_rank": 16, "topologies": TOPOS, "non_ddp_baseline": False},
    },
}


def points(**training):
    cfg = copy.deepcopy(CFG)
    cfg["training"].update(training)
    return plan.build_points(plan.validate_config(cfg))


def rates(pts, experiment):
    """{world size: (effective rate, reference batch)} of one experiment's points."""
    return {p.placement.world_size: (p.lr_effective, p.train.lr_reference_batch)
            for p in pts.values() if p.experiment == experiment}


@pytest.mark.parametrize("scaling, factor", [("none", lambda n: 1.0), ("linear", lambda n: n),
                                             ("sqrt", math.sqrt)])
def test_rates_at_1_2_4_8_ranks(scaling, factor):
    pts = points(lr_scaling=scaling)
    # weak: 32 per rank x n ranks = 32n global against the one-rank 32 (strong's batch_per_rank form alike)
    for exp, bpr in (("weak", 32), ("strong", 16)):
        got = rates(pts, exp)
        assert sorted(got) == list(RANKS)
        for n in RANKS:
            assert got[n][0] == pytest.approx(0.01 * factor(n)), (exp, n)
            assert got[n][1] == (0 if scaling == "none" else bpr)


def test_fixed_global_batch_is_not_scaled_and_a_reference_batch_can_be_given():
    cfg = copy.deepcopy(CFG)
    cfg["experiments"]["strong"] = {"samples": 2048, "global_batch": 64, "topologies": TOPOS}
    cfg["training"].update(lr_scaling="linear")
    pts = plan.build_points(plan.validate_config(cfg))
    assert [r for r, _ in rates(pts, "strong").values()] == pytest.approx([0.01] * 4)  # 64 global at every size
    # tuned at a global batch of 128: 32 per rank x 8 ranks = 256 global -> lr x 2; one rank -> lr / 4
    got = rates(points(lr_scaling="linear", lr_reference_batch=128), "weak")
    assert got[8][0] == pytest.approx(0.02) and got[1][0] == pytest.approx(0.0025)


def test_defaults_leave_ids_json_and_argv_unchanged():
    plain_ids = list(points())
    assert list(points(lr_scaling="none", lr_warmup_samples=0)) == plain_ids
    for p in points().values():
        assert not {"lr_scaling", "lr_reference_batch", "lr_warmup_samples"} & set(p.to_json()["train"])
        assert not [a for a in p.to_argv() if a.startswith("--lr-")]
    # a point before these fields existed: the id pinned in tests/unit/test_points.py's way
    assert Point().id == Point(train=TrainConfig(lr_scaling="none", lr_warmup_samples=0)).id


def test_a_scaled_point_has_its_own_id_and_round_trips():
    scaled = points(lr_scaling="sqrt", lr_warmup_samples=512)
    training = {k for k, p in scaled.items() if p.experiment != "allreduce"}
    assert training and not training & set(points())  # new rates, new points (all-reduce sweeps train nothing)
    for p in scaled.values():
        assert Point.from_json(json.loads(json.dumps(p.to_json()))) == p
        back, _ = parse([*p.to_argv(), "--out=x.json"])
        assert back == p and back.id == p.id


def test_warmup_arithmetic():
    # 4096 warm-up samples at a global batch of 1024: steps 0..2 at 1/4, 2/4, 3/4, step 3 at the full rate
    assert [lr_rule.warmup_factor(1024 * (s + 1), 4096) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert lr_rule.warmup_steps(4096, 1024) == 3 and lr_rule.warmup_steps(0, 1024) == 0
    assert lr_rule.warmup_factor(10, 0) == 1.0


SMALL = ["--widths=2,4,1", "--grid-size=5", "--samples=1024", "--batch-per-rank=64", "--warmup-steps=2",
         "--epochs=1", "--device=cpu", "--lr=0.01"]


def test_the_optimiser_ramps_up_over_the_warmup(tmp_path, monkeypatch):
    seen = []
    step = torch.optim.Adam.step

    def recording(self, *a, **kw):
        seen.append(self.param_groups[0]["lr"])
        return step(self, *a, **kw)

    monkeypatch.setattr(torch.optim.Adam, "step", recording)
    out = tmp_path / "r.json"
    # one rank of 64 against a reference of 32: linear = 0.01 x 2; 256 warm-up samples = 4 steps of 64
    assert train.main([*SMALL, "--lr-scaling=linear", "--lr-reference-batch=32", "--lr-warmup-samples=256",
                       "--out", str(out)]) == 0
    # the start-up's and the step anatomy's throwaway steps (off the clock, undone) come first, at the
    # full rate: 2 batch sizes x ANATOMY_STEPS, and one step watched for its operators
    before = loop.STARTUP_STEPS + 2 * anatomy.ANATOMY_STEPS + 1
    assert seen[:before] == pytest.approx([0.02] * before)
    seen = seen[before:]
    assert len(seen) == 16
    assert seen == pytest.approx([0.005, 0.01, 0.015] + [0.02] * 13)
    opt = records.read(out)["optimizer"]
    assert opt == {"name": "adam", "lr": 0.01, "lr_effective": pytest.approx(0.02), "lr_scaling": "linear",
                   "lr_reference_batch": 32, "global_batch": 64, "lr_warmup_samples": 256, "lr_warmup_steps": 3}


def test_without_warmup_every_step_has_the_configured_rate(tmp_path, monkeypatch):
    seen = []
    step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **kw: (seen.append(self.param_groups[0]["lr"]),
                                                                            step(self, *a, **kw))[1])
    out = tmp_path / "r.json"
    assert train.main([*SMALL, "--out", str(out)]) == 0
    assert set(seen) == {0.01}
    opt = records.read(out)["optimizer"]
    assert (opt["lr_effective"], opt["lr_scaling"], opt["lr_reference_batch"], opt["lr_warmup_steps"]) == \
        (0.01, "none", None, 0)


@pytest.mark.parametrize("argv, flag", [
    (["--lr-scaling=cubic"], "--lr-scaling"),
    (["--lr-scaling=linear"], "--lr-scaling"),  # scaled from no reference batch
    (["--lr-reference-batch=32"], "--lr-reference-batch"),  # a reference without scaling
    (["--lr-warmup-samples=-5"], "--lr-warmup-samples"),
])
def test_bad_values_name_the_flag(argv, flag, tmp_path, capsys):
    assert train.main([*SMALL, *argv, "--out", str(tmp_path / "r.json")]) == 2
    assert f"argument {flag}:" in capsys.readouterr().err


def test_point_names_the_key():
    with pytest.raises(PointError, match="training.lr_scaling: lr_scaling sqrt with lr_reference_batch 0"):
        Point(train=TrainConfig(samples=4096, lr_scaling="sqrt"), placement=Placement(gpus_per_node=2))
    with pytest.raises(PointError, match="training.lr_scaling: 'cubic' is not allowed; allowed values: none"):
        TrainConfig(lr_scaling="cubic")
