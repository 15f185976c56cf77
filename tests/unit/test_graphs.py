"""training.cuda_graphs (kan/graphs.py, issue 31 item 3): refused at plan time in a device: cpu study
naming the key, a point that finds no GPU fails naming it, the rate reaches a captured Adam through
its device tensor, and on CUDA (skipped without one) a captured step trains exactly as the eager one
over 50 steps at world size 1."""

import copy

import pytest
import torch
import torch.nn.functional as F

import plan
from kan import graphs
from kan import record as records
from kan import train
from kan.config import ModelConfig
from kan.models import build_model

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


def test_a_point_that_finds_no_gpu_fails_naming_the_key(tmp_path):
    out = tmp_path / "r.json"
    assert train.main(["--widths=2,4,1", "--grid-size=5", "--samples=1024", "--batch-per-rank=64",
                       "--warmup-steps=2", "--epochs=1", "--device=cpu", "--cuda-graphs", "--out", str(out)]) == 1
    rec = records.read(out)
    assert rec["status"] == "failed" and "training.cuda_graphs: true needs a CUDA device" in rec["reason"]


def test_the_rate_goes_into_a_captured_adams_tensor_in_place():
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([p], lr=torch.tensor(0.1), capturable=False)
    t = opt.param_groups[0]["lr"]
    graphs.set_lr(opt, 0.02)
    assert opt.param_groups[0]["lr"] is t and float(t) == pytest.approx(0.02)  # same tensor: the graph reads it
    plain = torch.optim.Adam([p], lr=0.1)
    graphs.set_lr(plain, 0.03)
    assert plain.param_groups[0]["lr"] == 0.03


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: a CUDA graph cannot be captured here")
def test_a_captured_step_trains_as_the_eager_one_over_50_steps():
    device = torch.device("cuda")
    cfg = ModelConfig(widths=(2, 64, 1), grid_size=10)
    torch.manual_seed(0)
    x, y = torch.rand(50 * 512, 2, device=device) * 2 - 1, torch.rand(50 * 512, 1, device=device)
    eager, graphed = build_model(cfg, 0).to(device), build_model(cfg, 0).to(device)
    opt_e = torch.optim.Adam(eager.parameters(), lr=torch.tensor(1e-3, device=device), capturable=True)
    opt_g = graphs.make_optimizer(graphed.parameters(), 1e-3, device)
    step = graphs.CapturedStep(graphed, graphed, F.mse_loss, opt_g, x[:512], y[:512])
    # the warm-up and capture are undone: the graphed model starts where the eager one does
    for a, b in zip(eager.parameters(), graphed.parameters()):
        assert torch.equal(a, b)
    losses_e, losses_g = [], []
    for i in range(50):
        xb, yb = x[i * 512:(i + 1) * 512], y[i * 512:(i + 1) * 512]
        opt_e.zero_grad(set_to_none=True)
        loss = F.mse_loss(eager(xb), yb)
        loss.backward()
        opt_e.step()
        losses_e.append(loss.item())
        losses_g.append(step.step(xb, yb).item())
    step.release()
    assert losses_g == pytest.approx(losses_e, rel=1e-4, abs=1e-6)


def test_a_captured_step_drops_the_partial_batch_and_refuses_a_shard_below_one_batch():
    assert graphs.steps_per_epoch(1000, 64) == 15  # 15 full batches; the last 40 samples are dropped
    assert graphs.steps_per_epoch(64, 64) == 1
    with pytest.raises(graphs.GraphError, match=r"^training\.cuda_graphs: a rank's shard has 63 samples"):
        graphs.steps_per_epoch(63, 64)


def test_after_the_warm_up_the_weights_and_adam_start_again_in_the_same_tensors():
    # a graph keeps the addresses it captured: the restore writes in place (kan/graphs.py, fair clock)
    model = build_model(ModelConfig(widths=(2, 8, 1), grid_size=5), 0)
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01), capturable=False)
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    lrs = [g["lr"].clone() for g in opt.param_groups]
    x, y = torch.rand(64, 2), torch.rand(64, 1)
    for _ in range(3):  # what the eager warm-up does to them
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    graphs.set_lr(opt, 0.5)
    tensors = {k: v.data_ptr() for k, v in model.state_dict().items()}
    state = [t.data_ptr() for s in opt.state.values() for t in s.values()]
    graphs.CapturedStep._restore(model, opt, saved, lrs)
    assert all(torch.equal(v, saved[k]) and v.data_ptr() == tensors[k] for k, v in model.state_dict().items())
    assert all(float(t.abs().sum()) == 0 for s in opt.state.values() for t in s.values())
    assert [t.data_ptr() for s in opt.state.values() for t in s.values()] == state
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(0.01)
