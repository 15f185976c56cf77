"""training.cuda_graphs: the whole training step captured once as a CUDA graph and replayed.

Why: on a GPU a small KAN step is kernel launches and CPU dispatch, not arithmetic (BENCHMARKS.md
"First GPU run": [2,64,1] at batch 512 took 2.39 ms a step on an H200 for microseconds of work);
a replay submits the whole step with one cudaGraphLaunch.

What is captured, following PyTorch's CUDA-graphs notes (docs/source/notes/cuda.rst, "Whole-network
capture" and "Usage with DistributedDataParallel"; ../shared/research/gpu-small-model-steps.md):
forward, loss, backward (under DDP its all-reduce inside the backward: NCCL >= 2.9.6, DDP built and
run on a side stream, TORCH_NCCL_ASYNC_ERROR_HANDLING=0 before the process group exists, at least
11 DDP-enabled eager steps before capture) and Adam with capturable=True and the rate as a device
tensor (a Python float would be frozen into the graph: the warm-up ramp writes the tensor in place).
Each batch is copied into static input tensors; the loss is read from a static output after replay.
Held-out evaluation, the loss curve and the clock stay outside the graph.

Fair clock: the eager warm-up steps and the capture train the model, so the initial weights are put
back in place afterwards and Adam's state (moments and step count, all device tensors) is zeroed in
place: the graph keeps its memory addresses, and the first replay is the first real step, as a
fresh Adam's would be. A capture that fails raises GraphError naming training.cuda_graphs and the
cause (a failed point), bounded by the process group's timeout, never a hang of its own.
"""

from __future__ import annotations

import os

import torch

# PyTorch's DDP + CUDA graphs recipe: DDP needs 11 eager iterations before capture (its reducer
# rebuilds its buckets and switches to static mode by then; make_graphed_callables' docstring)
WARMUP_STEPS = 11
ASYNC_ERROR_ENV = "TORCH_NCCL_ASYNC_ERROR_HANDLING"


class GraphError(RuntimeError):
    """training.cuda_graphs cannot run here, or its capture failed."""


def prepare_env(enabled: bool) -> None:
    """Before the process group is made: NCCL's async error handling off (the recipe's first step;
    the variable's name since torch 2.2, NCCL_ASYNC_ERROR_HANDLING before)."""
    if enabled:
        os.environ[ASYNC_ERROR_ENV] = "0"


def check_device(device: torch.device) -> None:
    if device.type != "cuda":
        raise GraphError(f"training.cuda_graphs: true needs a CUDA device; this point runs on {device.type} "
                         "(allowed: false, or run on GPUs)")


def on_side_stream(wrap, model, device: torch.device):
    """`wrap(model)` (DDP's constructor) run on a side stream, as the DDP recipe asks."""
    check_device(device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        net = wrap(model)
    torch.cuda.current_stream().wait_stream(side)
    return net


def steps_per_epoch(shard_len: int, batch_per_rank: int) -> int:
    """A graph replays one batch shape, so a partial last batch is dropped (drop_last)."""
    if shard_len < batch_per_rank:
        raise GraphError(f"training.cuda_graphs: a rank's shard has {shard_len} samples, fewer than one "
                         f"batch of {batch_per_rank}: raise training.samples or lower the batch")
    return shard_len // batch_per_rank


def make_optimizer(params, lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam safe to capture: its step count on the device, its rate a device tensor."""
    return torch.optim.Adam(params, lr=torch.tensor(lr, device=device), capturable=True)


def set_lr(opt: torch.optim.Optimizer, value: float) -> None:
    """The rate for the next step: written into the device tensor a captured Adam reads, or set as
    the float an eager one reads."""
    for group in opt.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(value)
        else:
            group["lr"] = value


class CapturedStep:
    """One training step as a CUDA graph: `step(xb, yb)` copies the batch in, replays, and returns
    the step's loss as a (static) device tensor."""

    def __init__(self, net, model, loss_fn, opt: torch.optim.Optimizer, xb: torch.Tensor, yb: torch.Tensor,
                 warmup_steps: int = WARMUP_STEPS) -> None:
        check_device(xb.device)
        self.static_x, self.static_y = xb.clone(), yb.clone()
        saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
        lrs = [g["lr"].clone() if isinstance(g["lr"], torch.Tensor) else g["lr"] for g in opt.param_groups]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(side):
                for _ in range(warmup_steps):
                    opt.zero_grad(set_to_none=True)
                    loss_fn(net(self.static_x), self.static_y).backward()
                    opt.step()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            # grads allocated from the graph's private pool during capture; no zero_grad between
            # replays is needed: backward writes (not accumulates) them in every replay
            opt.zero_grad(set_to_none=True)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_loss = loss_fn(net(self.static_x), self.static_y)
                self.static_loss.backward()
                opt.step()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - any capture failure is this point's failure, with its cause
            raise GraphError(f"training.cuda_graphs: the whole-step capture failed: {type(e).__name__}: {e}") from e
        self._restore(model, opt, saved, lrs)
        torch.cuda.synchronize()

    @staticmethod
    def _restore(model, opt, saved: dict, lrs: list) -> None:
        """Back to the initial weights and a fresh Adam, in place (the graph holds these addresses)."""
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(saved[k])
            for state in opt.state.values():
                for t in state.values():
                    if isinstance(t, torch.Tensor):
                        t.zero_()
            for g, lr in zip(opt.param_groups, lrs):
                if isinstance(g["lr"], torch.Tensor):
                    g["lr"].copy_(lr)

    @staticmethod
    def facts() -> dict:
        """What the record says about the capture (and what it costs the measurement)."""
        return {"used": "whole-step", "warmup_steps": WARMUP_STEPS, "partial_batches": "dropped",
                "comm_probe": "off"}

    def step(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        self.static_x.copy_(xb)
        self.static_y.copy_(yb)
        self.graph.replay()
        return self.static_loss

    def release(self) -> None:
        """Free the graph before the process group is destroyed (from NCCL 2.26 the communicator's
        destruction waits for every graph that uses it)."""
        torch.cuda.synchronize()
        del self.graph
        torch.cuda.synchronize()
