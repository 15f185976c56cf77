"""What bounds a step: its fixed cost, its cost per sample, the operators it dispatches, and which of
dispatch, compute and communication is the largest part.

A step's compute time is close to linear in the per-rank batch b: t(b) = fixed + per_sample * b. The
fixed part is what a step costs however few samples it has (operator dispatch, kernel launches,
Python, the optimizer's per-tensor work); the per-sample part is the arithmetic. Timing compute-only
steps (DDP's no_sync: no all-reduce) at two batches, b and b/4, interleaved so that drift falls on
both alike, gives both from two medians:

    per_sample = (t(b) - t(b/4)) / (b - b/4),   fixed = t(b) - per_sample * b

These steps run before the clock starts, on the model's real data, with a throwaway optimizer, and
the weights, buffers and random state are put back afterwards (as kan/loop.py's start-up does), so
no sample is trained for free. One more step at b is watched for its operators: on a CPU every aten
operator the dispatcher runs (a Python dispatch mode, nested ones included: each costs a dispatch),
on CUDA the kernels the profiler sees, with their busy time against the step's wall time.

The bound of the measured synced step (median), from its three parts:
    dispatch       = fixed
    compute        = per_sample * b
    communication  = the exposed all-reduce (synced step - no_sync step, kan/loop.py's probe)
is the largest of them. A dispatch-bound step does not get shorter with more ranks at a fixed global
batch (a smaller per-rank batch saves only per-sample time); capture it as a graph or raise the
per-rank batch. A captured step has no all-reduce probe: see CAPTURED_RULE and captured_bound. No
torch import at module level: the analysis reads PARTS, RULE and the arithmetic.
"""

from __future__ import annotations

import contextlib
import statistics
from time import perf_counter

ANATOMY_STEPS = 5  # per batch size; at a few ms a step: well under 0.1 s a point
PARTS = ("dispatch", "compute", "communication")
RULE = ("bound = the largest part of the measured synced step: dispatch = the fixed per-step cost (compute-only "
        "steps at two per-rank batches, extrapolated to a batch of zero), compute = cost per sample x per-rank "
        "batch, communication = the exposed all-reduce (synced - no_sync step)")


def fit_line(batches: tuple[int, int], times_s: tuple[float, float]) -> tuple[float, float]:
    """(fixed seconds, seconds per sample) of the line through two (batch, step time) points; a
    negative intercept (noise at a step that is nearly all per-sample work) is reported as 0. A
    negative slope (noise at a step that is nearly all fixed cost) is reported as 0 per sample, and
    then the fixed cost is the mean of the two steps: the intercept of the falling line would lie
    above both (1.0 and 0.9 ms at batches 128 and 512 would give 1.033 ms)."""
    (b1, b2), (t1, t2) = batches, times_s
    if b1 == b2:
        raise ValueError(f"two different batches are needed, got {b1} twice")
    per_sample = (t2 - t1) / (b2 - b1)
    if per_sample <= 0.0:
        return (t1 + t2) / 2, 0.0
    fixed = t2 - per_sample * b2
    return max(fixed, 0.0), per_sample


def bound(parts_ms: dict[str, float | None]) -> str | None:
    """The largest of dispatch, compute and communication (None where no part is known)."""
    known = {k: v for k, v in parts_ms.items() if v is not None}
    return max(known, key=known.get) if known else None


UNDECIDED = "undecided"


def captured_bound(compute_ms: float, rest_ms: float, num_ranks: int) -> str:
    """The bound of a captured step (training.cuda_graphs), from the two parts a graph lets us measure:
    its compute (the eager line's cost per sample x batch) and the rest of the replayed step. On one
    rank there is nothing to all-reduce, so the rest is dispatch and the larger part is the bound. On
    more ranks the rest holds dispatch and the all-reduce in a split no probe sees inside a graph:
    either may be anything from 0 to all of the rest. Compute is the bound only where it exceeds the
    whole rest, for then it beats dispatch and communication whatever the split. Otherwise the rest is
    the larger, and it is dispatch-bound if the rest were all dispatch but communication-bound if it
    were all all-reduce: undecided, never dispatch by default."""
    if compute_ms > rest_ms:
        return "compute"
    return "dispatch" if num_ranks <= 1 else UNDECIDED


