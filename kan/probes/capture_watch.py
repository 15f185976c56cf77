"""What the capture check watches (kan/probes/capture.py runs it): a TorchDispatchMode that sees every aten
operator of one training step, a TorchFunctionMode that sees the Python call it came from, stand-ins
for the Python-level constructors and syncs that dispatch nothing, and where each operator ran (the
forward or backward of a module, the loss, the optimizer step). The kinds of finding and their fixes
are named here; kan/probes/capture.py's docstring says what breaks capture and why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..graphs import WARMUP_STEPS  # noqa: F401 (capture.py reads it here)

CHECK = "cuda_graph_capture"
# WARMUP_STEPS: as many eager calls as the trainer makes before it captures (the DDP + CUDA graphs
# recipe's 11): what a model starts doing on its 2nd to 11th call is in the captured step too, and a
# check that watched its 2nd call would miss it

WHAT = {
    "python": "a tensor made from Python values on the device (a host-to-device copy)",
    "copy": "a copy from the host to the device",
    "read": "a read back to the host (the host waits for the device)",
    "shape": "an output whose shape depends on the data (the host reads it back to size it)",
    "sync": "an explicit sync",
    "check": "a linear-algebra error check (the host reads the device's info flags back)",
}
FIXES = {
    "python": "make constants once (a registered buffer, or cached per device and dtype as kan/kernels/eager_bspline.py "
              "does), or use torch.full / a Python number",
    "copy": "keep the tensor on the device from the start (a registered buffer), not .to(device) in every step",
    "read": "keep values on the device: no .item(), .cpu(), .tolist(), print() or `if` on a tensor in the step "
            "(torch.where instead of an if)",
    "shape": "use fixed-shape operators: torch.where, masked_fill or a multiplication by the mask instead of "
             "boolean indexing, nonzero, unique or masked_select",
    "sync": "take the synchronize out of the step",
    "check": "use the _ex variant (torch.linalg.inv_ex, cholesky_ex, solve_ex, lu_factor_ex), which returns "
             "its info as a device tensor, and check that outside the step",
}
# operators whose output shape is read from the data (nonzero inside boolean indexing: aten.index)
DYNAMIC = {"nonzero", "nonzero_numpy", "argwhere", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
           "unique_consecutive", "unique_dim_consecutive", "bincount", "masked_scatter_backward"}
READS = {"_local_scalar_dense", "item", "equal", "is_nonzero"}
# torch.linalg.inv, cholesky, solve, ... end with this check, which reads the device's info flags
CHECKS = {"_linalg_check_errors"}
# torch.tensor & co.: a tensor made from Python values; seen at the Python level (whatever name the
# caller imported it under: `from torch import tensor` too), since on meta they dispatch nothing
CONSTRUCTORS = {"tensor", "as_tensor", "asarray", "new_tensor"}
BOOL_INDEXED = {"index", "index_put", "index_put_", "_index_put_impl", "_index_put_impl_", "_unsafe_index_put"}
COPIES = {"_to_copy", "copy_", "copy", "_copy_from", "_copy_from_and_resize"}
# Python-level calls whose aten operators are the finding: the finding says which call it came from
API = {"item", "tolist", "cpu", "to", "numpy", "__bool__", "__float__", "__int__", "__index__", "__format__",
       "__repr__", "__str__", "equal", "nonzero", "unique", "masked_select", "argwhere", "__getitem__",
       "__setitem__", "__array__"}
PRINTS = {"__repr__", "__str__"}  # print(x): no operator on meta, a read back on a GPU


def _op_name(func) -> str:
    return f"{func.namespace}.{func.overloadpacket.__name__}"


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


class _Watch(TorchDispatchMode):
    """Sees every aten operator of the watched step; `findings` {(op, via, kind, where): count}."""

    def __init__(self, device: torch.device, where: Callable[[], str]) -> None:
        super().__init__()
        self.device, self.where = device, where
        self.recording = False
        self.quiet = 0  # > 0 inside a call already recorded at the Python level (torch.tensor, print)
        self.api: list[str] = []  # the Python calls the current operator runs inside (outermost first)
        self.findings: dict[tuple, int] = {}

    def note(self, op: str, kind: str, via: str = "") -> None:
        if self.recording:
            key = (op, via, kind, self.where())
            self.findings[key] = self.findings.get(key, 0) + 1

    def _on_device(self, t: torch.Tensor) -> bool:
        return t.device.type == self.device.type

    def _kind(self, func, args, kwargs) -> str | None:
        name = func.overloadpacket.__name__
        ins = _tensors((args, kwargs))
        if name in READS:
            return "read" if any(self._on_device(t) for t in ins) else None  # a CPU tensor read on the CPU: fine
        if name in DYNAMIC:
            return "shape" if any(self._on_device(t) for t in ins) else None
        if name in CHECKS:
            return "check" if any(self._on_device(t) for t in ins) else None
        if name in BOOL_INDEXED:
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            masks = [t for t in _tensors(indices) if t.dtype in (torch.bool, torch.uint8)]
            if masks and self._on_device(args[0]):
                return "shape"
            # an index tensor on the host used on the device: copied in at every step
            host = [t for t in _tensors(indices) if t.device.type == "cpu" and t.dim() > 0]
            return "copy" if host and self._on_device(args[0]) else None
        if name == "lift_fresh":  # torch.tensor(...) on a GPU; on meta it dispatches nothing (_constructors)
            return "python" if self._on_device(args[0]) else None
        if name in COPIES:
            src = args[1] if name in ("copy_", "copy", "_copy_from_and_resize") else args[0]
            if name == "_to_copy":
                dst_device = kwargs.get("device") or src.device
            elif name == "_copy_from":
                dst_device = args[1].device
            else:
                dst_device = args[0].device
            dst_device = torch.device(dst_device)
            if self._on_device(src) and dst_device.type == "cpu":
                return "read"
            if src.device.type == "cpu" and dst_device.type == self.device.type:
                return "copy"
        return None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = self._kind(func, args, kwargs) if self.recording and not self.quiet else None
        if kind:
            self.note(_op_name(func), kind, self.api[0] if self.api else "")
        try:
            return func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):
            # meta has no data: an operator that reads it gets stand-in values (ones), so that the step
            # goes on and every finding is listed; anything else is the model's own failure
            if self.device.type != "meta" or not (kind or self._kind(func, args, kwargs)):
                raise
            return _stand_in(func, args, kwargs)


def _stand_in(func, args, kwargs):
    """`func` run on CPU tensors of ones shaped like the meta ones; its tensors back on meta (a read
    to the host keeps its CPU result; an in-place operator returns its own meta tensor)."""
    def ones(t):
        return torch.ones(t.shape, dtype=t.dtype) if isinstance(t, torch.Tensor) and t.device.type == "meta" else t

    name = func.overloadpacket.__name__
    out = func(*tree_map(ones, args), **tree_map(ones, kwargs))
    if name.endswith("_") and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
        return args[0]
    if name in COPIES:
        return out
    return tree_map(lambda t: torch.empty(t.shape, dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else t,
                    out)


class _Calls(TorchFunctionMode):
    """Which Python call an operator runs inside (Tensor.item, Tensor.cpu, ...); printing a tensor is
    recorded here, since on meta it runs no operator."""

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        w = self.watch
        if name in CONSTRUCTORS and w.recording and not w.quiet:  # (quiet: inside _constructors' stand-in)
            return made_from_python(w, func, f"Tensor.{name}" if name == "new_tensor" else f"torch.{name}",
                                    args, kwargs or {})
        if name not in API or not w.recording:
            return func(*args, **(kwargs or {}))
        label = f"Tensor.{name}" if "Tensor" in getattr(func, "__qualname__", "") else f"torch.{name}"
        printed = name in PRINTS and args and isinstance(args[0], torch.Tensor) and w._on_device(args[0])
        if printed and not w.quiet:
            w.note(label, "read", "print")
        w.api.append(label)
        w.quiet += bool(printed)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            w.quiet -= bool(printed)
            w.api.pop()


def made_from_python(watch: _Watch, func, label: str, args, kwargs):
    """torch.tensor & co., noted where the tensor lands on the device from Python values: on meta
    torch.tensor(..., device=x.device) dispatches no operator at all (on a GPU it is aten.lift_fresh
    of a copied tensor, kept quiet here: one finding, not two)."""
    watch.quiet += 1
    try:
        out = func(*args, **kwargs)
    finally:
        watch.quiet -= 1
    data = (args[1] if len(args) > 1 else kwargs.get("data")) if label == "Tensor.new_tensor" else \
        (args[0] if args else kwargs.get("data"))
    already = isinstance(data, torch.Tensor) and data.device == out.device
    if isinstance(out, torch.Tensor) and watch._on_device(out) and not already:
        watch.note(label, "python")
    return out


@contextlib.contextmanager
def _constructors(watch: _Watch) -> Iterator[None]:
    """torch.tensor & co. and the syncs, replaced for the watched step. The constructors are seen
    twice over: _Calls sees every call in the forward, whatever name the caller imported it under
    (`from torch import tensor` holds the original, which no patch reaches); a custom backward runs
    outside the function mode, so there the patched `torch.tensor` is what sees them. A synchronize
    is no operator anywhere."""
    def constructor(orig, label):
        return lambda *args, **kwargs: made_from_python(watch, orig, label, args, kwargs)

    def sync(orig, label):
        def wrapper(*args, **kwargs):
            watch.note(label, "sync")
            return orig(*args, **kwargs) if watch.device.type == "cuda" else None
        return wrapper

    patches = [(torch, "tensor", constructor, "torch.tensor"),
               (torch, "as_tensor", constructor, "torch.as_tensor"),
               (torch, "asarray", constructor, "torch.asarray"),
               (torch.Tensor, "new_tensor", constructor, "Tensor.new_tensor"),
               (torch.cuda, "synchronize", sync, "torch.cuda.synchronize")]
    for owner, label in ((getattr(torch.cuda, "Stream", None), "torch.cuda.Stream.synchronize"),
                         (getattr(torch.cuda, "Event", None), "torch.cuda.Event.synchronize"),
                         (getattr(torch, "accelerator", None), "torch.accelerator.synchronize")):
        if owner is not None and hasattr(owner, "synchronize"):
            patches.append((owner, "synchronize", sync, label))
    saved = []
    for owner, attr, make, label in patches:
        saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, make(saved[-1][2], label))
    try:
        yield
    finally:
        for owner, attr, orig in reversed(saved):
            setattr(owner, attr, orig)


class _Places:
    """Where an operator runs: the innermost module's forward (hooks), the backward of the module
    whose forward made the autograd node being run, the loss, or the optimizer step."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.phase = "step"
        self.stack: list[str] = []
        self.owner: dict[int, str] = {}  # id(autograd node) -> place
        self._keep: list = []  # the nodes themselves: an id stays theirs while they live
        self._bounds: list[set] = []
        self.handles = []
        for name, mod in model.named_modules():
            label = f"{name} ({type(mod).__name__})" if name else f"the model ({type(mod).__name__})"
            self.handles.append(mod.register_forward_pre_hook(self._enter(label)))
            self.handles.append(mod.register_forward_hook(self._leave(label)))

    def _enter(self, label):
        def hook(mod, inputs):
            self.stack.append(label)
            self._bounds.append({id(t.grad_fn) for t in _tensors(inputs) if t.grad_fn is not None})
        return hook

    def _leave(self, label):
        def hook(mod, inputs, output):
            self.own(output, label, self._bounds.pop() if self._bounds else set())
            if self.stack:
                self.stack.pop()
        return hook

    def own(self, output, label: str, bounds: set = frozenset()) -> None:
        """The autograd nodes `output` was made by, not yet owned and not before `bounds`: `label`'s
        (an inner module's forward ends first, so it owns its own nodes)."""
        todo = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or id(node) in self.owner or id(node) in bounds:
                continue
            self.owner[id(node)] = label
            self._keep.append(node)
            todo.extend(n for n, _ in node.next_functions)

    def __call__(self) -> str:
        if self.phase == "forward":
            return f"the forward of {self.stack[-1]}" if self.stack else "the forward"
        if self.phase == "backward":
            node = torch._C._current_autograd_node()
            label = self.owner.get(id(node)) if node is not None else None
            return f"the backward of {label}" if label else "the backward"
        return {"loss": "the loss", "optimizer": "the optimizer step (Adam, capturable)"}.get(self.phase, self.phase)

    def close(self) -> None:
        for h in self.handles:
            h.remove()
