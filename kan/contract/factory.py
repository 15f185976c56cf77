"""Your own model as an implementation: `model.impl` names a factory function besides the built-in
names, as `package.module:function` (importable where the trainer runs) or `path/to/file.py:function`
(the workflow resolves a relative path against the config file that names it, plan/factories.py).

The factory's contract (docs/your-model.md): it is called with the study's model settings as
keyword arguments, only those its signature takes (all of them if it takes **kwargs):

    widths: list[int]              layer widths, input first (widths[0] = data inputs)
    grid_size: int                 grid intervals per input
    spline_order: int              B-spline order (3 = cubic)
    grid_range: tuple[float, float]
    basis: str                     bspline | rbf | chebyshev

and returns a torch `nn.Module` mapping (batch, widths[0]) to (batch, widths[-1]). The loop seeds
torch before calling it (identical initial weights on every rank), moves the module to the rank's
device and wraps it in DDP as it does the built-in models.

No torch import at module level: the plan imports the names below in processes that start fast.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

# the built-in implementations (kan/models.py; pykan runs in its own environment)
BUILTIN = ("kanscale", "mlp", "mlp_matched", "pykan")
# target:function; a target ending in .py is a file, else a dotted module name
SPEC = re.compile(r"(?P<target>[^:\s]+):(?P<function>[A-Za-z_][A-Za-z0-9_]*)")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
FACTORY_FORMS = "a factory 'package.module:function' or 'path/to/file.py:function'"
SETTINGS = ("widths", "grid_size", "spline_order", "grid_range", "basis")


class FactoryError(ValueError):
    """A factory that cannot give a model; the message names the implementation string and the cause."""


def is_factory(impl: str) -> bool:
    return impl not in BUILTIN


def readiness_on(enabled: bool | None, impls: list[str]) -> bool:
    """experiments.readiness.enabled: true, false, or null = where model.impl lists your own factory."""
    return any(is_factory(i) for i in impls) if enabled is None else enabled


def parse(impl: str) -> tuple[str, str, bool]:
    """(target, function, is_file) of 'pkg.mod:fn' or 'path/file.py:fn'; FactoryError otherwise."""
    m = SPEC.fullmatch(impl)
    if not m:
        raise FactoryError(f"{impl!r} is not allowed; allowed values: {', '.join(BUILTIN)}, or {FACTORY_FORMS}")
    target, function = m["target"], m["function"]
    is_file = target.endswith(".py")
    if not is_file and not MODULE.fullmatch(target):
        raise FactoryError(f"{impl!r}: {target!r} is neither a file ending in .py nor a dotted module name")
    return target, function, is_file


def short_name(impl: str) -> str:
    """What tables and figures call it: 'tiny_kan.py:build' for a file (no folders), the string for a module."""
    if not is_factory(impl):
        return impl
    target, function, is_file = parse(impl)
    return f"{Path(target).name}:{function}" if is_file else impl


def label(impl: str) -> str:
    """The name in a point's id (letters, digits, _): 'tiny_kan_build', 'inkan_network_KANNetwork';
    a built-in's is its name."""
    if not is_factory(impl):
        return impl
    target, function, is_file = parse(impl)
    stem = Path(target).stem if is_file else target
    return re.sub(r"[^A-Za-z0-9]+", "_", f"{stem}_{function}").strip("_")


def impl_problem(impl: str, sha256: str) -> tuple[str, str] | None:
    """(config key, message) when `impl` is no implementation, or its content hash does not fit it (a
    file factory has one, nothing else has)."""
    if not is_factory(impl):
        return ("model.impl_sha256", f"the built-in {impl} has no content hash") if sha256 else None
    try:
        is_file = parse(impl)[2]
    except FactoryError as e:
        return "model.impl", str(e)
    if is_file != bool(sha256):
        return "model.impl_sha256", f"a file factory has its content hash, a module none: {impl!r}, {sha256!r}"
    return None


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load(impl: str):
    """The factory function; FactoryError naming `impl` when the file or module is missing, does not
    import, or has no such callable. A file is loaded under a name of its own (its content hash), so
    two factories in files of one name never shadow each other."""
    target, function, is_file = parse(impl)
    if is_file:
        path = Path(target)
        if not path.is_file():
            raise FactoryError(f"{impl!r}: file {target} not found")
        name = f"kanscale_factory_{file_sha256(path)[:16]}"
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as e:
                del sys.modules[name]
                raise FactoryError(f"{impl!r}: importing {target} raised {type(e).__name__}: {e}") from e
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            raise FactoryError(f"{impl!r}: module {target} not found ({e}); install it where the trainer "
                               f"runs, or name a file 'path/to/file.py:{function}'") from e
        except Exception as e:
            raise FactoryError(f"{impl!r}: importing {target} raised {type(e).__name__}: {e}") from e
    fn = getattr(module, function, None)
    if fn is None:
        raise FactoryError(f"{impl!r}: {target} has no {function}")
    if not callable(fn):
        raise FactoryError(f"{impl!r}: {function} in {target} is a {type(fn).__name__}, not callable")
    return fn


def settings(cfg) -> dict:
    """What a factory is called with for a kan.contract.point.ModelConfig (the contract above)."""
    return {"widths": list(cfg.widths), "grid_size": cfg.grid_size, "spline_order": cfg.spline_order,
            "grid_range": tuple(cfg.grid_range), "basis": cfg.basis}


def settings_for(fn, settings: dict) -> dict:
    """The settings `fn` takes: all with **kwargs, else those its signature names."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: give everything
        return dict(settings)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(settings)
    names = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                  inspect.Parameter.KEYWORD_ONLY)}
    return {k: v for k, v in settings.items() if k in names}


def build(impl: str, settings: dict):
    """The module the factory returns for `settings` (SETTINGS); FactoryError when the call raises or
    returns something that is not an nn.Module."""
    return call(impl, load(impl), settings)


def call(impl: str, fn, settings: dict):
    """build's second half: the loaded factory `fn` called with the settings it takes."""
    from torch import nn

    try:
        model = fn(**settings_for(fn, settings))
    except Exception as e:
        raise FactoryError(f"{impl!r}: calling it raised {type(e).__name__}: {e}") from e
    if not isinstance(model, nn.Module):
        raise FactoryError(f"{impl!r}: returned a {type(model).__name__}, not a torch nn.Module")
    return model


def check_shape(impl: str, model, widths, device: str = "cpu") -> None:
    """One forward pass of 2 rows inside the grid range on `device` (the CPU; meta checks shapes
    only): the output must be (2, widths[-1])."""
    import torch

    x = torch.rand(2, widths[0], device=device) * 2 - 1
    try:
        with torch.no_grad():
            y = model(x)
    except Exception as e:
        raise FactoryError(f"{impl!r}: its forward pass of a (2, {widths[0]}) batch raised "
                           f"{type(e).__name__}: {e}") from e
    shape = tuple(getattr(y, "shape", ()))
    if shape != (2, widths[-1]):
        raise FactoryError(f"{impl!r}: maps a (2, {widths[0]}) batch to {shape or type(y).__name__}, not "
                           f"(2, {widths[-1]}) as model.widths {list(widths)} says")
