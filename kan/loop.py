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


def _wrapped(model, t_cfg, run, device: torch.device, hooked: bool):
    """The model as the step runs it: under DDP with the point's settings (built on a side stream under
    capture, as the recipe has it: kan/graphs.py), with the injected delay's hook where asked; else as is."""
    if hooked and run.inject_comm_delay_ms > 0:
        raise ddp_wrap.SettingError("--inject-comm-delay-ms is a comm hook of its own: not with "
                                    f"training.comm_hook={t_cfg.comm_hook}")
    ddp_wrap.set_nccl_algo(t_cfg, dist.get_backend())  # before DDP's first broadcast makes the communicator
    wrap = (lambda m: ddp_wrap.wrap(m, t_cfg)) if t_cfg.ddp else (lambda m: m)
    net = graphs.on_side_stream(wrap, model, device) if t_cfg.cuda_graphs else wrap(model)
    if t_cfg.ddp and run.inject_comm_delay_ms > 0:
        net.register_comm_hook(None, _delay_hook(run.inject_comm_delay_ms / 1000))
    return net


def _probe_step(net, opt, loss_fn, xb, yb, params, world: int, device: torch.device, t0: float):
    """One comm-probe step: forward and backward under no_sync (no all-reduce), then an untimed flat
    all-reduce of the gradients (what DDP would have done), then Adam. Returns (loss, the step's time
    without the all-reduce, the flat all-reduce's time)."""
    with net.no_sync():
        loss = loss_fn(net(xb), yb)
        loss.backward()
    sync(device)
    ta = time.perf_counter()
    if world > 1:  # untimed: one rank's gradients already are the mean
        _average_grads(params, world)
    sync(device)
    tb = time.perf_counter()
    opt.step()
    sync(device)
    t1 = time.perf_counter()
    return loss, (t1 - t0) - (tb - ta), tb - ta


def _synced_step(net, opt, loss_fn, xb, yb, captured, counter, count: bool, device: torch.device):
    """One synced step: a replay of the captured step (forward, loss, backward with the all-reduce,
    Adam), or the eager one, its hook's bytes counted where `count`. Returns (loss, its end time)."""
    if captured is not None:
        loss = captured.step(xb, yb)
        sync(device)
        captured.settled()  # the replay finished: its hang watch stands down
    else:
        loss = loss_fn(net(xb), yb)
        with counter.counting(count):
            loss.backward()
        opt.step()
        sync(device)
    return loss, time.perf_counter()


def _held_out(point: Point, model, data, x_val, y_val, device: torch.device) -> tuple[float, float | None]:
    """(held-out loss, accuracy or None) of the trained model, the same on every rank (identical
    replicas): the synthetic data's as it always was (4096 fresh rows), any other data's held-out rows."""
    t = point.train
    if point.data.kind == "synthetic":
        xt, yt = make_dataset(min(t.samples, 4096), point.model.widths[0], t.noise, t.seed + 1)
        with torch.no_grad():
            return F.mse_loss(model(xt.to(device)), yt.to(device)).item(), None
    return evaluate(model, x_val, y_val, data.classification)


def _before_the_clock(net, model, loss_fn, x_all, y_all, t_cfg, lr_eff, device, clock) -> tuple[dict, dict | None]:
    """The one-time costs on untimed steps, each a part of `clock`, all undone: the first steps, which B-spline
    kernels run (Triton only where it timed faster here; a part only where a choice was timed) and what
    bounds a step (fixed vs per-sample cost, operators). Returns (kernels, anatomy)."""
    bpr, ddp = t_cfg.batch_per_rank, t_cfg.ddp
    clock.add("first_steps", _startup(net, model, loss_fn, x_all[:bpr], y_all[:bpr], lr_eff, device))
    t0 = time.perf_counter()
    kernels = kernel_choice.choose(net, model, loss_fn, x_all[:bpr], y_all[:bpr], lr_eff, device, ddp)
    clock.add("kernel_choice", time.perf_counter() - t0 if kernels.get("timed_ms") else None)
    if t_cfg.cuda_graphs and kernels.get("timed_ms"):  # said, not hidden: a replay has no launch cost to save
        kernels["timed_as"] = ("eager steps, launches included: the choice for this captured point was not "
                               "timed on replayed steps")
    t0 = time.perf_counter()
    step_anatomy = anatomy.measure(net, model, loss_fn, x_all, y_all, bpr, lr_eff, device, ddp)
    clock.add("anatomy", time.perf_counter() - t0 if step_anatomy is not None else None)
    return kernels, step_anatomy


