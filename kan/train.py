"""Train one measurement point under DDP and write its JSON record (rank 0).

The one entry point torchrun (or srun) starts. It takes the point's parameters as CLI
arguments and never reads config/. Examples:

    # one process, the DDP wrapper at world size 1 (the 1-GPU DDP baseline); no launcher needed
    python -m kan.train --widths 2,64,1 --grid-size 10 --out p.json
    # the same under torchrun (what the workflow runs)
    torchrun --standalone --nproc-per-node=1 -m kan.train --widths 2,64,1 --grid-size 10 --out p.json
    # 2 ranks on one machine
    torchrun --standalone --nproc-per-node=2 -m kan.train --widths 2,64,1 --out p.json
    # 2 "nodes": one torchrun agent per node, c10d rendezvous on the first node
    torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=n1:29400 \
        --rdzv-id=42 -m kan.train --widths 2,64,1 --out p.json

Measurement (see shared DESIGN.md §3): every `--comm-probe-every`-th step runs under
`ddp.no_sync()` (no gradient all-reduce inside the timed compute; the gradients are then
averaged by one untimed flat all-reduce so that the replicas stay identical). Exposed
communication = median(synced step) - median(no_sync step), both measured in this same run:
separate runs are useless on a noisy machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from datetime import datetime, timezone

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from kan import metrics
from kan.data import make_dataset, shard_indices
from kan.distributed import LAUNCHERS, DistInfo, pick_device, process_group, read_env
from kan.layers import BASES
from kan.models import IMPLS, build_model, num_params

RECORD_VERSION = 1


def _widths(text: str) -> list[int]:
    try:
        ws = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--widths must be comma-separated integers, got {text!r}") from None
    if len(ws) < 2 or min(ws) < 1:
        raise argparse.ArgumentTypeError(f"--widths needs >= 2 positive integers, got {text!r}")
    return ws


def _range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid-range must be 'lo,hi', got {text!r}") from None
    if not hi > lo:
        raise argparse.ArgumentTypeError(f"--grid-range needs hi > lo, got {text!r}")
    return lo, hi


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kan.train", description=__doc__.split("\n")[0])
    m = p.add_argument_group("model")
    m.add_argument("--impl", choices=IMPLS, default="kanscale")
    m.add_argument("--basis", choices=BASES, default="bspline")
    m.add_argument("--widths", type=_widths, default=[2, 64, 1], help="layer widths, e.g. 2,64,1")
    m.add_argument("--grid-size", type=_positive, default=5)
    m.add_argument("--spline-order", type=int, default=3)
    m.add_argument("--grid-range", type=_range, default=(-1.0, 1.0), help="lo,hi (use --grid-range=-2,2)")
    t = p.add_argument_group("training")
    t.add_argument("--samples", type=_positive, default=10_000, help="dataset size (all ranks together)")
    t.add_argument("--epochs", type=_positive, default=1)
    t.add_argument("--batch-per-rank", type=_positive, default=512)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--noise", type=float, default=0.01)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = no cap)")
    r = p.add_argument_group("measurement")
    r.add_argument("--warmup-steps", type=int, default=5, help="steps excluded from timing statistics")
    r.add_argument("--comm-probe-every", type=int, default=2,
                   help="every k-th step runs under no_sync() to measure exposed communication (0 = never)")
    r.add_argument("--inject-comm-delay-ms", type=float, default=0.0,
                   help="validation only: a DDP comm hook that waits this long after each bucket's all-reduce")
    r.add_argument("--no-ddp", action="store_true", help="the non-DDP baseline (world size 1 only)")
    r.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    r.add_argument("--threads", type=int, default=0, help="torch intra-op threads per rank (0 = leave as is)")
    r.add_argument("--launcher", choices=LAUNCHERS, default="torchrun",
                   help="where ranks come from: torchrun's env, or srun's SLURM_PROCID/SLURM_NTASKS")
    r.add_argument("--pg-timeout-s", type=float, default=120.0, help="process-group (collective) timeout")
    r.add_argument("--progress-every-s", type=float, default=10.0)
    o = p.add_argument_group("output")
    o.add_argument("--out", required=True, help="path of the JSON record (written by rank 0, atomically)")
    o.add_argument("--weights-out", default=None,
                   help="testing aid: every rank saves its final state_dict to <this>.rank<r>.pt")
    o.add_argument("--point", default="{}", help="JSON object: the point's parameters, echoed into the record")
    args = p.parse_args(argv)
    try:
        args.point = json.loads(args.point)
    except json.JSONDecodeError as e:
        p.error(f"--point must be a JSON object: {e}")
    if args.comm_probe_every == 1:
        p.error("--comm-probe-every 1 would never run a synchronised step; use 0 or >= 2")
    return args


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _delay_hook(delay_s: float):
    """Comm hook for validating the method: average the bucket, then wait delay_s before
    handing the result to DDP, so the measured exposed comm must grow by about delay_s."""

    def hook(state, bucket):
        world = dist.get_world_size()
        fut = dist.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()

        def after(f):
            time.sleep(delay_s)
            return f.value()[0]

        return fut.then(after)

    return hook


class Progress:
    """Rank 0's progress lines: steps done / total, samples/s, ETA."""

    def __init__(self, total_steps: int, global_batch: int, every_s: float, enabled: bool) -> None:
        self.total, self.global_batch, self.every_s, self.enabled = total_steps, global_batch, every_s, enabled
        self.t0 = self.last = time.perf_counter()

    def update(self, step: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < self.every_s and step != self.total):
            return
        self.last = now
        rate = step / max(now - self.t0, 1e-9)
        eta = (self.total - step) / max(rate, 1e-9)
        print(f"[kan.train] step {step}/{self.total} ({100 * step / self.total:.0f}%) "
              f"{rate * self.global_batch:,.0f} samples/s ETA {eta:.0f} s", flush=True)


