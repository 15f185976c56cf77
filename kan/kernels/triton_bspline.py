"""Optional Triton kernels for the cubic B-spline KAN layer (CUDA only; import-guarded).

The GEMMs stay with cuBLAS; Triton fuses everything around them into one pass each way:

- forward: one kernel writes the packed features F (B, 1 + K, I) = [silu(x) | B_0 .. B_{K-1}]
  densely (zeros included), so there is no zero-fill, Horner, scatter or silu pass;
- backward: one kernel computes grad_x = grad_F[:, 0] * silu'(x) + sum_r grad_F[:, 1 + k_r] B'_{k_r}(x)
  reading only the order + 1 local columns of grad_F.

The same interface as kan/kernels/eager_bspline.py and kan/kernels/numba_bspline.py. Cubic only
(spline_order 3, the studied layer); other orders use the eager path. The cubic
cardinal B-spline is evaluated in its symmetric, cancellation-free form
    N(z) = M(|z - 2|),  M(a) = ((2 - a)_+^3 - 4 (1 - a)_+^3) / 6.
`available()` is False when triton is not importable; then nothing here is used. With
TRITON_INTERPRET=1 the kernels also run on CPU tensors (slowly), which is how CPU-only CI
checks them.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator

import torch

from .switch import KernelSwitch
from ..env import triton_interpret

try:  # optional dependency
    import triton
    import triton.language as tl

    _HAVE_TRITON = True
except Exception:  # ImportError, or a broken install on a CPU-only machine
    _HAVE_TRITON = False

_SWITCH = KernelSwitch()
_INTERPRET = triton_interpret()
BLOCK = 256


def available() -> bool:
    return _HAVE_TRITON and _SWITCH.enabled


def usable(x: torch.Tensor, spline_order: int) -> bool:
    """Whether the layer should take the Triton path for this input."""
    return (
        available()
        and spline_order == 3
        and x.dtype in (torch.float32, torch.float64)
        and (x.is_cuda or _INTERPRET)
    )


set_enabled = _SWITCH.set_enabled
disabled = _SWITCH.disabled


class _StubLaunch:
    """Stands in for a @triton.jit kernel: `kernel[grid](*args, **meta)` calls `on_launch(name, args)`."""

    def __init__(self, name: str, on_launch: Callable) -> None:
        self.name, self.on_launch = name, on_launch

    def __getitem__(self, grid):
        return lambda *args, **meta: self.on_launch(self.name, args)


@contextlib.contextmanager
def launch_stubbed(on_launch: Callable = lambda name, args: None) -> Iterator[None]:
    """This path taken for every cubic layer on any device (meta, the CPU), its Python side run as on
    a GPU and each kernel launch replaced by `on_launch(name, args)`, which writes nothing: what the
    capture check (kan/probes/capture.py) needs on a machine without a GPU or triton."""
    g = globals()
    names = ("usable", "_features_kernel", "_grad_x_kernel", "triton")
    saved = {n: g[n] for n in names if n in g}
    g["usable"] = lambda x, spline_order: spline_order == 3 and x.dtype in (torch.float32, torch.float64)
    g["_features_kernel"] = _StubLaunch("_features_kernel", on_launch)
    g["_grad_x_kernel"] = _StubLaunch("_grad_x_kernel", on_launch)
    g["triton"] = types.SimpleNamespace(cdiv=lambda a, b: -(-a // b))
    try:
        yield
    finally:
        for n in names:
            if n in saved:
                g[n] = saved[n]
            else:
                g.pop(n, None)


if _HAVE_TRITON:

    @triton.jit
    def _features_kernel(x_ptr, f_ptr, c_ptr, n, num_in, K: tl.constexpr, BLOCK_N: tl.constexpr):
        # one program: BLOCK_N inputs (b, i) of x (B, I); writes F[b, :, i], F (B, 1 + K, I)
        pid = tl.program_id(0)
        offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        b = offs // num_in
        i = offs - b * num_in
        out = f_ptr + b * ((K + 1) * num_in) + i
        t0 = tl.load(c_ptr)  # first knot and 1/h, in x's dtype (scalar args would be fp32)
        inv_h = tl.load(c_ptr + 1)
        tl.store(out, x / (1.0 + tl.exp(-x)), mask=mask)
        u = (x - t0) * inv_h
        for k in tl.static_range(K):
            a = tl.abs(u - (k + 2.0))
            t1 = tl.maximum(2.0 - a, 0.0)
            t2 = tl.maximum(1.0 - a, 0.0)
            val = (t1 * t1 * t1 - 4.0 * (t2 * t2 * t2)) / 6.0
            tl.store(out + (k + 1) * num_in, val, mask=mask)

    @triton.jit
    def _grad_x_kernel(x_ptr, gf_ptr, gx_ptr, c_ptr, n, num_in, K: tl.constexpr, BLOCK_N: tl.constexpr):
        # grad_x[b, i] = gF[b, 0, i] silu'(x) + sum over the 4 local k of gF[b, 1 + k, i] B_k'(x)
        pid = tl.program_id(0)
        offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        b = offs // num_in
        i = offs - b * num_in
        row = gf_ptr + b * ((K + 1) * num_in) + i
        t0 = tl.load(c_ptr)
        inv_h = tl.load(c_ptr + 1)
        sig = 1.0 / (1.0 + tl.exp(-x))
        g = tl.load(row, mask=mask, other=0.0) * (sig * (1.0 + x * (1.0 - sig)))
        u = (x - t0) * inv_h
        j = tl.floor(u)
        for r in tl.static_range(4):
            kf = j - 3.0 + r
            ok = mask & (kf >= 0.0) & (kf < K)
            k = tl.where(ok, kf, 0.0).to(tl.int32)
            gk = tl.load(row + (k + 1) * num_in, mask=ok, other=0.0)
            z = u - kf - 2.0
            a = tl.abs(z)
            t1 = tl.maximum(2.0 - a, 0.0)
            t2 = tl.maximum(1.0 - a, 0.0)
            dm = 2.0 * t2 * t2 - 0.5 * t1 * t1  # dM/da
            sgn = tl.where(z >= 0.0, 1.0, -1.0)
            g += tl.where(ok, gk * (sgn * dm * inv_h), 0.0)
        tl.store(gx_ptr + offs, g, mask=mask)


def _consts(x: torch.Tensor, spline) -> torch.Tensor:
    # [t0, inv_h], made once per (device, dtype) by the layer's spline: no copy per call, so a
    # warmed-up forward and backward can be captured as a CUDA graph
    return spline.knots(x.device, x.dtype)


def features(x: torch.Tensor, spline, need_grad_x: bool):
    """x (B, I) -> F (B, 1 + K, I), and nothing more for grad_x (it recomputes from x)."""
    x = x.contiguous()  # the kernel indexes x as flat (B * I)
    num_batch, num_in = x.shape
    out = torch.empty(num_batch, 1 + spline.num_basis, num_in, dtype=x.dtype, device=x.device)
    n = x.numel()
    _features_kernel[(triton.cdiv(n, BLOCK),)](x, out, _consts(x, spline), n, num_in, K=spline.num_basis, BLOCK_N=BLOCK)
    return out, ()


def grad_x(x: torch.Tensor, spline, saved, grad_y: torch.Tensor, eff: torch.Tensor) -> torch.Tensor:
    """grad_y (B, O), effective weight W (O, 1 + K, I) -> grad_x (B, I); grad_F = grad_y W is
    formed densely for every O (the kernel indexes it as contiguous)."""
    grad_f = torch.mm(grad_y, eff.view(eff.shape[0], -1))  # (B, (1+K) I), contiguous
    out = torch.empty_like(x)
    n = x.numel()
    _grad_x_kernel[(triton.cdiv(n, BLOCK),)](x.contiguous(), grad_f, out, _consts(x, spline), n, x.shape[1], K=spline.num_basis, BLOCK_N=BLOCK)
    return out
