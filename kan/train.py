"""Train one measurement point under DDP and write its JSON record (rank 0).

The one entry point the launcher starts (directly for one rank, under torchrun or srun for
more). It takes the point as command-line flags (kan.contract.point: one flag per Point field) and never
reads config/. Examples:

    # one process, the DDP wrapper at world size 1 (the 1-GPU DDP baseline); no launcher needed
    python -m kan.train --widths=2,64,1 --out p.json
    # the non-DDP baseline
    python -m kan.train --widths=2,64,1 --no-ddp --out p.json
    # 2 ranks on one machine
    torchrun --standalone --nproc-per-node=2 -m kan.train --widths=2,64,1 --gpus-per-node=2 --out p.json
    # 2 "nodes": one torchrun agent per node, c10d rendezvous on the first node
    torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=n1:29400 \
        --rdzv-id=42 -m kan.train --widths=2,64,1 --nodes=2 --out p.json

Measurement (shared DESIGN.md §3): every `--comm-probe-every`-th step runs under `ddp.no_sync()`
(no gradient all-reduce inside the timed compute; the gradients are then averaged by one untimed
flat all-reduce so that the replicas stay identical). Exposed communication = median(synced
step) - median(no_sync step), both measured in this same run: separate runs are useless on a
noisy machine. An `allreduce` point times all_reduce over a buffer-size sweep instead
(kan/probes/allreduce.py), through the same launch path and record.

Failures: everything from argument parsing to the last collective is inside the recorded region.
A rank that fails writes its exception to torch.distributed.elastic's per-rank error file
(TORCHELASTIC_ERROR_FILE, set by torchrun or by our launcher), rank 0 also writes a failed
record; the launcher reads both to name the first real cause.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone

from .contract import record as records
from .contract.point import Point, PointError
from .contract.point_args import add_point_arguments, point_from_args


class UsageError(ValueError):
    """A bad command line; the message names the flag."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # raise instead of exiting, so main() can record the cause
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m kan.train", description=__doc__.split("\n")[0])
    add_point_arguments(p)
    r = p.add_argument_group("run (not part of the point: they do not change what is measured)")
    r.add_argument("--out", required=True, help="path of the JSON record (written by rank 0, atomically)")
    r.add_argument("--pg-timeout-s", type=float, default=120.0, help="process-group (collective) timeout [s]")
    r.add_argument("--progress-every-s", type=float, default=float(os.environ.get("KANSCALE_PROGRESS_EVERY_S", 10.0)),
                   help="seconds between progress lines (default: $KANSCALE_PROGRESS_EVERY_S, else 10)")
    r.add_argument("--inject-comm-delay-ms", type=float, default=0.0,
                   help="validation only: a DDP comm hook that waits this long after each bucket's all-reduce")
    r.add_argument("--weights-out", default=None,
                   help="testing aid: every rank saves its final state_dict to <this>.rank<r>.pt")
    return p


