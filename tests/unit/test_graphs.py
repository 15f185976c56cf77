"""training.cuda_graphs (kan/graphs.py): a point that finds no GPU fails naming the key (the plan-time
refusals are test_capture_plan.py's: this file imports no planner, so it collects on the GPU machine,
which has no jsonschema), the rate reaches a captured Adam through
its device tensor, and on CUDA (skipped without one) a captured step trains exactly as the eager one
over 50 steps at world size 1. Capture's loose ends, on the CPU with a stand-in graph: the graph is
released on every path before the process group is destroyed, a hung replay is a failed point that
names it, the injected comm delay is refused under capture and a hook's bytes are counted in the
captured step."""

import json
import os
import time
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from kan import ddp_wrap, graphs, loop
from kan.contract import record as records
from kan import train
from kan.contract.point import ModelConfig
from kan.models import build_model


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
    loop.set_lr(opt, 0.02)
    assert opt.param_groups[0]["lr"] is t and float(t) == pytest.approx(0.02)  # same tensor: the graph reads it
    plain = torch.optim.Adam([p], lr=0.1)
    loop.set_lr(plain, 0.03)
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
    loop.set_lr(opt, 0.5)
    tensors = {k: v.data_ptr() for k, v in model.state_dict().items()}
    state = [t.data_ptr() for s in opt.state.values() for t in s.values()]
    graphs.CapturedStep._restore(model, opt, saved, lrs)
    assert all(torch.equal(v, saved[k]) and v.data_ptr() == tensors[k] for k, v in model.state_dict().items())
    assert all(float(t.abs().sum()) == 0 for s in opt.state.values() for t in s.values())
    assert [t.data_ptr() for s in opt.state.values() for t in s.values()] == state
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(0.01)


# --- capture's loose ends: release on every path, a hung replay ends the point, the comm options ----


class FakeGraph:
    """A CUDAGraph stand-in: replay and reset are logged."""

    def __init__(self, events: list, fail_reset: bool = False):
        self.events, self.fail_reset = events, fail_reset

    def replay(self):
        self.events.append("replay")

    def reset(self):
        self.events.append("reset")
        if self.fail_reset:
            raise RuntimeError("reset failed")


def _fake_captured(events, watch=None, fail_reset=False):
    step = object.__new__(graphs.CapturedStep)
    step.device, step.watch, step.graph, step.replays = torch.device("cpu"), watch, FakeGraph(events, fail_reset), 0
    return step


def test_the_graph_is_released_when_the_loop_ends_and_when_it_fails():
    events = []
    with graphs.released(_fake_captured(events)) as step:
        events.append("loop")
    assert events == ["loop", "reset"] and step.graph is None
    step.release()  # twice is harmless: nothing left to reset
    assert events == ["loop", "reset"]
    events.clear()
    with pytest.raises(ValueError, match="the loop's own failure"):
        with graphs.released(_fake_captured(events)):
            raise ValueError("the loop's own failure")
    assert events == ["reset"]


def test_a_release_that_fails_after_a_failure_does_not_hide_the_first_cause(capsys):
    with pytest.raises(ValueError, match="first cause"):
        with graphs.released(_fake_captured([], fail_reset=True)):
            raise ValueError("first cause")
    assert "releasing the graph after a failure also failed: RuntimeError: reset failed" in capsys.readouterr().err
    with graphs.released(None):  # no capture: nothing to release
        pass


def test_a_watch_names_what_hung_and_stays_quiet_for_what_finished():
    hung = []
    watch = graphs.HangWatch(0.2, hung.append, poll_s=0.01)
    watch.arm("replay 1 of the captured step")
    watch.disarm()  # finished in time
    time.sleep(0.4)
    assert hung == []
    watch.arm("replay 2 of the captured step")
    deadline = time.monotonic() + 10
    while not hung and time.monotonic() < deadline:
        time.sleep(0.02)
    watch.close()
    assert hung == ["training.cuda_graphs: replay 2 of the captured step did not finish within 0.2 s (the process "
                    "group's timeout, --pg-timeout-s): a hung graph, most likely a collective inside it that another "
                    "rank never joined; the rank was stopped"]
    with pytest.raises(ValueError, match="limit_s must be > 0"):
        graphs.HangWatch(0.0)


def test_a_hung_replay_is_a_failed_point_naming_the_cause(tmp_path, monkeypatch):
    """The trainer's handler (called from the watch's thread while the main thread waits in the device):
    rank 0's record is failed with the cause, the rank's error file has it, the rank exits 1."""
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)  # in-process: record the exit instead of leaving
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.setenv("KANSCALE_ERROR_DIR", str(tmp_path / "errors"))
    out = tmp_path / "r.json"
    record = {"record_version": records.RECORD_VERSION, "point": {"id": "p"}, "status": "failed", "reason": None}
    info = SimpleNamespace(rank=0, is_main=True)
    watch = graphs.HangWatch(0.1, train._hung_handler(record, str(out), info), poll_s=0.01)
    watch.arm("replay 7 of the captured step")
    deadline = time.monotonic() + 10
    while not exits and time.monotonic() < deadline:
        time.sleep(0.02)
    watch.close()
    assert exits == [1]
    rec = records.read(out)
    assert rec["status"] == "failed" and rec["reason"].startswith(
        "GraphError: training.cuda_graphs: replay 7 of the captured step did not finish within 0.1 s")
    assert "test_a_hung_replay_is_a_failed_point_naming_the_cause" in rec["hung_stack"]  # where the main thread was
    err = json.loads((tmp_path / "errors" / "rank0.error.json").read_text())
    assert "replay 7 of the captured step did not finish" in err["message"]["message"]


