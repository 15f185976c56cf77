"""Is a model ready for DDP, and for CUDA graphs? Five checks on the real process group of a short
multi-rank point (experiment `readiness`, one per implementation), each {check, pass, detail, fix}:

  unused_parameters   parameters that get no gradient from a forward and backward pass: DDP's reducer
                      waits for every parameter's gradient, so it then needs find_unused_parameters=True
                      (or fails at the next step: "Expected to have finished reduction in the prior
                      iteration")
  buffers_in_sync     the buffers that training changes, and whether they are equal on every rank after
                      `steps` steps. DDP broadcasts rank 0's buffers at the start of each forward only: a
                      buffer a layer updates from its own rank's batch (an adaptive grid, running
                      statistics) differs between the ranks after every step, and rank 0's data alone
                      decide it
  replicas_identical  every parameter equal on every rank after `steps` steps (each rank trains on its
                      own batches, as under a DistributedSampler)
  device_placement    tensors the forward pass makes on a device other than its input's: the forward
                      runs once on PyTorch's `meta` device under a dispatch mode that sees every
                      operator, so a tensor made without the input's device (torch.zeros(n), a
                      hard-coded "cuda:0") shows up on any machine, with or without a GPU
  cuda_graph_capture  whether the training step can be captured as one CUDA graph (training.cuda_graphs):
                      forward, loss, backward and Adam's step on the meta device under a dispatch mode,
                      on every kernel path a GPU may take; fails naming each operator that builds a tensor
                      from Python values, copies to or reads from the host, has a data-dependent shape or
                      syncs, and the module it ran in (kan/probes/capture.py). Not a DDP check: a failure says
                      only that the model cannot run with training.cuda_graphs

A check's `pass` is null when it could not run (its detail says why). The checks never stop the
study: the implementation's scaling points run as planned, and the report says what they rest on.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import capture
from .. import ddp_wrap
from ..contract.point import Point
from ..models import build_model

FIX = {
    "unused_parameters": "use every parameter in forward (drop or freeze the unused ones with requires_grad=False), "
                         "or wrap the model with DistributedDataParallel(find_unused_parameters=True), which "
                         "walks the autograd graph every step",
    "buffers_in_sync": "keep the buffer fixed during training, or update it from every rank's data (all-reduce the "
                       "statistic, then update the same way on every rank); DDP copies rank 0's buffers at each "
                       "forward and the other ranks' updates are lost",
    "replicas_identical": "let DDP see every parameter (no parameter changed outside backward and the optimizer), "
                          "and make any update outside the gradient the same on every rank",
    "device_placement": "make tensors in forward on the input's device: torch.zeros(n, device=x.device), "
                        "x.new_zeros(n), or a registered buffer; never a fixed device string",
}


def _count(n: int, noun: str) -> str:
    """'1 buffer', '2 buffers' (the report lists these details as they are)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _max_diff_across_ranks(t: torch.Tensor) -> float:
    """max |t - rank 0's t| over every rank (0.0: equal everywhere); a collective: every rank calls it."""
    x = t.detach().to(torch.float64)
    ref = x.clone()
    dist.broadcast(ref, 0)
    diff = (x - ref).abs().max() if x.numel() else torch.zeros((), dtype=torch.float64, device=x.device)
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)


