"""The measured training loop of one rank (rank 0 folds every rank's figures: kan/rank_summary.py).

The model comes from a factory (`model_factory(point.model, seed) -> nn.Module`; default
kan.models.build_model), so any implementation with the same input/output contract is measured by
exactly this loop and record: the seed paper's pykan included (workflow/scripts/pykan_train.py).

Per step: zero_grad, forward, MSE (cross-entropy for a classification table), backward, Adam. Every `comm_probe_every`-th step runs under
`ddp.no_sync()` and is timed without the all-reduce; an untimed flat all-reduce then averages its
gradients so the replicas stay identical. Warm-up steps and partial batches are not timed. The
loss curve gets one entry every `loss_every_steps` steps: the global mean training loss over that
window, with the training time elapsed (one small all-reduce, after the step's timer stopped).

The rate: `point.lr_effective` (training.lr scaled to the global batch, kan/lr.py), ramped up over
the first `lr_warmup_samples` samples: each warm-up step sets one float per parameter group before
its timer starts; after the ramp nothing more is done.

The clock starts after the start-up (STARTUP_STEPS untimed steps on the real model, DDP and an Adam of
its own, then the initial weights, buffers, random state and comm-hook state put back and a fresh
optimizer made): numba loading its compiled kernels, thread pools, DDP's bucket rebuild and first
allocations are one-time costs, which MLPerf also keeps off the time-to-train clock. No sample is
trained for free (the weights start again from the same initial values), and the cost is recorded
apart. So are the other one-time costs before the clock, each by name (kan/startup.py): the imports,
the kernel choice, the anatomy probe and, under training.cuda_graphs, the warm-up and capture;
timing.startup_s is their sum and timing.startup_parts each part that ran.

Validation off the clock: every `eval_every_samples` samples seen (all ranks together), every rank
evaluates its replica on the held-out rows (identical replicas, identical rows: no communication),
then waits at a barrier, all between one step's timer and the next; the time it takes is counted
apart (eval_time_s) and left out of the training time of every curve and of train_time_s.

A step-time point (training.step_tolerance_pct > 0) ends when its mean step is known well enough,
not when its work is done: at every loss-curve entry the ranks agree on the largest half-width of
their mean step's 95% interval (kan/contract/step_stop.py), and all stop once it is within the tolerance, or
at max_steps or the end of the work; the record says which (timing.stop).

Under training.cuda_graphs a step is one replay of the captured whole step (kan/graphs.py), watched
for a hang (the process group's timeout per replay) and released when the loop ends, on every path,
before the process group is destroyed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import ddp_wrap, graphs, metrics, startup
from . import lr as lr_rule
from .contract import step_stop
from .contract.point import Point
from .data.datasets import load_data, make_dataset, shard_indices
from .distributed import sync
from .env import DistInfo
from .models import build_model, num_params
from .probes import anatomy, kernel_choice
from .progress import Progress


def _delay_hook(delay_s: float):
    """Comm hook for validating the method: average the bucket, then wait delay_s before handing
    the result to DDP, so the measured exposed comm must grow by about delay_s per bucket that
    cannot hide behind the backward pass."""

    def hook(state, bucket):
        world = dist.get_world_size()
        fut = dist.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()

        def after(f):
            time.sleep(delay_s)
            return f.value()[0]

        return fut.then(after)

    return hook


# Three steps: the first forward and backward load the kernels (numba, ~0.35 s of a 0.4 s KAN time
# to target on config/realdata.yaml), the second and third find thread pools and the allocator warm
# and DDP's rebuilt buckets in place; at ~7 ms a step they cost the point well under 0.1 s.
STARTUP_STEPS = 3


def _startup(net, model, loss_fn, xb: torch.Tensor, yb: torch.Tensor, lr: float, device: torch.device) -> float:
    """Pay the one-time costs on untimed steps, then put the model back as it was; returns seconds.

    Every rank runs the same steps (each synced backward is DDP's collective), so every replica is
    restored from its own identical copy and they stay identical."""
    t0 = time.perf_counter()
    with anatomy.leaves_no_trace(model, device):
        throwaway = torch.optim.Adam(net.parameters(), lr=lr, fused=device.type == "cuda")
        for _ in range(STARTUP_STEPS):
            throwaway.zero_grad(set_to_none=True)
            loss_fn(net(xb), yb).backward()
            throwaway.step()
        sync(device)
    ddp_wrap.restart_hook_state(net)
    sync(device)
    return time.perf_counter() - t0


def _bytes_per_step(t, counter: ddp_wrap.ByteCounter, params: list[torch.Tensor], captured: bool
                    ) -> tuple[float | None, str]:
    """(bytes a rank all-reduces per synced step, how that was found). Under capture a hook's Python ran
    once, while the step was captured, and its all-reduces were counted then: each replay launches
    exactly those."""
    found, how = ddp_wrap.bytes_per_step(t, counter, 4 * sum(p.numel() for p in params))
    if captured and t.comm_hook != "none":
        how = (f"counted: every all_reduce the {t.comm_hook} hook made while the step was captured "
               "(each replay runs the same ones)")
    return found, how


def _average_grads(params: list[torch.Tensor], world: int) -> None:
    """One flat all-reduce of every gradient, then the mean (what DDP would have done)."""
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat.div_(world)
    off = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[off : off + n].view_as(p.grad))
        off += n


def train_rank(point: Point, run, info: DistInfo, device: torch.device,
               model_factory: Callable | None = None, imports_s: float | None = None,
               on_hang: Callable[[str], None] | None = None) -> dict:
    """Run the training loop on this rank; return its raw measurements. `imports_s`: what this process
    spent importing the trainer (kan/train.py; None: nothing), the start-up's first part. `on_hang`:
    what a hung capture or replay does (graphs.HangWatch; default: say why and exit)."""
    t_cfg, m_cfg = point.train, point.model
    torch.manual_seed(t_cfg.seed)  # identical initial weights on every rank (DDP also broadcasts)
    model = (model_factory or build_model)(m_cfg, t_cfg.seed).to(device)
    use_ddp = t_cfg.ddp
    hooked = use_ddp and t_cfg.comm_hook != "none"
    if hooked and run.inject_comm_delay_ms > 0:
        raise ddp_wrap.SettingError("--inject-comm-delay-ms is a comm hook of its own: not with "
                                    f"training.comm_hook={t_cfg.comm_hook}")
    ddp_wrap.set_nccl_algo(t_cfg, dist.get_backend())  # before DDP's first broadcast makes the communicator
    wrap = (lambda m: ddp_wrap.wrap(m, t_cfg)) if use_ddp else (lambda m: m)
    # under capture the recipe builds DDP on a side stream (kan/graphs.py)
    net = graphs.on_side_stream(wrap, model, device) if t_cfg.cuda_graphs else wrap(model)
    if use_ddp and run.inject_comm_delay_ms > 0:
        net.register_comm_hook(None, _delay_hook(run.inject_comm_delay_ms / 1000))
    counter = ddp_wrap.ByteCounter()  # what the hook all-reduces in the timed synced steps
    lr_eff, warmup = point.lr_effective, t_cfg.lr_warmup_samples
    params = [p for p in model.parameters() if p.requires_grad]  # pykan has frozen ones (grid, masks)

    data = load_data(point.data, t_cfg.samples, m_cfg.widths[0], t_cfg.noise, t_cfg.seed)
    x_all, y_all = data.x.to(device), data.y.to(device)
    x_val, y_val = data.x_val.to(device), data.y_val.to(device)
    loss_fn = F.cross_entropy if data.classification else F.mse_loss
    bpr = t_cfg.batch_per_rank
    clock = startup.Clock()  # every one-time cost before the training clock, by name (kan/startup.py)
    clock.add("imports", imports_s)
    clock.add("first_steps", _startup(net, model, loss_fn, x_all[:bpr], y_all[:bpr], lr_eff, device))
    # which B-spline kernels run (Triton only where it timed faster here), before the clock and undone;
    # a part only where a choice was timed (elsewhere the path is looked up)
    t0 = time.perf_counter()
    kernels = kernel_choice.choose(net, model, loss_fn, x_all[:bpr], y_all[:bpr], lr_eff, device, use_ddp)
    clock.add("kernel_choice", time.perf_counter() - t0 if kernels.get("timed_ms") else None)
    if t_cfg.cuda_graphs and kernels.get("timed_ms"):  # said, not hidden: a replay has no launch cost to save
        kernels["timed_as"] = ("eager steps, launches included: the choice for this captured point was not "
                               "timed on replayed steps")
    # what bounds a step (fixed vs per-sample cost, operators), also before the clock and undone
    t0 = time.perf_counter()
    step_anatomy = anatomy.measure(net, model, loss_fn, x_all, y_all, bpr, lr_eff, device, use_ddp)
    clock.add("anatomy", time.perf_counter() - t0 if step_anatomy is not None else None)
    # fused Adam on CUDA: one kernel instead of ~10 per parameter tensor (small steps are launch-bound);
    # a captured step needs Adam(capturable=True) with its rate as a device tensor (kan/graphs.py)
    opt = (graphs.make_optimizer(net.parameters(), lr_eff, device) if t_cfg.cuda_graphs else
           torch.optim.Adam(net.parameters(), lr=lr_eff, fused=device.type == "cuda"))
    eval_every = t_cfg.eval_every_samples
    next_eval, eval_time, val_curve = eval_every, 0.0, []
    shard_len = len(shard_indices(t_cfg.samples, info.rank, info.world_size, 0, t_cfg.seed))
    steps_per_epoch = graphs.steps_per_epoch(shard_len, bpr) if t_cfg.cuda_graphs else math.ceil(shard_len / bpr)
    total_steps = t_cfg.epochs * steps_per_epoch
    if t_cfg.max_steps:
        total_steps = min(total_steps, t_cfg.max_steps)
    # a captured step cannot also run under no_sync: no comm probe (exposed communication unmeasured)
    probe_every = t_cfg.comm_probe_every if use_ddp and not t_cfg.cuda_graphs else 0
    # under capture: the eager warm-up and the capture, before the clock and undone (kan/graphs.py); a
    # hook's all-reduces are counted in the captured step, which every replay repeats
    captured = None
    if t_cfg.cuda_graphs:
        with clock.part("capture"):
            captured = graphs.CapturedStep(net, model, loss_fn, opt, x_all[:bpr], y_all[:bpr],
                                           hang_limit_s=run.pg_timeout_s, on_hang=on_hang,
                                           around_capture=lambda: counter.counting(hooked))
    progress = Progress(total_steps, bpr * info.world_size, run.progress_every_s, info.is_main)

    with graphs.released(captured):  # on every path, before the process group is destroyed
        sync_times: list[float] = []
        nosync_times: list[float] = []
        flat_ar_times: list[float] = []
        epochs: list[dict] = []
        curve: list[dict] = []
        window_loss = torch.zeros((), device=device)
        window_n = 0
        samples_seen = 0
        step = 0
        # a step-time point (kan/contract/step_stop.py): the largest interval over the ranks, last checked
        tolerance, spread, met = t_cfg.step_tolerance_pct, math.inf, False
        sync(device)
        t_train = time.perf_counter()
        for epoch in range(t_cfg.epochs):
            if step >= total_steps or met:
                break
            idx = shard_indices(t_cfg.samples, info.rank, info.world_size, epoch, t_cfg.seed).to(device)
            # one gather per epoch; each step then takes a contiguous slice (a view, no copy)
            x_ep, y_ep = x_all[idx], y_all[idx]
            loss_sum = torch.zeros((), device=device)
            seen = 0
            for s in range(steps_per_epoch):
                if step >= total_steps or met:
                    break
                xb, yb = x_ep[s * bpr : (s + 1) * bpr], y_ep[s * bpr : (s + 1) * bpr]
                probe = probe_every > 0 and step % probe_every == probe_every - 1
                timed = step >= t_cfg.warmup_steps and len(xb) == bpr  # full batches after warm-up only
                if samples_seen < warmup:  # the rate's ramp, before the timer: one float (or device scalar) per group
                    set_lr(opt, lr_eff * lr_rule.warmup_factor(samples_seen + len(xb) * info.world_size, warmup))
                t0 = time.perf_counter()
                if captured is None:  # a replay's backward writes its static grads: nothing to zero
                    opt.zero_grad(set_to_none=True)
                if probe:  # never under capture (probe_every is 0 there)
                    with net.no_sync():
                        loss = loss_fn(net(xb), yb)
                        loss.backward()
                    sync(device)
                    ta = time.perf_counter()
                    if info.world_size > 1:  # untimed: one rank's gradients already are the mean
                        _average_grads(params, info.world_size)
                    sync(device)
                    tb = time.perf_counter()
                    opt.step()
                    sync(device)
                    t1 = time.perf_counter()
                    if timed:
                        nosync_times.append((t1 - t0) - (tb - ta))
                        flat_ar_times.append(tb - ta)
                else:
                    if captured is not None:  # one replay: forward, loss, backward (all-reduce), Adam
                        loss = captured.step(xb, yb)
                        sync(device)
                        captured.settled()  # the replay finished: its hang watch stands down
                    else:
                        loss = loss_fn(net(xb), yb)
                        with counter.counting(hooked and timed):
                            loss.backward()
                        opt.step()
                        sync(device)
                    t1 = time.perf_counter()
                    if timed:
                        sync_times.append(t1 - t0)
                batch_loss = loss.detach() * len(xb)
                loss_sum += batch_loss
                window_loss += batch_loss
                seen += len(xb)
                window_n += len(xb)
                samples_seen += len(xb) * info.world_size
                step += 1
                if eval_every and (samples_seen >= next_eval or step == total_steps):
                    eval_time += _validate(model, x_val, y_val, data.classification, info, step, samples_seen,
                                           time.perf_counter() - t_train - eval_time, val_curve)
                    next_eval = (samples_seen // eval_every + 1) * eval_every  # the next multiple
                if step % t_cfg.loss_every_steps == 0 or step == total_steps:
                    # before the loss all-reduce, without the evaluations: training time only
                    elapsed = time.perf_counter() - t_train - eval_time
                    curve.append({"step": step, "samples_seen": samples_seen, "elapsed_s": elapsed,
                                  "train_loss": _global_mean(window_loss, window_n, device)})
                    window_loss.zero_()
                    window_n = 0
                    if tolerance:  # at the loss's all-reduce, off the step timers, the same step on every rank
                        spread = _largest(step_stop.interval_pct(sync_times), device)
                        met = spread <= tolerance
                progress.update(step)
            # global mean training loss of this epoch (one small all-reduce, outside the timed steps)
            epochs.append({"epoch": epoch, "train_loss": _global_mean(loss_sum, seen, device),
                           "elapsed_s": time.perf_counter() - t_train - eval_time})
        sync(device)
        train_time = time.perf_counter() - t_train - eval_time

    if run.weights_out:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, f"{run.weights_out}.rank{info.rank}.pt")

    # held-out loss of the trained model, same on every rank (identical replicas); the synthetic
    # data's as it always was (4096 fresh rows), any other data's on its held-out rows
    if point.data.kind == "synthetic":
        xt, yt = make_dataset(min(t_cfg.samples, 4096), m_cfg.widths[0], t_cfg.noise, t_cfg.seed + 1)
        with torch.no_grad():
            test_loss = F.mse_loss(model(xt.to(device)), yt.to(device)).item()
    else:
        test_loss, test_accuracy = evaluate(model, x_val, y_val, data.classification)

    if device.type == "cuda":
        peak, mem_kind = torch.cuda.max_memory_allocated(device), "cuda_max_allocated"
    else:
        peak, mem_kind = metrics.peak_rss_bytes(), "cpu_peak_rss"
    return {
        "sync": metrics.summarize(sync_times),
        "nosync": metrics.summarize(nosync_times),
        "flat_allreduce": metrics.summarize(flat_ar_times),
        "train_time_s": train_time,
        "startup_s": clock.total(),
        "startup_parts": clock.parts,
        "anatomy": step_anatomy,
        "kernels": kernels,
        # this rank's warm-up and capture cost beside the capture's facts (the device script's summary)
        "cuda_graphs": {**captured.facts(), "capture_s": clock.parts["capture"]} if captured is not None else None,
        "steps": step,
        "steps_per_epoch": steps_per_epoch,
        "stop": {"reason": step_stop.reason(met, step, t_cfg.max_steps), "tolerance_pct": tolerance or None,
                 "interval_pct": spread if tolerance and math.isfinite(spread) else None},
        "epochs": epochs,
        "curve": curve,
        "test_loss": test_loss,
        "test_accuracy": None if point.data.kind == "synthetic" else test_accuracy,
        "data": data.facts,
        "val_curve": val_curve,
        "eval_time_s": eval_time,
        "peak_mem_bytes": peak,
        "mem_kind": mem_kind,
        "num_params": num_params(model),
        "num_buckets": _num_buckets(net) if use_ddp else 0,
        "used_ddp": use_ddp,
        "comm_bytes_per_step": _bytes_per_step(t_cfg, counter, params, captured is not None) if use_ddp
        else (0.0, "no DDP"),
        "weights_checksum": float(sum(p.detach().double().sum().item() for p in params)),
        "facts": metrics.rank_facts(device),
    }


@torch.no_grad()
def evaluate(model, x: torch.Tensor, y: torch.Tensor, classification: bool, chunk: int = 8192
             ) -> tuple[float, float | None]:
    """(mean held-out loss, accuracy or None) of `model` on x, y, in chunks of `chunk` rows."""
    loss_sum, correct = 0.0, 0
    for i in range(0, len(x), chunk):
        out, yb = model(x[i : i + chunk]), y[i : i + chunk]
        if classification:
            loss_sum += F.cross_entropy(out, yb, reduction="sum").item()
            correct += int((out.argmax(dim=1) == yb).sum().item())
        else:
            loss_sum += F.mse_loss(out, yb, reduction="sum").item() / out.shape[1]
    return loss_sum / len(x), (correct / len(x) if classification else None)


def _validate(model, x_val, y_val, classification: bool, info: DistInfo, step: int, samples_seen: int,
              trained_s: float, curve: list[dict]) -> float:
    """One evaluation between two steps, appended to `curve` with the training time so far; every
    rank evaluates, then all meet at a barrier, so no rank's next timed step waits for another's
    evaluation. Returns the seconds it took (off the training clock)."""
    t0 = time.perf_counter()
    val_loss, val_accuracy = evaluate(model, x_val, y_val, classification)
    if info.world_size > 1:
        dist.barrier()
    curve.append({"step": step, "samples_seen": samples_seen, "train_time_s": trained_s, "val_loss": val_loss,
                  "val_accuracy": val_accuracy})
    return time.perf_counter() - t0


def set_lr(opt: torch.optim.Optimizer, value: float) -> None:
    """The rate for the next step of any optimizer the loop makes (the warm-up ramp's setter): the
    float an eager Adam reads, or written in place into the device tensor a captured Adam reads
    (kan/graphs.py make_optimizer), which every replay of the graph sees."""
    for group in opt.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(value)
        else:
            group["lr"] = value


def _largest(value: float, device: torch.device) -> float:
    """The largest of every rank's `value` (one small all-reduce): the ranks decide together."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _global_mean(total: torch.Tensor, count: int, device: torch.device) -> float:
    stats = torch.stack([total, torch.tensor(float(count), device=device)])
    dist.all_reduce(stats)
    return (stats[0] / stats[1]).item() if stats[1].item() else float("nan")


def _num_buckets(net) -> int | None:
    """How many gradient buckets DDP all-reduced per step: its logging data's num_buckets_reduced, or
    the count of its (rebuilt) bucket sizes. DDP rebuilds its buckets after the first step in the order
    gradients became ready (only when there is more than one rank); at construction every parameter
    sits in one bucket. None when torch does not say."""
    try:
        data = net._get_ddp_logging_data()
    except Exception:  # a private API; losing it only loses a diagnostic
        return None
    if int(data.get("num_buckets_reduced") or 0) > 0:
        return int(data["num_buckets_reduced"])
    sizes = str(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or "")
    return len([x for x in sizes.replace(" ", "").split(",") if x]) or None