def parse(argv: list[str] | None = None) -> tuple[Point, argparse.Namespace]:
    """(point, run options); UsageError naming the flag for a bad value."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        point = point_from_args(args)
    except PointError as e:
        parser.error(f"argument {e.flag}: {e.message}")
    if point.train.tuned and args.train__lr is None:  # never a made-up rate: the default is no tuned rate
        parser.error("argument --lr: a tuned point (--lr-tuned-from) trains at the rate its lr sweep chose: give it")
    for name in ("pg_timeout_s", "progress_every_s", "inject_comm_delay_ms"):
        v = getattr(args, name)
        if not math.isfinite(v) or v < 0 or (name == "pg_timeout_s" and v == 0):
            parser.error(f"argument --{name.replace('_', '-')}: must be a finite number > 0, got {v}")
    if args.inject_comm_delay_ms > 0 and point.train.cuda_graphs:
        # the delay is a host-side sleep in a comm hook's callback: a graph records it once, while the
        # step is captured, and no replay runs it, so the measured exposed comm would not grow by it
        parser.error("argument --inject-comm-delay-ms: not with --cuda-graphs (training.cuda_graphs): its sleep "
                     "would run while the step is captured, never in a replay")
    return point, args


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the process that started us dies (the launcher or torchrun agent),
    so that a SIGKILLed launcher leaves no rank behind writing into its point's files."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _record_exception(e: BaseException, rank: int | None = None) -> None:
    """This rank's exception in torch.distributed.elastic's error-file format ({"message": {"message",
    "extraInfo": {"py_callstack", "timestamp"}}}), where kan.env.error_file says; called inside the
    `except` block so that the traceback is the current one."""
    from .env import error_file

    path = error_file(rank)
    if not path:
        return
    data = {"message": {"message": f"{type(e).__name__}: {e}",
                        "extraInfo": {"py_callstack": traceback.format_exc(), "timestamp": str(int(time.time())),
                                      "timestamp_ns": time.time_ns(), "rank": rank, "pid": os.getpid()}}}
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f)
    except OSError:
        pass


def main(argv: list[str] | None = None, model_factory: Callable | None = None) -> int:
    """Run one point; 0 when it measured, 1 when it failed (the failure is then a record)."""
    _die_with_parent()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        point, run = parse(argv)
    except UsageError as e:  # no point to record without a valid command line: the error file has it
        print(build_parser().format_usage() + str(e), file=sys.stderr, flush=True)
        _record_exception(e)
        return 2
    imports_s = _import_trainer(point.train.ddp)
    import torch

    from . import metrics
    from .distributed import pick_device, process_group
    from .env import dist_info, slurm_env

    baseline_rss = metrics.current_rss_bytes()
    record = {
        "record_version": records.RECORD_VERSION,
        "point": point.to_json(),
        "status": "failed",
        "reason": None,
        "started_utc": started,
        "provenance": {**metrics.git_state(), **metrics.software_versions(), **metrics.launch_facts()},
    }
    info = None
    rc = 0
    try:
        threads = point.placement.threads_per_rank
        torch.set_num_threads(threads)
        _set_numba_threads(threads)
        info = dist_info("srun" if point.placement.launcher == "srun" else "torchrun")
        record.update({"world_size": info.world_size, "num_nodes": info.num_nodes,
                       "ranks_per_node": info.local_world_size, "launcher": info.launcher})
        expected = point.placement.world_size
        if info.launcher != "none" and info.world_size != expected:
            raise ValueError(f"the launcher started {info.world_size} ranks but the point is "
                             f"{point.placement.nodes} x {point.placement.gpus_per_node} = {expected}")
        device = pick_device(point.placement.device, info)
        record["device_type"] = device.type
        record["provenance"]["slurm"] = slurm_env()
        with process_group(info, device, run.pg_timeout_s) as backend:
            record["backend"] = backend
            if point.experiment == "allreduce":
                from .probes.allreduce import summarize_sweep, sweep

                mine = sweep(point.allreduce, info, device)
                per_rank = _gather(mine, info)
                record.update(summarize_sweep(point.allreduce, info, per_rank, backend))
            elif point.experiment == "readiness":
                from .probes import readiness

                record.update(readiness.run(point, device, info.rank))
                record["ranks"] = [r["facts"] for r in _gather({"facts": metrics.rank_facts(device)}, info)]
            else:
                from .loop import train_rank
                from .rank_summary import summarize_ranks

                mine = train_rank(point, run, info, device, model_factory, imports_s=imports_s,
                                  on_hang=_hung_handler(record, run.out, info))
                mine["baseline_rss_bytes"] = baseline_rss
                per_rank = _gather(mine, info)
                record.update(summarize_ranks(point, run, info, per_rank))
        record["num_hosts"] = len({r["hostname"] for r in record["ranks"]})
        record["status"] = "ok"
    except Exception as e:  # recorded as data; the launcher decides what a failed point means
        bound_failed_exit()
        record["status"] = "oom" if is_oom(e) else "failed"
        record["reason"] = f"{type(e).__name__}: {e}".strip()[:2000]
        traceback.print_exc()
        _record_exception(e, None if info is None else info.rank)
        rc = 1
        # written before the except block ends: that drops the traceback, and with it the last
        # references to the model, DDP's reducer and their pending work, whose destructors run then
        _write(record, run.out, info)
    else:
        _write(record, run.out, info)
    if rc:
        import faulthandler

        faulthandler.cancel_dump_traceback_later()  # main returns: its caller bounds its own exit (exit_now)
    return rc


def _write(record: dict, out: str, info) -> None:
    record["finished_utc"] = records.now_utc()
    if info is None or info.is_main:
        records.write(out, record)
        if record["status"] == "ok":
            print(f"[kan.train] done: {_summary_line(record)} -> {out}", flush=True)


def bound_failed_exit() -> None:
    """A rank that failed gets kan.env.failed_exit_s() (10 s) to write its record and leave; then every
    thread's stack goes to stderr (the point's log: where it hung) and the rank exits 1. Why: after a
    lost link a rank's teardown can wait forever. A CI run cut the emulated link: both ranks raised
    gloo's 10 s timeout and wrote their error files, then sat 35 s without rank 0's record or an exit,
    until the test stopped them; no rank exited, so the launcher's fail-fast never started, and only the
    point's deadline (255 s) would have ended it, as a timeout without the cause. faulthandler's
    watchdog is a C thread: it needs no GIL, so a thread that holds it in a destructor cannot stop it."""
    import faulthandler

    from .env import failed_exit_s

    faulthandler.dump_traceback_later(failed_exit_s(), exit=True, file=sys.stderr)


def _import_trainer(ddp: bool) -> float | None:
    """Import what the trainer runs before its first step (workflow/scripts/launch/warm_fork.py's list), timed: the start-up's
    `imports` part (kan/startup.py). None where torch was in the process already (a trainer forked from
    the warm server, which imported all of it; a test): nothing was imported for this point. torch._dynamo
    only with DDP, whose constructor imports it."""
    if "torch" in sys.modules:
        return None
    t0 = time.perf_counter()
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    import torch.nn.parallel  # noqa: F401

    if ddp:
        import torch._dynamo  # noqa: F401

    from . import distributed, layers, loop, metrics, models  # noqa: F401
    from .data import datasets  # noqa: F401
    from .kernels import numba_bspline  # noqa: F401

    return time.perf_counter() - t0


def _hung_handler(record: dict, out: str, info):
    """What a hung capture or replay does to this rank (kan/graphs.py's HangWatch, from its own thread,
    while the main thread waits in the device): its error file names the cause, rank 0 writes the failed
    point's record (with the main thread's stack: where it waited), and the rank exits at once (1)."""

    def hung(message: str) -> None:
        from .graphs import GraphError, hang_stack

        print(f"GraphError: {message}", file=sys.stderr, flush=True)
        try:
            try:
                raise GraphError(message)
            except GraphError as e:  # raised here so that the error file's format is the usual one
                _record_exception(e, info.rank)
            if info.is_main:
                record.update(status="failed", reason=f"GraphError: {message}"[:2000], finished_utc=records.now_utc(),
                              hung_stack=hang_stack()[-4000:])
                records.write(out, record)
        finally:
            os._exit(1)

    return hung


def is_oom(e: BaseException) -> bool:
    """An out-of-memory exception or an allocator failure (CPU: "can't allocate memory")."""
    import torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(e).lower()
    return any(m in text for m in records.OOM_MESSAGES)


def _set_numba_threads(n: int) -> None:
    """numba's pool like the rank's torch threads (kan/kernels/numba_bspline.py says why)."""
    from .kernels import numba_bspline

    numba_bspline.set_num_threads(n)


def _gather(mine: dict, info) -> list[dict]:
    """Every rank's measurements on every rank, sent as JSON bytes in a uint8 tensor. Not
    all_gather_object: it unpickles what its peers send, and a peer is whoever got into the
    rendezvous (SECURITY.md); a record is JSON anyway."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    data = torch.frombuffer(bytearray(json.dumps(mine).encode()), dtype=torch.uint8).to(device)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(info.world_size)]
    dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64, device=device))
    longest = max(int(n.item()) for n in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[:data.numel()] = data
    parts = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(info.world_size)]
    dist.all_gather(parts, padded)
    return [json.loads(bytes(p[:int(n.item())].cpu().tolist())) for p, n in zip(parts, sizes)]