def train(args: argparse.Namespace, info: DistInfo, device: torch.device) -> dict:
    """Run the training loop; return this rank's raw measurements."""
    torch.manual_seed(args.seed)  # identical initial weights on every rank (DDP also broadcasts)
    model = build_model(args.impl, args.widths, args.grid_size, args.spline_order, args.grid_range, args.basis)
    model = model.to(device)
    use_ddp = not args.no_ddp
    net = DDP(model) if use_ddp else model
    if use_ddp and args.inject_comm_delay_ms > 0:
        net.register_comm_hook(None, _delay_hook(args.inject_comm_delay_ms / 1000))
    # fused Adam on CUDA: one kernel instead of ~10 per parameter tensor (small steps are launch-bound)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, fused=device.type == "cuda")
    params = [p for p in model.parameters()]

    x_all, y_all = make_dataset(args.samples, args.widths[0], args.noise, args.seed)
    x_all, y_all = x_all.to(device), y_all.to(device)
    shard_len = len(shard_indices(args.samples, info.rank, info.world_size, 0, args.seed))
    bpr = args.batch_per_rank
    steps_per_epoch = math.ceil(shard_len / bpr)
    total_steps = args.epochs * steps_per_epoch
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    probe_every = args.comm_probe_every if use_ddp else 0
    progress = Progress(total_steps, bpr * info.world_size, args.progress_every_s, info.is_main)

    sync_times: list[float] = []
    nosync_times: list[float] = []
    flat_ar_times: list[float] = []
    epochs: list[dict] = []
    step = 0
    _sync(device)
    t_train = time.perf_counter()
    for epoch in range(args.epochs):
        if step >= total_steps:
            break
        idx = shard_indices(args.samples, info.rank, info.world_size, epoch, args.seed).to(device)
        # one gather per epoch; each step then takes a contiguous slice (a view, no copy)
        x_ep, y_ep = x_all[idx], y_all[idx]
        loss_sum = torch.zeros((), device=device)
        seen = 0
        for s in range(steps_per_epoch):
            if step >= total_steps:
                break
            xb, yb = x_ep[s * bpr : (s + 1) * bpr], y_ep[s * bpr : (s + 1) * bpr]
            probe = probe_every > 0 and step % probe_every == probe_every - 1
            timed = step >= args.warmup_steps and len(xb) == bpr  # full batches after warm-up only
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            if probe:
                with net.no_sync():
                    loss = F.mse_loss(net(xb), yb)
                    loss.backward()
                _sync(device)
                ta = time.perf_counter()
                # untimed: average gradients by hand so the replicas stay identical
                if info.world_size > 1:  # one rank's gradients already are the mean
                    flat = torch.cat([p.grad.reshape(-1) for p in params])
                    dist.all_reduce(flat)
                    flat.div_(info.world_size)
                    off = 0
                    for p in params:
                        n = p.numel()
                        p.grad.copy_(flat[off : off + n].view_as(p.grad))
                        off += n
                _sync(device)
                tb = time.perf_counter()
                opt.step()
                _sync(device)
                t1 = time.perf_counter()
                if timed:
                    nosync_times.append((t1 - t0) - (tb - ta))
                    flat_ar_times.append(tb - ta)
            else:
                loss = F.mse_loss(net(xb), yb)
                loss.backward()
                opt.step()
                _sync(device)
                t1 = time.perf_counter()
                if timed:
                    sync_times.append(t1 - t0)
            loss_sum += loss.detach() * len(xb)
            seen += len(xb)
            step += 1
            progress.update(step)
        # global mean training loss of this epoch (one small all-reduce, outside the timed steps)
        stats = torch.stack([loss_sum, torch.tensor(float(seen), device=device)])
        dist.all_reduce(stats)
        _sync(device)
        epochs.append({"epoch": epoch, "train_loss": (stats[0] / stats[1]).item(),
                       "elapsed_s": time.perf_counter() - t_train})
    _sync(device)
    train_time = time.perf_counter() - t_train

    if args.weights_out:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, f"{args.weights_out}.rank{info.rank}.pt")

    # held-out loss of the trained model, same on every rank (identical replicas)
    xt, yt = make_dataset(min(args.samples, 4096), args.widths[0], args.noise, args.seed + 1)
    with torch.no_grad():
        test_loss = F.mse_loss(model(xt.to(device)), yt.to(device)).item()

    if device.type == "cuda":
        peak, mem_kind = torch.cuda.max_memory_allocated(device), "cuda_max_allocated"
    else:
        peak, mem_kind = metrics.peak_rss_bytes(), "cpu_peak_rss"
    return {
        "sync": metrics.summarize(sync_times),
        "nosync": metrics.summarize(nosync_times),
        "flat_allreduce": metrics.summarize(flat_ar_times),
        "train_time_s": train_time,
        "steps": step,
        "steps_per_epoch": steps_per_epoch,
        "epochs": epochs,
        "test_loss": test_loss,
        "peak_mem_bytes": peak,
        "mem_kind": mem_kind,
        "num_params": num_params(model),
        "used_ddp": use_ddp,
        "weights_checksum": float(sum(p.detach().double().sum().item() for p in params)),
        "facts": metrics.rank_facts(device),
    }


