"""What bounds a step (kan/probes/anatomy.py): the line through two batch sizes, the bound rule, the record's
summary from every rank, and a real measurement on a module of known fixed and per-sample cost that
leaves the model as it found it."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kan.probes import anatomy
from kan.models import KAN


def test_the_line_through_two_batches_gives_fixed_and_per_sample_cost():
    fixed, per = anatomy.fit_line((16, 64), (0.002 + 16e-6, 0.002 + 64e-6))  # 2 ms + 1 us a sample
    assert fixed == pytest.approx(0.002) and per == pytest.approx(1e-6)
    # noise on a step of nearly all per-sample work: the intercept is reported as 0, not negative
    assert anatomy.fit_line((16, 64), (16e-6, 64.5e-6))[0] == 0.0
    # noise on a step of nearly all fixed cost: the slope clamps to 0 and the fixed cost is the mean
    # of the timed steps, not the falling line's intercept (1.033 ms, above both)
    fixed, per = anatomy.fit_line((128, 512), (1.0e-3, 0.9e-3))
    assert per == 0.0 and fixed == pytest.approx(0.95e-3)
    assert 0.9e-3 <= fixed <= 1.0e-3
    with pytest.raises(ValueError):
        anatomy.fit_line((8, 8), (1.0, 1.0))


@pytest.mark.parametrize("parts,want", [
    ({"dispatch": 2.4, "compute": 0.01, "communication": 0.02}, "dispatch"),  # a small KAN on a GPU
    ({"dispatch": 0.3, "compute": 5.0, "communication": 1.0}, "compute"),
    ({"dispatch": 0.4, "compute": 0.1, "communication": 2.3}, "communication"),
    ({"dispatch": 0.4, "compute": 0.5, "communication": None}, "compute"),  # one rank: no all-reduce
    ({"dispatch": None, "compute": None, "communication": None}, None),
])
def test_the_bound_is_the_largest_part(parts, want):
    assert anatomy.bound(parts) == want


def test_the_summary_takes_the_slowest_ranks_line_and_the_measured_step():
    raw = [{"batches": [16, 64], "step_s": [0.0021, 0.0024], "ops_per_step": 100, "ops_kind": "k", "gpu_busy_pct": None},
           {"batches": [16, 64], "step_s": [0.0031, 0.0034], "ops_per_step": 101, "ops_kind": "k", "gpu_busy_pct": None},
           None]
    a = anatomy.summarize(raw, step_s=0.004, exposed_s=0.0005)
    assert a["ops_per_step"] == 101  # the slowest rank's
    assert a["per_sample_us"] == pytest.approx(0.3 / 48 * 1e3)
    assert a["fixed_step_ms"] == pytest.approx(3.1 - 16 * 0.3 / 48)
    assert a["parts_ms"]["communication"] == pytest.approx(0.5) and a["bound"] == "dispatch"
    assert a["fixed_share_pct"] == pytest.approx(100 * a["fixed_step_ms"] / 4.0)
    assert anatomy.summarize([None, None], 0.004, None) is None


def test_a_captured_step_keeps_the_eager_compute_and_takes_its_dispatch_from_the_replay():
    # eager line: 3 ms fixed + 1 us a sample; the replayed step at b = 64 takes 0.1 ms
    raw = [{"batches": [16, 64], "step_s": [0.003016, 0.003064], "ops_per_step": 400, "ops_kind": "k",
            "gpu_busy_pct": 3.0}]
    a = anatomy.summarize(raw, step_s=0.0001, exposed_s=0.00002, captured=True)
    assert a["step"] == "captured" and a["eager_fixed_step_ms"] == pytest.approx(3.0)
    assert a["parts_ms"]["compute"] == pytest.approx(0.064)
    assert a["parts_ms"]["dispatch"] == pytest.approx(0.1 - 0.064)  # one launch and the copy-in, not 3 ms
    assert a["parts_ms"]["communication"] is None and a["bound"] == "compute"
    eager = anatomy.summarize(raw, step_s=0.0031, exposed_s=None)
    assert eager["step"] == "eager" and eager["bound"] == "dispatch"


class KnownCost(nn.Module):
    """A step of 6 ms whatever the batch plus 60 us a sample, on a clock its forward advances (the
    method's arithmetic on known costs, no wall-clock timing in a test)."""

    def __init__(self, clock: list[float]):
        super().__init__()
        self.lin, self.clock = nn.Linear(2, 1), clock

    def forward(self, x):
        self.clock[0] += 0.006 + 60e-6 * len(x)
        return self.lin(x)


def test_a_module_of_known_fixed_and_per_sample_cost_is_measured_as_such(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(anatomy, "perf_counter", lambda: clock[0])
    model = KnownCost(clock)
    x, y = torch.randn(64, 2), torch.randn(64, 1)
    raw = anatomy.measure(model, model, F.mse_loss, x, y, 64, 1e-3, torch.device("cpu"), ddp=False)
    a = anatomy.summarize([raw], step_s=raw["step_s"][1], exposed_s=None)
    assert raw["batches"] == [16, 64]
    assert a["fixed_step_ms"] == pytest.approx(6.0) and a["per_sample_us"] == pytest.approx(60.0), a
    assert a["bound"] == "dispatch" and a["parts_ms"]["compute"] == pytest.approx(3.84)


def test_measuring_leaves_the_model_and_random_state_as_they_were_and_counts_backward_and_adam():
    torch.manual_seed(0)
    model = KAN([2, 8, 1], grid_size=5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.rand(32, 2) * 2 - 1, torch.rand(32, 1)
    rng = torch.get_rng_state()
    raw = anatomy.measure(model, model, F.mse_loss, x, y, 32, 1e-2, torch.device("cpu"), ddp=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state()) and all(p.grad is None for p in model.parameters())
    counter = anatomy.count_ops_mode()
    with counter:
        model(x)
    assert raw["ops_per_step"] > 2 * counter.count > 0  # forward, backward and the optimizer's step
    assert anatomy.measure(model, model, F.mse_loss, x, y, 1, 1e-2, torch.device("cpu"), ddp=False) is None


def _measurements(rows):
    import pandas as pd

    base = {"status": "ok", "ddp": True, "nodes": 1, "link_mbit": 0.0, "hidden_width": 64, "ddp_setting": "none",
            "placement": "1x1", "placement_class": "single-rank", "global_batch": 128, "samples": 8192, "epochs": 1,
            "grid_size": 10, "ops_per_step": 120.0, "gpu_busy_pct": None}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_the_table_splits_each_configurations_step_and_names_its_bound():
    from scaling.tables.anatomy_table import anatomy_table

    df = _measurements([
        # 1 rank: 2 ms fixed + 128 x 2 us = 2.256 ms; no all-reduce (its probe difference is noise)
        {"experiment": "strong", "model": "kan", "world_size": 1, "gpus_per_node": 1, "batch_per_rank": 128, "rep": r,
         "step_time_s": 0.0023, "fixed_step_ms": 2.0, "per_sample_us": 2.0, "exposed_comm_s": 0.0004} for r in (0, 1)
    ] + [
        # 4 ranks: 32 a rank; the all-reduce is exposed 3 ms
        {"experiment": "strong", "model": "kan", "world_size": 4, "gpus_per_node": 4, "batch_per_rank": 32, "rep": 0,
         "step_time_s": 0.0052, "fixed_step_ms": 2.0, "per_sample_us": 2.0, "exposed_comm_s": 0.003},
        {"experiment": "strong", "model": "kan", "world_size": 4, "gpus_per_node": 4, "batch_per_rank": 32, "rep": 1,
         "status": "failed", "step_time_s": None, "fixed_step_ms": None, "per_sample_us": None, "exposed_comm_s": None},
    ])
    t = anatomy_table(df)
    one, four = t.iloc[0], t.iloc[1]
    assert (one["world_size"], one["n"], one["communication_ms"], one["bound"]) == (1, 2, 0.0, "dispatch")
    assert one["compute_ms"] == pytest.approx(0.256) and one["other_ms"] == pytest.approx(2.3 - 2.256)
    assert (four["n"], four["bound"]) == (1, "communication") and four["compute_ms"] == pytest.approx(0.064)
    assert anatomy_table(_measurements([{"experiment": "strong", "model": "kan", "world_size": 1}])).empty


def test_the_section_says_what_follows_for_each_implementation():
    from scaling.report.anatomy_section import anatomy_context
    from scaling.tables.anatomy_table import anatomy_table

    df = _measurements([{"experiment": "strong", "model": "kan", "world_size": w, "gpus_per_node": w,
                         "batch_per_rank": 128 // w, "rep": 0, "step_time_s": 0.0025, "fixed_step_ms": 2.3,
                         "per_sample_us": 0.1, "exposed_comm_s": 0.0001} for w in (1, 2)])
    ctx = anatomy_context(anatomy_table(df), {}, None)
    assert [r[-1] for r in ctx["rows"]] == ["dispatch", "dispatch"]
    assert ctx["words"] == [f"kan, strong (p = 1: dispatch, p = 2: dispatch): {ctx['words'][0].split('): ', 1)[1]}"]
    assert "does not get shorter with more ranks" in ctx["words"][0]
    assert anatomy_context(None, {}, None) is None


def test_the_step_bound_guideline_is_advice_only_when_the_repeats_agree():
    from scaling.decide.rules import Decide
    from scaling.decide.stepbound import step_bound
    from scaling.tables.anatomy_table import anatomy_table

    def rows(fixed_ms):  # 1 rank, 128 a rank, 1 us a sample: 0.128 ms compute
        return [{"experiment": "strong", "model": "kan", "world_size": 1, "gpus_per_node": 1, "batch_per_rank": 128,
                 "rep": i, "step_time_s": (f + 0.128) / 1e3, "fixed_step_ms": f, "per_sample_us": 1.0,
                 "exposed_comm_s": 0.0} for i, f in enumerate(fixed_ms)]

    (g,) = step_bound(anatomy_table(_measurements(rows([2.0, 2.1]))), Decide(2, 0.95))
    assert g["status"] == "advice" and g["numbers"]["bound"] == "dispatch" and g["id"] == "step-bound-kan"
    assert "cannot make it shorter than its fixed 2.050 ms" in g["text"], g["text"]
    # one repeat's fixed cost is below its compute: the repeats disagree, nothing follows yet
    (g,) = step_bound(anatomy_table(_measurements(rows([2.0, 0.05, 2.2]))), Decide(2, 0.95))
    assert g["status"] == "inconclusive" and "2 of 3" in g["text"] and g["settle_points"][0]["key"]["model"] == "kan"
    (g,) = step_bound(anatomy_table(_measurements(rows([2.0]))), Decide(2, 0.95))  # one repeat of the two needed
    assert g["status"] == "inconclusive" and g["settle"] == "run 1 more repeat of 1x1"
    assert step_bound(None, Decide(2, 0.95)) == [] and step_bound(anatomy_table(_measurements([])), Decide(2, 0.95)) == []


def test_the_deploy_recommendation_cites_a_dispatch_bound_step_and_nothing_else():
    from scaling.decide.stepbound import cite_bound

    def bound(b, status="advice"):
        return {"id": "step-bound-kan", "status": status, "text": "",
                "numbers": {"bound": b, "world_size": 1, "dispatch_ms": 2.05, "step_ms": 2.178}}

    deploy = {"id": "deploy-kan", "status": "advice", "text": "kan: fastest 4 ranks.", "numbers": {}}
    model_json = {"models": {"kan": {"compute": {"params": {"c0_s": {"value": 0.00201}}}}}}
    (_, g) = cite_bound([bound("dispatch"), dict(deploy)], model_json)
    assert g["text"].startswith("kan: fastest 4 ranks. What bounds the step: at 1 rank it is dispatch-bound")
    assert "2.050 ms fixed of 2.178 ms; the performance model's fitted fixed term c0 is 2.010 ms" in g["text"]
    assert g["numbers"]["step_bound"]["model_c0_ms"] == 2.01
    for other in (bound("compute"), bound("communication"), bound("dispatch", "inconclusive")):
        (_, g) = cite_bound([other, dict(deploy, numbers={})], model_json)
        assert g["text"] == "kan: fastest 4 ranks." and "step_bound" not in g["numbers"]
