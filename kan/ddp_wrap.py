"""The model under DDP with the DDP settings a point sets (the ddp experiment): static graph,
gradients as bucket views, the bucket size, a gradient communication hook from
torch.distributed.algorithms.ddp_comm_hooks (fp16 / bf16 compression, PowerSGD), and NCCL's
algorithm; and the bytes a rank hands to all-reduce per synchronised step.

Bytes per step: with a hook, every `torch.distributed.all_reduce` the hook makes during a synced
step is counted (the hooks call it through the module at call time; PowerSGD's second all-reduce
runs in a future's callback, still inside backward, which DDP waits for). Without a hook DDP's C++
reducer all-reduces every gradient once: 4 bytes per float32 gradient element.

A setting the backend cannot run is an error that names the config key (a failed point with that
reason): bf16 needs NCCL (torch refuses the hook on gloo), nccl_algo needs NCCL.
"""

from __future__ import annotations

import contextlib
import os

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from .contract.point import TrainConfig


class SettingError(RuntimeError):
    """A DDP setting this backend cannot run; the message names the config key."""


def set_nccl_algo(t: TrainConfig, backend: str) -> None:
    """NCCL reads NCCL_ALGO when its communicator is made (the first collective): set it before."""
    if not t.nccl_algo:
        return
    if backend != "nccl":
        raise SettingError(f"training.nccl_algo={t.nccl_algo} needs CUDA + NCCL; this point runs {backend}")
    os.environ["NCCL_ALGO"] = t.nccl_algo


def restart_hook_state(net) -> None:
    """Forget what the comm hook learned in the untimed start-up steps (PowerSGD keeps state)."""
    restart = getattr(net, "kanscale_restart_hook", None)
    if restart is not None:
        restart()


def wrap(model, t: TrainConfig, find_unused_parameters: bool = False) -> DDP:
    """The model under DDP with the point's settings and hook (find_unused_parameters: for the
    readiness check of a model with parameters that get no gradient, kan/probes/readiness.py)."""
    net = DDP(model, bucket_cap_mb=t.bucket_cap_mb, static_graph=t.static_graph,
              gradient_as_bucket_view=t.gradient_as_bucket_view, find_unused_parameters=find_unused_parameters)
    if t.comm_hook == "none":
        return net
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    try:
        if t.comm_hook == "fp16":
            net.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif t.comm_hook == "bf16":
            net.register_comm_hook(None, default_hooks.bf16_compress_hook)
        elif t.comm_hook == "powersgd":
            kw = {"process_group": None, "matrix_approximation_rank": t.powersgd_rank,
                  "start_powerSGD_iter": t.powersgd_start_iter}
            state = powerSGD_hook.PowerSGDState(**kw)
            net.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
            # the start-up steps (kan/loop.py) must leave no trace: its iteration count, error
            # feedback and P/Q memories start again from scratch, as a fresh state would
            net.kanscale_restart_hook = lambda: state.__init__(**kw)
    except (TypeError, RuntimeError, ValueError) as e:
        raise SettingError(f"training.comm_hook={t.comm_hook} cannot run on {dist.get_backend()}: {e}") from e
    return net


class ByteCounter:
    """Bytes this rank hands to all_reduce inside `counting()` blocks (the hook's synced steps)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.steps = 0

    @contextlib.contextmanager
    def counting(self, enabled: bool):
        if not enabled:
            yield
            return
        original = dist.all_reduce

        def counted(tensor, *args, **kwargs):
            self.bytes += tensor.numel() * tensor.element_size()
            return original(tensor, *args, **kwargs)

        dist.all_reduce = counted
        try:
            yield
        finally:
            dist.all_reduce = original
            self.steps += 1

    def per_step(self) -> float | None:
        return self.bytes / self.steps if self.steps else None


def bytes_per_step(t: TrainConfig, counter: ByteCounter, grads_bytes: int) -> tuple[float | None, str]:
    """(bytes a rank all-reduces per synced step, how that was found)."""
    if t.comm_hook == "none":
        return float(grads_bytes), "DDP's all-reduce: every gradient once (4 bytes per float32 element)"
    return counter.per_step(), f"counted: every all_reduce the {t.comm_hook} hook made in the timed synced steps"