def summarize_ranks(args: argparse.Namespace, info: DistInfo, per_rank: list[dict]) -> dict:
    """Rank 0 folds every rank's raw measurements into the point's figures. The slowest rank
    sets the pace of a synchronous step, so medians are taken per rank and then the max."""

    def worst(key: str) -> float | None:
        vals = [r[key]["median"] for r in per_rank if r[key]]
        return max(vals) if vals else None

    step = worst("sync")
    nosync = worst("nosync")
    exposed = step - nosync if step is not None and nosync is not None else None
    global_batch = args.batch_per_rank * info.world_size
    r0 = per_rank[0]
    baseline = min(r["baseline_rss_bytes"] for r in per_rank)
    return {
        "timing": {
            "step_s": r0["sync"],  # rank 0's distribution; figures below use the max over ranks
            "nosync_step_s": r0["nosync"],
            "flat_allreduce_s": r0["flat_allreduce"],
            "step_time_s": step,
            "nosync_step_time_s": nosync,
            "per_rank_step_time_s": [r["sync"]["median"] if r["sync"] else None for r in per_rank],
            "train_time_s": max(r["train_time_s"] for r in per_rank),
            "epoch_time_s": max(r["train_time_s"] for r in per_rank) / max(len(r0["epochs"]), 1),
            "num_steps": r0["steps"],
            "steps_per_epoch": r0["steps_per_epoch"],
        },
        "throughput": {
            "samples_per_s": global_batch / step if step else None,
            "samples_per_s_per_rank": args.batch_per_rank / step if step else None,
            "samples_per_s_wall": r0["steps"] * global_batch / max(r["train_time_s"] for r in per_rank),
        },
        "comm": {
            "exposed_s": exposed,
            "exposed_pct": 100.0 * exposed / step if exposed is not None and step else None,
            "method": "interleaved no_sync probe: median(synced step) - median(no_sync step), max over ranks",
            "probe_every": args.comm_probe_every if r0["used_ddp"] else 0,
            "injected_delay_ms": args.inject_comm_delay_ms,
        },
        "memory": {
            "kind": r0["mem_kind"],
            "peak_bytes": max(r["peak_mem_bytes"] for r in per_rank),
            "peak_gib": max(r["peak_mem_bytes"] for r in per_rank) / 2**30,
            "baseline_rss_bytes": baseline if r0["mem_kind"] == "cpu_peak_rss" else None,
            # analytic: float32 weights + gradients + Adam's two moments
            "weights_bytes": 4 * r0["num_params"],
            "grads_bytes": 4 * r0["num_params"],
            "optimizer_bytes": 8 * r0["num_params"],
        },
        "model": {"num_params": r0["num_params"]},
        "loss": {
            "final_train": r0["epochs"][-1]["train_loss"] if r0["epochs"] else None,
            "test": r0["test_loss"],
            "curve": r0["epochs"],
        },
        "replicas_identical": len({r["weights_checksum"] for r in per_rank}) == 1,
        "weights_checksum": r0["weights_checksum"],
        "ranks": [r["facts"] for r in per_rank],
    }