def test_inject_comm_delay_is_refused_with_cuda_graphs_naming_both(tmp_path):
    args = ["--widths=2,4,1", "--cuda-graphs", "--inject-comm-delay-ms=5", "--out", str(tmp_path / "r.json")]
    refused = r"--inject-comm-delay-ms: not with --cuda-graphs \(training\.cuda_graphs\)"
    with pytest.raises(train.UsageError, match=refused):
        train.parse(args)
    assert train.main(args) == 2
    train.parse(args[:1] + args[2:])  # without capture the delay is a valid validation aid


def test_the_trainer_refuses_a_hook_that_cannot_be_captured_as_the_planner_does(tmp_path):
    from kan.contract.capture_hooks import capture_conflict
    why = capture_conflict({"cuda_graphs": True, "comm_hook": "powersgd"})  # the planner's reason
    args = ["--widths=2,4,1", "--cuda-graphs", "--comm-hook=powersgd", "--out", str(tmp_path / "r.json")]
    with pytest.raises(train.UsageError, match=r"--comm-hook: powersgd cannot run under CUDA-graph capture") as e:
        train.parse(args)
    assert why in str(e.value) and "allowed under capture: none" in str(e.value)
    assert train.main(args) == 2
    train.parse([a for a in args if a != "--cuda-graphs"])  # eager, PowerSGD is a setting like any


def test_a_hooks_bytes_under_capture_are_those_counted_in_the_captured_step():
    counter = ddp_wrap.ByteCounter()
    with counter.counting(True):  # what around_capture counts: the hook's all-reduces, once
        counter.bytes += 4096
    params = [torch.nn.Parameter(torch.zeros(10))]
    found, how = loop._bytes_per_step(SimpleNamespace(comm_hook="fp16"), counter, params, captured=True)
    assert found == 4096 and "while the step was captured (each replay runs the same ones)" in how
    assert loop._bytes_per_step(SimpleNamespace(comm_hook="none"), counter, params, captured=True) == \
        (40.0, "DDP's all-reduce: every gradient once (4 bytes per float32 element)")


class _EagerStandIn(graphs.CapturedStep):
    """A captured step on the CPU: the eager step stands in for the replay (no CUDA graph here); its
    graph is a FakeGraph, so release and its order are visible. `fail_at`: the replay that raises."""

    events: list = []
    fail_at: int | None = None

    def __init__(self, net, model, loss_fn, opt, xb, yb, hang_limit_s=None, on_hang=None, around_capture=None):
        watch = graphs.HangWatch(hang_limit_s, on_hang) if hang_limit_s else None
        self.device, self.watch, self.graph, self.replays = xb.device, watch, FakeGraph(self.events), 0
        self.net, self.loss_fn, self.opt = net, loss_fn, opt
        self.events.append("capture")

    def step(self, xb, yb):
        self.replays += 1
        if self.replays == self.fail_at:
            raise RuntimeError("replay failed")
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.net(xb), yb)
        loss.backward()
        self.opt.step()
        return loss


@pytest.mark.parametrize("fail_at", [None, 3])
def test_the_graph_goes_before_the_process_group_on_every_path(tmp_path, monkeypatch, fail_at):
    events = []
    monkeypatch.setattr(_EagerStandIn, "events", events)
    monkeypatch.setattr(_EagerStandIn, "fail_at", fail_at)
    monkeypatch.setattr(graphs, "CapturedStep", _EagerStandIn)
    monkeypatch.setattr(graphs, "on_side_stream", lambda wrap, model, device: wrap(model))
    monkeypatch.setattr(graphs, "make_optimizer", lambda params, lr, device: torch.optim.Adam(params, lr=lr))
    destroy = dist.destroy_process_group
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a, **k: (events.append("destroy"), destroy(*a, **k)))
    out = tmp_path / "r.json"
    rc = train.main(["--widths=2,4,1", "--grid-size=5", "--samples=1024", "--batch-per-rank=64", "--warmup-steps=2",
                     "--epochs=1", "--device=cpu", "--threads-per-rank=1", "--cuda-graphs", "--out", str(out)])
    rec = records.read(out)
    assert events == ["capture", "reset", "destroy"]  # released before the group is destroyed
    if fail_at:
        assert rc == 1 and rec["status"] == "failed" and rec["reason"] == "RuntimeError: replay failed"
        return
    assert rc == 0 and rec["status"] == "ok"
    assert "capture" in rec["timing"]["startup_parts"]
    assert rec["timing"]["startup_s"] == sum(rec["timing"]["startup_parts"].values())
    assert rec["cuda_graphs"]["nccl_async_error_handling"] == "torch's default (not 0)"