def _captured(net, model, loss_fn, opt, xb, yb, run, on_hang, counting, clock):
    """The step captured as a CUDA graph after its eager warm-up, both a part of `clock`."""
    with clock.part("capture"):
        return graphs.CapturedStep(net, model, loss_fn, opt, xb, yb, hang_limit_s=run.pg_timeout_s,
                                   on_hang=on_hang, around_capture=counting)


class _Tally:
    """What the loop keeps besides the step times: steps and samples seen, the training clock (the
    evaluations off it), the loss curve's window, the held-out evaluations, and a step-time point's
    stop rule (kan/contract/step_stop.py: the largest interval over the ranks, last checked)."""

    def __init__(self, t_cfg, info: DistInfo, device: torch.device, total_steps: int, t_train: float) -> None:
        self.t, self.world, self.device, self.total, self.t_train = t_cfg, info.world_size, device, total_steps, t_train
        self.step = self.samples_seen = self.window_n = 0
        self.window_loss = torch.zeros((), device=device)
        self.curve, self.val_curve, self.eval_time = [], [], 0.0
        self.next_eval, self.spread, self.met = t_cfg.eval_every_samples, math.inf, False

    def clock(self) -> float:
        """Training time so far: the evaluations left out."""
        return time.perf_counter() - self.t_train - self.eval_time

    def done(self) -> bool:
        return self.step >= self.total or self.met

    def after_step(self, batch_loss, n: int, sync_times: list[float], validate) -> None:
        """Count one step of `n` samples; evaluate, extend the loss curve and check the stop rule where due."""
        self.window_loss += batch_loss
        self.window_n += n
        self.samples_seen += n * self.world
        self.step += 1
        every, last = self.t.eval_every_samples, self.step == self.total
        if every and (self.samples_seen >= self.next_eval or last):
            self.eval_time += validate(self.step, self.samples_seen, self.clock(), self.val_curve)
            self.next_eval = (self.samples_seen // every + 1) * every  # the next multiple
        if self.step % self.t.loss_every_steps == 0 or last:
            # before the loss all-reduce, without the evaluations: training time only
            self.curve.append({"step": self.step, "samples_seen": self.samples_seen, "elapsed_s": self.clock(),
                               "train_loss": _global_mean(self.window_loss, self.window_n, self.device)})
            self.window_loss.zero_()
            self.window_n = 0
            if self.t.step_tolerance_pct:  # at the loss's all-reduce, off the step timers, the same step on every rank
                self.spread = _largest(step_stop.interval_pct(sync_times), self.device)
                self.met = self.spread <= self.t.step_tolerance_pct

    def stop(self) -> dict:
        tol = self.t.step_tolerance_pct
        return {"reason": step_stop.reason(self.met, self.step, self.t.max_steps), "tolerance_pct": tol or None,
                "interval_pct": self.spread if tol and math.isfinite(self.spread) else None}


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
    net = _wrapped(model, t_cfg, run, device, hooked)
    counter = ddp_wrap.ByteCounter()  # what the hook all-reduces in the timed synced steps
    lr_eff, warmup = point.lr_effective, t_cfg.lr_warmup_samples
    params = [p for p in model.parameters() if p.requires_grad]  # pykan has frozen ones (grid, masks)
    data = load_data(point.data, t_cfg.samples, m_cfg.widths[0], t_cfg.noise, t_cfg.seed)
    x_all, y_all, x_val, y_val = (t.to(device) for t in (data.x, data.y, data.x_val, data.y_val))
    loss_fn = F.cross_entropy if data.classification else F.mse_loss
    bpr = t_cfg.batch_per_rank
    clock = startup.Clock()  # every one-time cost before the training clock, by name (kan/startup.py)
    clock.add("imports", imports_s)
    kernels, step_anatomy = _before_the_clock(net, model, loss_fn, x_all, y_all, t_cfg, lr_eff, device, clock)
    # fused Adam on CUDA: one kernel instead of ~10 per parameter tensor (small steps are launch-bound);
    # a captured step needs Adam(capturable=True) with its rate as a device tensor (kan/graphs.py)
    opt = (graphs.make_optimizer(net.parameters(), lr_eff, device) if t_cfg.cuda_graphs else
           torch.optim.Adam(net.parameters(), lr=lr_eff, fused=device.type == "cuda"))
    shard_len = len(shard_indices(t_cfg.samples, info.rank, info.world_size, 0, t_cfg.seed))
    steps_per_epoch = graphs.steps_per_epoch(shard_len, bpr) if t_cfg.cuda_graphs else math.ceil(shard_len / bpr)
    total_steps = min(t_cfg.epochs * steps_per_epoch, t_cfg.max_steps or math.inf)
    # a captured step cannot also run under no_sync: no comm probe (exposed communication unmeasured)
    probe_every = t_cfg.comm_probe_every if use_ddp and not t_cfg.cuda_graphs else 0
    # under capture: the eager warm-up and the capture, before the clock and undone (kan/graphs.py); a
    # hook's all-reduces are counted in the captured step, which every replay repeats
    captured = _captured(net, model, loss_fn, opt, x_all[:bpr], y_all[:bpr], run, on_hang,
                         lambda: counter.counting(hooked), clock) if t_cfg.cuda_graphs else None
    progress = Progress(total_steps, bpr * info.world_size, run.progress_every_s, info.is_main)

    with graphs.released(captured):  # on every path, before the process group is destroyed
        sync_times, nosync_times, flat_ar_times, epochs = [], [], [], []  # seconds; one dict an epoch
        sync(device)
        tally = _Tally(t_cfg, info, device, total_steps, time.perf_counter())
        for epoch in range(t_cfg.epochs):
            if tally.done():
                break
            idx = shard_indices(t_cfg.samples, info.rank, info.world_size, epoch, t_cfg.seed).to(device)
            # one gather per epoch; each step then takes a contiguous slice (a view, no copy)
            x_ep, y_ep = x_all[idx], y_all[idx]
            loss_sum, seen = torch.zeros((), device=device), 0
            for s in range(steps_per_epoch):
                if tally.done():
                    break
                xb, yb = x_ep[s * bpr : (s + 1) * bpr], y_ep[s * bpr : (s + 1) * bpr]
                step = tally.step
                probe = probe_every > 0 and step % probe_every == probe_every - 1
                timed = step >= t_cfg.warmup_steps and len(xb) == bpr  # full batches after warm-up only
                if tally.samples_seen < warmup:  # the rate's ramp, before the timer: one float (or device scalar) per group
                    set_lr(opt, lr_eff * lr_rule.warmup_factor(tally.samples_seen + len(xb) * info.world_size, warmup))
                t0 = time.perf_counter()
                if captured is None:  # a replay's backward writes its static grads: nothing to zero
                    opt.zero_grad(set_to_none=True)
                if probe:  # never under capture (probe_every is 0 there)
                    loss, nosync_s, flat_s = _probe_step(net, opt, loss_fn, xb, yb, params, info.world_size, device, t0)
                    if timed:
                        nosync_times.append(nosync_s)
                        flat_ar_times.append(flat_s)
                else:
                    loss, t1 = _synced_step(net, opt, loss_fn, xb, yb, captured, counter, hooked and timed, device)
                    if timed:
                        sync_times.append(t1 - t0)
                batch_loss = loss.detach() * len(xb)
                loss_sum += batch_loss
                seen += len(xb)
                tally.after_step(batch_loss, len(xb), sync_times, lambda *a: _validate(
                    model, x_val, y_val, data.classification, info, *a))
                progress.update(tally.step)
            # global mean training loss of this epoch (one small all-reduce, outside the timed steps)
            epochs.append({"epoch": epoch, "train_loss": _global_mean(loss_sum, seen, device),
                           "elapsed_s": tally.clock()})
        sync(device)
        train_time = tally.clock()

    if run.weights_out:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, f"{run.weights_out}.rank{info.rank}.pt")

    test_loss, test_accuracy = _held_out(point, model, data, x_val, y_val, device)

    peak, mem_kind = ((torch.cuda.max_memory_allocated(device), "cuda_max_allocated") if device.type == "cuda"
                      else (metrics.peak_rss_bytes(), "cpu_peak_rss"))
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
        "steps": tally.step,
        "steps_per_epoch": steps_per_epoch,
        "stop": tally.stop(),
        "epochs": epochs,
        "curve": tally.curve,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        "data": data.facts,
        "val_curve": tally.val_curve,
        "eval_time_s": tally.eval_time,
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
