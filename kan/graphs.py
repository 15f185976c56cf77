"""training.cuda_graphs: the whole training step captured once as a CUDA graph and replayed.

Why: on a GPU a small KAN step is kernel launches and CPU dispatch, not arithmetic (BENCHMARKS.md
"First GPU run": [2,64,1] at batch 512 took 2.39 ms a step on an H200 for microseconds of work);
a replay submits the whole step with one cudaGraphLaunch.

What is captured, following PyTorch's CUDA-graphs notes (docs/source/notes/cuda.rst, "Whole-network
capture" and "Usage with DistributedDataParallel"; ../shared/research/gpu-small-model-steps.md):
forward, loss, backward (under DDP its all-reduce inside the backward: NCCL >= 2.9.6, DDP built and
run on a side stream, at least 11 DDP-enabled eager steps before capture; not the recipe's
TORCH_NCCL_ASYNC_ERROR_HANDLING=0, see ASYNC_ERROR_HANDLING) and Adam with capturable=True and the
rate as a device tensor (a Python float would be frozen into the graph: the warm-up ramp writes the
tensor in place).
Each batch is copied into static input tensors; the loss is read from a static output after replay.
Held-out evaluation, the loss curve and the clock stay outside the graph.

Fair clock: the eager warm-up steps and the capture train the model, so the initial weights are put
back in place afterwards and Adam's state (moments and step count, all device tensors) is zeroed in
place: the graph keeps its memory addresses, and the first replay is the first real step, as a
fresh Adam's would be.

Failures: a capture that fails raises GraphError naming training.cuda_graphs and the cause (a failed
point). A capture or a replay that does not finish is a hang no exception reaches (the host waits in
the device's synchronize): HangWatch ends the rank after the process group's timeout with a failed
point that names what hung. The graph is released on every path before the process group is destroyed
(`released`): from NCCL 2.26 the communicator's destruction waits for every graph that uses it.
Under capture `--inject-comm-delay-ms` is refused (kan/train.py: its sleep would run at capture only),
and a hook's bytes per step are counted in the captured step, which every replay repeats.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

import torch

# PyTorch's DDP + CUDA graphs recipe: DDP needs 11 eager iterations before capture (its reducer
# rebuilds its buckets and switches to static mode by then; make_graphed_callables' docstring)
WARMUP_STEPS = 11

# TORCH_NCCL_ASYNC_ERROR_HANDLING is left at torch's default (3: a collective that outlives the process
# group's timeout tears the process down), not set to 0 as step 1 of the DDP recipe in PyTorch's CUDA
# notes still says. Why, on PyTorch's own evidence:
# - 0 means "no handling of asynchronous NCCL errors" (docs: torch_nccl_environment_variables): a hung
#   eager collective (DDP's broadcast, the 11 warm-up steps' all-reduces, the loss curve's, the final
#   gather) would then never be aborted and would hang the point until its deadline.
# - The recipe's reason was the watchdog polling events while a graph was captured, which invalidated
#   the capture. ProcessGroupNCCL no longer gives the watchdog any work made while capturing
#   (collective(): enqueue only when the capture status is None; pytorch/pytorch pull 102542), and a
#   capture first waits for the watchdog's pending event queries (CUDAGraph::inc_pending_event_queries,
#   pull 104487): both are in every torch this project supports (pyproject: torch >= 2.4).
# - The same first point means the watchdog never sees a collective replayed from a graph, whatever
#   this variable says: HangWatch bounds those.
ASYNC_ERROR_HANDLING = "torch's default (not 0)"


class GraphError(RuntimeError):
    """training.cuda_graphs cannot run here, or its capture failed or hung."""


def _exit_hung(message: str) -> None:
    """HangWatch's default end: say why on stderr and leave at once (the main thread is stuck in the
    device; no exception can reach it)."""
    print(f"GraphError: {message}", file=sys.stderr, flush=True)
    os._exit(1)


class HangWatch:
    """Ends the rank when something it watches (the capture, one replay and its synchronize) runs past
    `limit_s`: a hung graph waits in the driver, where no timeout of torch's reaches it (the NCCL
    watchdog never sees a replayed collective). `on_hang(message)` is called from the watch's own
    thread with a message naming training.cuda_graphs, what hung and the limit; it must not return
    (kan/train.py's writes the failed point and its error file, then exits).

    Arming is two attribute writes (no lock, no thread per step): a replay of a small step takes tens of
    microseconds, so the watch polls, every `poll_s` (limit/20, at most 1 s), how long the armed
    thing has been running."""

    def __init__(self, limit_s: float, on_hang: Callable[[str], None] | None = None, poll_s: float | None = None):
        if not limit_s > 0:
            raise ValueError(f"HangWatch: limit_s must be > 0, got {limit_s}")
        self.limit_s = limit_s
        self.on_hang = on_hang or _exit_hung
        self.poll_s = poll_s if poll_s is not None else min(1.0, limit_s / 20)
        self._what: str | None = None
        self._since = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kanscale-hang-watch", daemon=True)
        self._thread.start()

    def arm(self, what: str) -> None:
        self._since = time.monotonic()
        self._what = what

    def disarm(self) -> None:
        self._what = None

    def close(self) -> None:
        self._what = None
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            what, since = self._what, self._since
            if what is not None and time.monotonic() - since > self.limit_s:
                self._what = None
                self.on_hang(f"training.cuda_graphs: {what} did not finish within {self.limit_s:g} s (the process "
                             "group's timeout, --pg-timeout-s): a hung graph, most likely a collective inside it that "
                             "another rank never joined; the rank was stopped")
                return


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


class CapturedStep:
    """One training step as a CUDA graph: `step(xb, yb)` copies the batch in, replays, and returns
    the step's loss as a (static) device tensor. With `hang_limit_s` a HangWatch (`on_hang` its end)
    watches the warm-up and capture, and each replay from `step` until the caller's `settled()` (after
    its synchronize). `around_capture`: a context manager entered around the captured step only (the
    comm hook's byte counter: what the hook all-reduces while captured is what every replay all-reduces)."""

    def __init__(self, net, model, loss_fn, opt: torch.optim.Optimizer, xb: torch.Tensor, yb: torch.Tensor,
                 warmup_steps: int = WARMUP_STEPS, hang_limit_s: float | None = None,
                 on_hang: Callable[[str], None] | None = None,
                 around_capture: Callable[[], contextlib.AbstractContextManager] | None = None) -> None:
        check_device(xb.device)
        watch = HangWatch(hang_limit_s, on_hang) if hang_limit_s else None
        self.device, self.watch, self.graph, self.replays = xb.device, watch, None, 0
        self.static_x, self.static_y = xb.clone(), yb.clone()
        saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
        lrs = [g["lr"].clone() if isinstance(g["lr"], torch.Tensor) else g["lr"] for g in opt.param_groups]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        if watch is not None:
            watch.arm(f"the eager warm-up ({warmup_steps} steps) and capture of the step")
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
            with around_capture() if around_capture else contextlib.nullcontext(), torch.cuda.graph(self.graph):
                self.static_loss = loss_fn(net(self.static_x), self.static_y)
                self.static_loss.backward()
                opt.step()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - any capture failure is this point's failure, with its cause
            self._drop_graph()  # a half-made graph must not outlive this frame into the group's teardown
            if watch is not None:
                watch.close()
            raise GraphError(f"training.cuda_graphs: the whole-step capture failed: {type(e).__name__}: {e}") from e
        finally:
            if watch is not None:
                watch.disarm()
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
                "comm_probe": "off", "nccl_async_error_handling": ASYNC_ERROR_HANDLING,
                "hang_limit": "the process group's timeout (--pg-timeout-s) per replay and for the capture"}

    def step(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        self.replays += 1
        if self.watch is not None:
            self.watch.arm(f"replay {self.replays} of the captured step")
        self.static_x.copy_(xb)
        self.static_y.copy_(yb)
        self.graph.replay()
        return self.static_loss

    def settled(self) -> None:
        """The caller synchronized after `step`: the replay finished."""
        if self.watch is not None:
            self.watch.disarm()

    def _drop_graph(self) -> None:
        """Destroy the graph now (CUDAGraph.reset), whoever else still refers to this object (a
        traceback's frames do, while a failure is recorded)."""
        graph, self.graph = self.graph, None
        if graph is not None:
            graph.reset()

    def release(self) -> None:
        """Free the graph before the process group is destroyed (from NCCL 2.26 the communicator's
        destruction waits for every graph that uses it); the watch stops first. The graph is reset even
        when the synchronize before it fails."""
        if self.watch is not None:
            self.watch.close()
        try:
            if self.device.type == "cuda":
                torch.cuda.synchronize()
        finally:
            self._drop_graph()


@contextlib.contextmanager
def released(captured: CapturedStep | None):
    """`captured` released when the block ends, on every path, before the caller goes on to destroy the
    process group. After a failure the block's exception is the one that propagates: a release that
    fails too is only printed, so the point's reason stays the first cause."""
    try:
        yield captured
    except BaseException:
        if captured is not None:
            try:
                captured.release()
            except Exception as e:  # noqa: BLE001 - secondary to the failure being raised
                print(f"training.cuda_graphs: releasing the graph after a failure also failed: "
                      f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise
    if captured is not None:
        captured.release()


def hang_stack() -> str:
    """The main thread's stack, for the error file of a hung rank (called from the watch's thread)."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    return "".join(traceback.format_stack(frame)) if frame is not None else ""
