"""Can it be captured? Whether a model's training step can run as one CUDA graph
(training.cuda_graphs, kan/graphs.py), found on any machine, without a GPU.

A captured step replays device work only: the host does not take part. What breaks capture (or
silently freezes a value into the graph), as PyTorch's CUDA-graph notes list it:

  python  a tensor made from Python values on the device (torch.tensor(..., device=x.device),
          x.new_tensor(...)): built on the host and copied over
  copy    a host tensor copied to the device (.to(device), copy_ of a CPU tensor, a host index
          tensor indexing a device tensor: x[:, torch.tensor([0, 2])])
  read    the device read back to the host: .item(), float(), bool() and `if` on a tensor
          (aten._local_scalar_dense), .cpu(), .tolist(), printing a tensor, torch.equal
  shape   an output whose shape depends on the data, so the host must read it to size it:
          nonzero, boolean-mask indexing, unique, masked_select
  sync    an explicit synchronize (torch.cuda.synchronize, a stream's or an event's)
  check   a linear-algebra error check that reads the device's info flags (torch.linalg.inv,
          cholesky, solve: aten._linalg_check_errors; the _ex variants do not)

How: after as many eager warm-up steps as the trainer makes before it captures (kan/graphs.py's
11: caches built on first use, Adam's state, and whatever a model starts doing on a later call),
one more training step
(forward, loss, backward, and Adam with capturable=True and its rate a device tensor, as
training.cuda_graphs runs it) goes under a TorchDispatchMode that sees every aten operator, a
TorchFunctionMode that sees the Python call it came from (Tensor.item, Tensor.__repr__, ...; and
torch.tensor under any name it was imported by), and
stand-ins for the Python-level constructors and syncs that dispatch nothing on every device. It
runs on PyTorch's `meta` device by default: tensors without data, so the host (the CPU) and the
device (meta) are told apart as they are on a GPU, and a 10^9-parameter model costs nothing. An
operator that needs data (.item(), nonzero) is recorded, then answered with stand-in values
(ones) so that the step goes on and every finding is listed. Each finding names the operator and
where it ran: the forward of a module (module hooks), the backward of a module (the autograd node
being run, mapped back to the module whose forward made it), the loss, or the optimizer step.

Legitimately fine, and not flagged: allocations and fills on the device (torch.zeros(n,
device=x.device), torch.full, torch.where(c, x, 0.0), whose aten.scalar_tensor is a fill kernel
on the device), Python numbers as operands (x * 2.0), a 0-dim CPU tensor as an operand (PyTorch
passes its value to the kernel, no copy), a CPU tensor read on the CPU (no device sync), and
Adam's own state: its step counter is a device tensor under capturable=True. What no mode can see:
Python state (a counter in self that changes every step is frozen into the graph); the report says
the check sees operators only.

Kernel paths: the built-in KAN's cubic B-spline layers run the eager kernels or the fused Triton
ones, whichever is faster on the GPU (kan/probes/kernel_choice.py), so both are checked; on meta the
Triton path's Python side runs with its launches stubbed (kan/_triton_bspline.launch_stubbed),
so it needs neither a GPU nor triton. numba's kernels run on CPUs only, where nothing is captured.

    python -m kan.probes.capture [--device cuda]      the built-in models, on meta or on the device itself

The watching itself (the modes, the stand-ins, where an operator ran) is kan/probes/capture_watch.py.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from ..kernels import numba_bspline, triton_bspline
from .capture_watch import CHECK, FIXES, WARMUP_STEPS, WHAT, _Calls, _constructors, _Places, _Watch

@contextlib.contextmanager
def _capturable_adam_on(device: torch.device) -> Iterator[None]:
    """Adam's capturable=True asserts a device it knows (cuda, xla, ...): on meta, meta is one."""
    import torch.optim.adam as adam

    get = getattr(adam, "_get_capturable_supported_devices", None)
    if device.type != "meta" or get is None:
        yield
        return
    adam._get_capturable_supported_devices = lambda *a, **k: [*get(*a, **k), "meta"]
    try:
        yield
    finally:
        adam._get_capturable_supported_devices = get


def _batch(widths, batch: int, loss: str, device: torch.device, grid_range=(-1.0, 1.0)):
    lo, hi = grid_range
    x = torch.rand(batch, widths[0]) * (hi - lo) + lo
    y = torch.randint(0, widths[-1], (batch,)) if loss == "cross_entropy" else torch.rand(batch, widths[-1])
    return x.to(device), y.to(device)