def count_ops_mode():
    """A dispatch mode counting every aten operator run under it (`.count`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.count += 1
            return func(*args, **(kwargs or {}))

    return CountOps()


def compute_only_step(net, opt, loss_fn, xb, yb, ddp: bool) -> None:
    """One training step without DDP's all-reduce (no_sync): what the compute of a step costs."""
    opt.zero_grad(set_to_none=True)
    with net.no_sync() if ddp else contextlib.nullcontext():
        loss_fn(net(xb), yb).backward()
    opt.step()


def gpu_busy(events) -> tuple[int, float | None]:
    """(number of CUDA kernels, % of the step's wall time they kept the GPU busy) from a profiled
    step's events (torch.profiler's FunctionEvents, or anything with `device_type` and a `time_range`
    of start and end in microseconds on the trace's one clock). The wall time runs from the step's
    first event to its last, CPU or CUDA: the profiler's own start, stop and event processing lie
    outside it, where a clock around the `profile` block would count them as idle GPU."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    kernels = [e for e in events if e.device_type == cuda]
    timed = [e for e in events if e.time_range.end > e.time_range.start]  # instant markers: no extent
    if not kernels or not timed:
        return len(kernels), None
    wall_us = max(e.time_range.end for e in timed) - min(e.time_range.start for e in timed)
    busy_us = sum(e.time_range.end - e.time_range.start for e in kernels)
    return len(kernels), 100.0 * busy_us / wall_us if wall_us > 0 else None


def _ops(net, opt, loss_fn, xb, yb, ddp: bool, device) -> dict:
    """The operators (CPU) or kernels (CUDA) of one compute-only step."""
    from ..distributed import sync

    if device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        sync(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            compute_only_step(net, opt, loss_fn, xb, yb, ddp)
            sync(device)
        num_kernels, busy_pct = gpu_busy(prof.events())
        return {"ops_per_step": num_kernels, "ops_kind": "CUDA kernels", "gpu_busy_pct": busy_pct}
    counter = count_ops_mode()
    with counter:
        compute_only_step(net, opt, loss_fn, xb, yb, ddp)
    return {"ops_per_step": counter.count, "ops_kind": "aten operators dispatched (nested included)",
            "gpu_busy_pct": None}


@contextlib.contextmanager
def leaves_no_trace(model, device):
    """Untimed steps inside train nothing for the clock: the weights and buffers (copied back in
    place), the gradients and the random state are as they were before. The start-up, the anatomy
    and the kernel choice all run their throwaway steps under it."""
    import torch

    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        yield
    with torch.no_grad():
        model.load_state_dict(saved)
    for p in model.parameters():
        p.grad = None


def measure(net, model, loss_fn, x_all, y_all, batch: int, lr: float, device, ddp: bool,
            steps: int = ANATOMY_STEPS) -> dict | None:
    """This rank's raw anatomy: compute-only step medians at b/4 and b, and one step's operators;
    the model is put back as it was. None for a batch of 1 (no second batch to extrapolate from).
    Every rank calls it (DDP's forward may broadcast buffers: the same number of forwards everywhere)."""
    import torch

    from ..distributed import sync

    if batch < 2 or len(x_all) < batch:
        return None
    small = batch // 4 or batch // 2  # 2 and 3 samples: 1
    times: dict[int, list[float]] = {small: [], batch: []}
    with leaves_no_trace(model, device):
        opt = torch.optim.Adam(net.parameters(), lr=lr, fused=device.type == "cuda")
        for _ in range(steps):
            for b in (small, batch):  # interleaved: a drift of the machine falls on both alike
                sync(device)
                t0 = perf_counter()
                compute_only_step(net, opt, loss_fn, x_all[:b], y_all[:b], ddp)
                sync(device)
                times[b].append(perf_counter() - t0)
        ops = _ops(net, opt, loss_fn, x_all[:batch], y_all[:batch], ddp, device)
    sync(device)
    return {"batches": [small, batch], "step_s": [statistics.median(times[small]), statistics.median(times[batch])],
            **ops}


CAPTURED_RULE = ("captured step (training.cuda_graphs): the line is the eager step's (measured before capture); "
                 "compute = cost per sample x per-rank batch (the eager line's), dispatch = the rest of the replayed "
                 "step, the all-reduce included (one graph launch, the batch's copy-in and, on more than one rank, "
                 "the all-reduce; 0, flagged clamped, where the eager compute alone exceeds the replayed step), "
                 "communication not measured (no probe inside a graph); bound = compute where it "
                 "exceeds the whole rest, else on one rank dispatch, on more undecided (the rest's split between "
                 "dispatch and the all-reduce is unknown)")


def summarize(raw: list[dict | None], step_s: float, exposed_s: float | None, captured: bool = False) -> dict | None:
    """The record's `anatomy` from every rank's raw measurement (the slowest rank's compute line sets
    the pace, as its steps do) and the measured synced step. A captured step (training.cuda_graphs)
    keeps the eager line for its compute and takes its dispatch as the rest of the replayed step, the
    all-reduce included (capture removes the per-operator launches, not the arithmetic); its
    communication is not measured (None, never 0) and its bound is captured_bound's."""
    mine = [r for r in raw if r]
    if not mine:
        return None
    slowest = max(mine, key=lambda r: r["step_s"][1])
    fixed, per_sample = fit_line(tuple(slowest["batches"]), tuple(slowest["step_s"]))
    b = slowest["batches"][1]
    parts = {"dispatch": 1e3 * fixed, "compute": 1e3 * per_sample * b,
             "communication": 1e3 * max(exposed_s, 0.0) if exposed_s is not None else None}
    profiled = {"ops_per_step": slowest["ops_per_step"], "gpu_busy_pct": slowest["gpu_busy_pct"]}
    clamped = False
    if captured:  # one raw per rank: len(raw) ranks, the all-reduce inside the graph where there are two or more
        rest = step_s - per_sample * b
        clamped = rest < 0  # the eager line's compute alone exceeds the replayed step: its rest is unknown
        parts = {"dispatch": 1e3 * max(rest, 0.0), "compute": parts["compute"], "communication": None}
        # the operator count and the GPU's busy share were profiled on the eager step: kept under the
        # eager_ names, never shown as the replay's (a replay launches one graph)
        profiled = {"ops_per_step": None, "gpu_busy_pct": None,
                    **{f"eager_{k}": v for k, v in profiled.items()}}
    return {
        "fixed_step_ms": parts["dispatch"], "per_sample_us": 1e6 * per_sample,
        "batches": slowest["batches"], "compute_step_ms": [1e3 * t for t in slowest["step_s"]],
        **profiled, "ops_kind": slowest["ops_kind"],
        **({"compute_from": "the eager step's line (cost per sample x per-rank batch), measured before capture",
            "dispatch_clamped": clamped} if captured else {}),
        "step_ms": 1e3 * step_s, "parts_ms": parts,
        "fixed_share_pct": 100.0 * parts["dispatch"] / (1e3 * step_s) if step_s > 0 else None,
        "bound": captured_bound(parts["compute"], parts["dispatch"], len(raw)) if captured else bound(parts),
        "rule": CAPTURED_RULE if captured else RULE, "steps_per_batch": ANATOMY_STEPS,
        "step": "captured" if captured else "eager", "eager_fixed_step_ms": 1e3 * fixed,
    }