def point_echo(args: argparse.Namespace, info: DistInfo) -> dict:
    echo = dict(args.point)
    echo.update({
        "impl": args.impl, "basis": args.basis, "widths": args.widths, "grid_size": args.grid_size,
        "spline_order": args.spline_order, "grid_range": list(args.grid_range), "samples": args.samples,
        "epochs": args.epochs, "batch_per_rank": args.batch_per_rank,
        "global_batch": args.batch_per_rank * info.world_size, "lr": args.lr, "noise": args.noise,
        "seed": args.seed, "max_steps": args.max_steps, "warmup_steps": args.warmup_steps,
        "ddp": not args.no_ddp,
    })
    return echo


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    baseline_rss = metrics.current_rss_bytes()
    if args.threads:
        torch.set_num_threads(args.threads)
    info = read_env(args.launcher)
    device = pick_device(args.device, info)
    record = {
        "record_version": RECORD_VERSION,
        "point": point_echo(args, info),
        "status": "failed",
        "reason": None,
        "started_utc": started,
        "world_size": info.world_size,
        "num_nodes": info.num_nodes,
        "ranks_per_node": info.local_world_size,
        "launcher": info.launcher,
        "device_type": device.type,
        "backend": None,
        "provenance": {**metrics.git_state(), **metrics.software_versions(), **metrics.launch_facts(),
                       "slurm": metrics.slurm_facts()},
    }
    rc = 0
    try:
        if args.no_ddp and info.world_size > 1:
            raise ValueError(f"--no-ddp is the single-process baseline; world size is {info.world_size}")
        with process_group(info, device, args.pg_timeout_s) as backend:
            record["backend"] = backend
            mine = train(args, info, device)
            mine["baseline_rss_bytes"] = baseline_rss
            per_rank = [None] * info.world_size
            dist.all_gather_object(per_rank, mine)
        record.update(summarize_ranks(args, info, per_rank))
        record["num_hosts"] = len({r["hostname"] for r in record["ranks"]})
        if record["timing"]["step_time_s"] is None:
            raise ValueError(
                f"no timed step: the point ran {record['timing']['num_steps']} steps but the first "
                f"{args.warmup_steps} are warm-up (and partial batches are not timed); give it more samples "
                f"or epochs, or fewer warm-up steps")
        record["status"] = "ok"
    except Exception as e:  # recorded as data; the launcher decides what a failed point means
        oom = isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()
        record["status"] = "oom" if oom else "failed"
        record["reason"] = f"{type(e).__name__}: {e}".strip()[:2000]
        traceback.print_exc()
        rc = 1
    record["finished_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if info.is_main:
        metrics.write_json_atomic(args.out, record)
        if record["status"] == "ok":
            t, c = record["throughput"], record["comm"]
            exposed = "n/a" if c["exposed_pct"] is None else f"{c['exposed_pct']:.1f}%"
            print(f"[kan.train] done: world {info.world_size}, {t['samples_per_s']:,.0f} samples/s, "
                  f"exposed comm {exposed}, test loss {record['loss']['test']:.4g} -> {args.out}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