def _step(model, opt, loss_fn, x, y, places: _Places | None = None) -> None:
    def at(phase):
        if places is not None:
            places.phase = phase

    opt.zero_grad(set_to_none=True)
    at("forward")
    out = model(x)
    at("loss")
    loss = loss_fn(out, y)
    if places is not None:
        places.own(loss, "the loss")
    at("backward")
    loss.backward()
    at("optimizer")
    opt.step()
    at("step")


def run_path(model: torch.nn.Module, widths, loss: str = "mse", device: str | torch.device = "meta",
             batch: int = 4, grid_range=(-1.0, 1.0)) -> dict:
    """One kernel path (the caller sets it): {"pass", "findings", "error"} of a warmed-up step."""
    device = torch.device(device)
    loss_fn = F.cross_entropy if loss == "cross_entropy" else F.mse_loss
    probe = copy.deepcopy(model).to(device)
    x, y = _batch(widths, batch, loss, device, grid_range)
    places = _Places(probe)
    watch = _Watch(device, places)
    error = None
    try:
        params = [p for p in probe.parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=1e-3, capturable=True, foreach=True)
        for group in opt.param_groups:  # the rate a device tensor, as kan/graphs.make_optimizer makes it
            group["lr"] = torch.full((), 1e-3, device=device)
        with _capturable_adam_on(device), watch, _Calls(watch), _constructors(watch):
            for _ in range(WARMUP_STEPS):
                _step(probe, opt, loss_fn, x, y)
            watch.recording = True
            _step(probe, opt, loss_fn, x, y, places)
            watch.recording = False
    except Exception as e:  # noqa: BLE001 - the model's own failure on this device: said, not guessed
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}".rstrip(": ")
    finally:
        watch.recording = False
        places.close()
    found = [{"op": op, "via": via, "kind": kind, "where": where, "count": n}
             for (op, via, kind, where), n in watch.findings.items()]
    return {"pass": False if found else (None if error else True), "findings": found, "error": error}


@contextlib.contextmanager
def kernel_path(path: str, device: torch.device) -> Iterator[dict]:
    """The built-in KAN's cubic B-spline layers on `path` (eager | triton) inside the block; yields
    {"launches": n} counting the Triton kernels launched (stubbed off CUDA)."""
    seen = {"launches": 0}
    with contextlib.ExitStack() as stack:
        stack.enter_context(numba_bspline.disabled())
        if path == "eager":
            stack.enter_context(triton_bspline.disabled())
        elif device.type == "cuda":
            old = triton_bspline._SWITCH.enabled
            triton_bspline.set_enabled(True)
            stack.callback(triton_bspline.set_enabled, old)
            seen["launches"] = None  # real kernels: not counted
        else:
            def count(name, args):
                seen["launches"] += 1

            stack.enter_context(triton_bspline.launch_stubbed(count))
        yield seen


def paths_for(model: torch.nn.Module, device: torch.device) -> list[str]:
    """The kernel paths a CUDA device may take for `model` (kan/probes/kernel_choice.py)."""
    from .kernel_choice import fused_layers

    if not fused_layers(model):
        return ["default"]
    if device.type == "cuda" and not triton_bspline.available():
        return ["eager"]
    return ["eager", "triton"]


def _say(f: dict, path: str, num_paths: int) -> str:
    via = f" ({f['via']})" if f["via"] and f["via"] != f["op"] else ""
    times = f" x{f['count']}" if f["count"] > 1 else ""
    on = f" [{path} kernels]" if num_paths > 1 else ""
    return f"{f['op']}{via} in {f['where']}{times}: {WHAT[f['kind']]}{on}"


