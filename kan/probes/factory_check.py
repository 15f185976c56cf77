"""The plan's check of one model factory (kan/contract/factory.py), run in a child process of its own so that
the user's code cannot hang, exit or change the planner (workflow/scripts/plan/factories.py starts
it, with a time limit, and reads what it finds):

    python -c BOOT <folder>    folder/request.json  {"impl", "settings", "sys_path"}   (in)
                               folder/stage          import | call | forward            (as it goes)
                               folder/result.json    {"error"} | {"checked": device, "note"?}
                                                     | {"unchecked": why}                (out)

The check imports the factory, calls it with the study's settings and runs one forward pass of 2
rows on the CPU. A factory that builds on CUDA where there is none is checked again on the meta
device (shapes only), with cuda turned into meta; where that fails too it is left unchecked (the
planner warns), not refused: it may run where the GPUs are.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..contract import factory

# the child's whole command line: the parent's import path first (a module factory imports in the
# child as it would in the planner), then this module
BOOT = ("import json, sys; sys.path[:] = json.load(open(sys.argv[1] + '/request.json'))['sys_path']; "
        "from kan.probes.factory_check import main; main(sys.argv[1])")


def _is_cuda(device) -> bool:
    import torch

    return (isinstance(device, str) and device.split(":")[0] == "cuda") or (
        isinstance(device, torch.device) and device.type == "cuda") or (
        isinstance(device, int) and not isinstance(device, bool))


def _cuda_to_meta():
    """A torch function mode that builds on meta what asks for cuda: device="cuda" arguments,
    .cuda() and .to("cuda")."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0].to("meta")
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = "meta"
            if func is torch.Tensor.to:
                args = tuple("meta" if i > 0 and not isinstance(a, (bool, torch.dtype, torch.Tensor))
                             and _is_cuda(a) else a for i, a in enumerate(args))
            return func(*args, **kwargs)

    return CudaToMeta()


def _needs_cuda(error: Exception) -> bool:
    import torch

    text = str(error).lower()
    return not torch.cuda.is_available() and ("cuda" in text or "nvidia" in text)


def _run(impl: str, settings: dict, device: str, at) -> None:
    at("import")
    fn = factory.load(impl)
    at("call")
    model = factory.call(impl, fn, settings)
    at("forward")
    factory.check_shape(impl, model, settings["widths"], device=device)


def check(impl: str, settings: dict, at=lambda stage: None) -> dict:
    """What the plan learns of one factory (the module docstring's result.json)."""
    try:
        _run(impl, settings, "cpu", at)
        return {"checked": "cpu"}
    except factory.FactoryError as e:
        if not _needs_cuda(e):
            return {"error": str(e)}
        cause = str(e).removeprefix(f"{impl!r}: ")
    import torch

    try:
        with torch.device("meta"), _cuda_to_meta():
            _run(impl, settings, "meta", at)
    except factory.FactoryError as e:
        return {"unchecked": f"not checked: it needs CUDA, which this machine lacks ({cause}), and on the meta "
                             f"device {str(e).removeprefix(f'{impl!r}: ')}; it is first built where it runs"}
    return {"checked": "meta", "note": f"checked on the meta device (shapes only): it needs CUDA, which this "
                                       f"machine lacks ({cause})"}


def main(folder: str) -> None:
    folder = Path(folder)
    request = json.loads((folder / "request.json").read_text())
    impl = request["impl"]
    # what the trainer's command line starts with (python -m kan.train --impl ...): a module that
    # parses arguments at import fails here as it would there
    sys.argv = [str(Path(__file__).parents[1] / "train.py"), "--impl", impl]

    def at(stage: str) -> None:
        (folder / "stage").write_text(stage)

    settings = {**request["settings"], "grid_range": tuple(request["settings"]["grid_range"])}  # JSON has no tuple
    result = check(impl, settings, at)
    (folder / "result.json.part").write_text(json.dumps(result))
    (folder / "result.json.part").rename(folder / "result.json")
    # no atexit hooks, no waiting for threads the user's code left running
    os._exit(0)