def _summary_line(rec: dict) -> str:
    if "readiness" in rec:
        return "DDP readiness: " + ", ".join(f"{c['check']} {({True: 'pass', False: 'FAIL'}).get(c['pass'], 'n/a')}"
                                             for c in rec["readiness"]["checks"])
    if "allreduce" in rec:
        big = rec["allreduce"]["sizes"][-1]
        return (f"world {rec['world_size']}, all_reduce of {big['size_bytes'] / 2**20:.1f} MiB: "
                f"{big['time_s'] * 1e3:.3f} ms, busbw {big['busbw_gbps']:.2f} GB/s")
    t, c = rec["throughput"], rec["comm"]
    exposed = "n/a" if c["exposed_pct"] is None else f"{c['exposed_pct']:.1f}%"
    return (f"world {rec['world_size']}, {t['samples_per_s']:,.0f} samples/s, exposed comm {exposed}, "
            f"final train loss {rec['loss']['final_train']:.4g}")


def exit_now(code: int) -> None:
    """A rank that measured (code 0) leaves without interpreter finalization: the atexit hooks run and
    the streams are flushed, then os._exit (as workflow/scripts/launch/warm_server.py's forked trainers always leave). Why: gloo's
    worker thread drops its last reference to a finished collective (the final all_gather's tensors)
    just after the caller's wait() returned; a non-main rank, which writes no record, can reach
    Py_FinalizeEx first, the worker's GIL acquire then ends the thread inside a C++ destructor and
    std::terminate aborts the rank ("terminate called without an active exception", SIGABRT) after a
    measurement that succeeded: 5 in 145 runs of the two-rank gloo test, 0 in 60 with this (core:
    ProcessGroupGloo::runLoop -> ~AsyncAllgatherWork -> decref_pyobject -> take_gil while
    finalizing; destroy_process_group does not join gloo's workers in torch 2.13). The record is
    written temp-then-rename before this, so nothing is lost by skipping finalization.
    A failed rank exits as before (sys.exit): torchrun stops the other ranks as soon as one exits
    non-zero, and the ordinary exit's teardown leaves rank 0 the time to write the failed point's
    record (a failed rank 1 that left at once killed rank 0 before it wrote it)."""
    if code != 0:
        bound_failed_exit()  # the interpreter's teardown too (destructors, gloo's threads)
        sys.exit(code)
    try:
        atexit._run_exitfuncs()  # what a normal exit runs first, with the interpreter still whole
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    exit_now(main())