def _names(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _batch(widths, batch: int, grid_range, seed: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's batch: inputs inside the grid range, a smooth target (sum of squares)."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = grid_range
    x = torch.rand(batch, widths[0], generator=g) * (hi - lo) + lo
    y = (x ** 2).sum(dim=1, keepdim=True).expand(batch, widths[-1]).contiguous()
    return x.to(device), y.to(device)


def unused_parameters(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict:
    probe = copy.deepcopy(model)
    probe.zero_grad(set_to_none=True)
    F.mse_loss(probe(x), y).backward()
    unused = [n for n, p in probe.named_parameters() if p.requires_grad and p.grad is None]
    detail = (f"{_count(len(unused), 'parameter')} get no gradient: {_names(unused)}" if unused
              else f"every one of the {sum(1 for p in probe.parameters() if p.requires_grad)} trainable "
                   f"parameters gets a gradient")
    return {"check": "unused_parameters", "pass": not unused, "detail": detail, "fix": FIX["unused_parameters"],
            "names": unused}


class _DeviceWatch(TorchDispatchMode):
    """The operators that mix a tensor on `want` (the input's device) with one elsewhere: on a real
    device that is the error users meet (pykan issue 483: cuda:0 and cuda:1 in one op). A constant
    computed on the CPU and moved with .to(x.device) before use is fine, and 0-dim CPU tensors are
    scalars PyTorch moves itself."""

    def __init__(self, want: torch.device) -> None:
        super().__init__()
        self.want, self.found = want, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tensors = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
        others = {str(t.device) for t in tensors
                  if t.device != self.want and not (t.dim() == 0 and t.device.type == "cpu")}
        if others and any(t.device == self.want for t in tensors):
            for dev in others:
                self.found.setdefault(dev, set()).add(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def device_placement(model: torch.nn.Module, widths) -> dict:
    meta = torch.device("meta")
    result = {"check": "device_placement", "fix": FIX["device_placement"]}
    try:
        probe = copy.deepcopy(model).to(meta)
    except Exception as e:  # a module that cannot move: say so, do not guess
        return {**result, "pass": None, "detail": f"not checked: the model cannot move to the meta device ({e})"}
    watch = _DeviceWatch(meta)
    error, out = None, None
    try:
        with watch:
            out = probe(torch.empty(2, widths[0], device=meta))
    except Exception as e:
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    if watch.found:
        where = "; ".join(f"a tensor on {dev} in {_names(sorted(ops), 5)}" for dev, ops in watch.found.items())
        return {**result, "pass": False, "detail": f"the forward pass mixes the input's device with another: {where}"}
    if error and "cuda" in error.lower():  # a fixed device asked for on a machine that has none
        return {**result, "pass": False, "detail": f"the forward pass asks for a device of its own: {error}"}
    if error:
        return {**result, "pass": None, "detail": f"not checked: the forward pass cannot run on the meta device ({error})"}
    if isinstance(out, torch.Tensor) and out.device != meta:
        return {**result, "pass": False, "detail": f"the output is on {out.device}, not on the input's device"}
    return {**result, "pass": True, "detail": "every operator of the forward pass runs on the input's device"}


def run(point: Point, device: torch.device, rank: int) -> dict:
    """The five checks on this rank (every rank runs the collectives; rank 0's result is the record's)."""
    m, t = point.model, point.train
    steps = t.max_steps
    torch.manual_seed(t.seed)  # the same initial weights on every rank
    model = build_model(m).to(device)
    x0, y0 = _batch(m.widths, t.batch_per_rank, m.grid_range, t.seed + 1 + rank, device)
    checks = [unused_parameters(model, x0, y0), device_placement(model, m.widths)]
    found = capture.check(model, m.widths, "cross_entropy" if point.data.classification else "mse",
                          grid_range=m.grid_range)
    checks.append({k: found[k] for k in ("check", "pass", "detail", "fix", "findings")})
    unused = checks[0]["names"]
    before = {n: b.detach().clone() for n, b in model.named_buffers()}
    net = ddp_wrap.wrap(model, t, find_unused_parameters=bool(unused))
    opt = torch.optim.Adam(net.parameters(), lr=t.lr)
    for step in range(steps):  # each rank its own batches, as a DistributedSampler gives them
        x, y = _batch(m.widths, t.batch_per_rank, m.grid_range, t.seed + 1 + rank + 1000 * (step + 1), device)
        opt.zero_grad(set_to_none=True)
        F.mse_loss(net(x), y).backward()
        opt.step()
    changed = [n for n, b in model.named_buffers() if n in before and not torch.equal(b.detach(), before[n])]
    drift = [n for n, b in model.named_buffers() if _max_diff_across_ranks(b) > 0]
    if drift:
        buf = {"pass": False, "detail": f"after {steps} steps {_count(len(drift), 'buffer')} differ between the ranks: "
                                        f"{_names(drift)} (changed by training: {_names(changed) or 'none'})"}
    else:
        n = sum(1 for _ in model.buffers())
        buf = {"pass": True, "detail": f"{_count(n, 'buffer')}, {len(changed)} changed by training ({_names(changed) or 'none'}); "
                                       f"equal on every rank after {steps} steps"}
    checks.append({"check": "buffers_in_sync", **buf, "fix": FIX["buffers_in_sync"], "names": drift})
    differ = [n for n, p in model.named_parameters() if _max_diff_across_ranks(p) > 0]
    checks.append({"check": "replicas_identical", "pass": not differ, "fix": FIX["replicas_identical"], "names": differ,
                   "detail": (f"after {steps} steps {_count(len(differ), 'parameter')} differ between the ranks: {_names(differ)}"
                              if differ else f"every parameter equal on every rank after {steps} steps"
                              + (" (with find_unused_parameters=True)" if unused else ""))})
    order = ("unused_parameters", "buffers_in_sync", "replicas_identical", "device_placement", capture.CHECK)
    return {"readiness": {"steps": steps, "batch_per_rank": t.batch_per_rank, "world_size": dist.get_world_size(),
                          "checks": sorted(checks, key=lambda c: order.index(c["check"]))}}