def check(model: torch.nn.Module, widths, loss: str = "mse", device: str | torch.device = "meta",
          grid_range=(-1.0, 1.0)) -> dict:
    """The readiness check {check, pass, detail, fix, paths, findings} of `model` on every kernel
    path a CUDA device may take, on `device` (meta: any machine; cuda: the device's own kernels)."""
    device = torch.device(device)
    paths = paths_for(model, device)
    results, lines, findings = {}, [], []
    for path in paths:
        with kernel_path(path, device) as seen:
            r = run_path(model, widths, loss, device, grid_range=grid_range)
        if path == "triton" and seen["launches"] == 0 and r["pass"] is not None:
            r = {**r, "pass": None, "error": "the Triton path was not taken"}
        results[path] = r
        for f in r["findings"]:
            findings.append({**f, "path": path})
            lines.append(_say(f, path, len(paths)))
    verdicts = [r["pass"] for r in results.values()]
    ok = False if False in verdicts else (None if None in verdicts else True)
    kinds = list(dict.fromkeys(f["kind"] for f in findings))
    stub = " with its launches stubbed" if device.type != "cuda" else ""
    on = f" on both kernel paths a GPU may take (eager; Triton{stub})" if "triton" in paths else ""
    on = " on the eager kernels (no triton here)" if paths == ["eager"] else on
    if ok is False:
        shown = lines[:6] + ([f"and {len(lines) - 6} more"] if len(lines) > 6 else [])
        detail = "cannot be captured as a CUDA graph: " + "; ".join(shown)
    elif ok is None:
        why = "; ".join(f"{p}: {r['error']}" for p, r in results.items() if r["pass"] is None)
        detail = f"not checked: the training step cannot run on the {device.type} device ({why})"
    else:
        detail = (f"forward, loss, backward and Adam's step (capturable) use only device operators{on}: "
                  f"no tensor from Python values, no host copy or read, no data-dependent shape, no sync "
                  f"(checked on the {device.type} device; Python state in the model is not seen)")
    fix = "; ".join(FIXES[k] for k in kinds) if kinds else "; ".join(FIXES.values())
    return {"check": CHECK, "pass": ok, "detail": detail, "fix": fix, "paths": paths,
            "findings": findings}


def main(argv: list[str] | None = None) -> int:
    """The built-in models' check, printed as one JSON line each; exit 1 when one fails."""
    import argparse

    from ..contract.point import ModelConfig
    from ..models import build_model

    ap = argparse.ArgumentParser(prog="python -m kan.probes.capture", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="meta", help="meta (any machine) or cuda (the device's own kernels)")
    ap.add_argument("--widths", default="2,64,1")
    args = ap.parse_args(argv)
    widths = tuple(int(w) for w in args.widths.split(","))
    bad = 0
    for impl, basis in (("kanscale", "bspline"), ("kanscale", "rbf"), ("kanscale", "chebyshev"), ("mlp", "bspline"),
                        ("mlp_matched", "bspline")):
        torch.manual_seed(0)
        model = build_model(ModelConfig(impl=impl, basis=basis, widths=widths))
        r = check(model, widths, device=args.device, grid_range=(-2.0, 2.0))
        bad += r["pass"] is not True
        print(json.dumps({"impl": impl, "basis": basis, **{k: r[k] for k in ("pass", "paths", "detail")}}))
    return 1 if bad else 0


def box(folder: str) -> None:
    """The plan's capture check of a study's models, in the child process of plan/factories.py:
    folder/request.json {"models": [{"impl", "settings", "loss"}], ...} -> folder/result.json
    {"results": [check result per model]}; folder/stage names the model being checked."""
    from pathlib import Path

    from ..contract import factory
    from ..contract.point import ModelConfig
    from .factory_check import _cuda_to_meta, _needs_cuda
    from ..models import build_model

    folder = Path(folder)
    request = json.loads((folder / "request.json").read_text())
    sys.argv = [str(Path(__file__).parents[1] / "train.py")]
    out = []
    for m in request["models"]:
        impl, settings = m["impl"], {**m["settings"], "grid_range": tuple(m["settings"]["grid_range"])}
        (folder / "stage").write_text(f"at model.impl {impl!r}")
        torch.manual_seed(0)
        try:
            if factory.is_factory(impl):
                try:
                    model, modes = factory.build(impl, settings), contextlib.nullcontext()
                except factory.FactoryError as e:
                    if not _needs_cuda(e):
                        raise
                    with torch.device("meta"), _cuda_to_meta():
                        model = factory.build(impl, settings)
                    modes = _cuda_to_meta()
            else:
                model, modes = build_model(ModelConfig(impl=impl, **settings)), contextlib.nullcontext()
            with modes:
                out.append(check(model, settings["widths"], m["loss"], grid_range=settings["grid_range"]))
        except Exception as e:  # noqa: BLE001 - the model cannot be built here: unchecked, said so
            out.append({"check": CHECK, "pass": None, "detail": f"not checked: building it raised "
                                                               f"{type(e).__name__}: {e}", "fix": "", "findings": []})
    (folder / "result.json.part").write_text(json.dumps({"results": out}))
    (folder / "result.json.part").rename(folder / "result.json")
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
