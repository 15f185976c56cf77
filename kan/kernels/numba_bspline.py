"""Optional fused CPU kernels (numba) for the cubic B-spline KAN layer; import-guarded.

The same interface as kan/kernels/eager_bspline.py and kan/kernels/triton_bspline.py, for CPU tensors: one
parallel pass writes the packed features F (B, 1 + K, I) = [silu(x) | B_0 .. B_{K-1}], one
computes grad_x from grad_F's base row and the 4 local spline rows. The eager path needs ~10
tensor passes for the same work (zero-fill, Horner, index arithmetic, scatter, silu; gather,
products, sums); the GEMMs are unchanged. numba compiles these with its bundled LLVM on first
use (about a second per dtype, cached on disk when the package directory is writable); no
system compiler is needed and nothing here is required: without numba the eager path runs.
"""

from __future__ import annotations

import math

import torch

from .switch import KernelSwitch

try:  # optional dependency
    import numba

    _HAVE_NUMBA = True
except Exception:
    _HAVE_NUMBA = False

_SWITCH = KernelSwitch()


def available() -> bool:
    return _HAVE_NUMBA and _SWITCH.enabled


def usable(x: torch.Tensor, spline_order: int) -> bool:
    return (
        available()
        and spline_order == 3
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and x.shape[0] * x.shape[1] > 0
    )


set_enabled = _SWITCH.set_enabled
disabled = _SWITCH.disabled


if _HAVE_NUMBA:

    @numba.njit(parallel=True, cache=True)
    def _features(x, out, t0, inv_h, num_intervals):
        # x (B, I), out (B, 1 + K, I); uniform cubic B-splines on knots t0 + m h; math in float64
        num_batch, num_in = x.shape
        nb = out.shape[1] - 1
        for b in numba.prange(num_batch):
            out[b, 1:, :] = 0
            for i in range(num_in):
                xv = float(x[b, i])
                out[b, 0, i] = xv / (1.0 + math.exp(-xv))
                u = (xv - t0) * inv_h
                if not (u >= 0.0 and u < num_intervals):  # outside the extended knot span (or NaN)
                    continue
                j = int(math.floor(u))
                f = u - j
                g = 1.0 - f
                f2 = f * f
                f3 = f2 * f
                k = j - 3  # B_k .. B_{k+3} are the non-zero ones
                if 0 <= k < nb:
                    out[b, 1 + k, i] = g * g * g / 6.0
                if 0 <= k + 1 < nb:
                    out[b, 2 + k, i] = (3.0 * f3 - 6.0 * f2 + 4.0) / 6.0
                if 0 <= k + 2 < nb:
                    out[b, 3 + k, i] = (-3.0 * f3 + 3.0 * f2 + 3.0 * f + 1.0) / 6.0
                if 0 <= k + 3 < nb:
                    out[b, 4 + k, i] = f3 / 6.0

    @numba.njit(parallel=True, cache=True)
    def _grad_x(x, gf, gx, t0, inv_h, num_intervals):
        # gf (B, 1 + K, I) (any strides) -> gx (B, I) = gf[:, 0] silu'(x) + sum_k gf[:, 1 + k] B_k'(x)
        num_batch, num_in = x.shape
        nb = gf.shape[1] - 1
        for b in numba.prange(num_batch):
            for i in range(num_in):
                xv = float(x[b, i])
                sig = 1.0 / (1.0 + math.exp(-xv))
                acc = gf[b, 0, i] * (sig * (1.0 + xv * (1.0 - sig)))
                u = (xv - t0) * inv_h
                if u >= 0.0 and u < num_intervals:
                    j = int(math.floor(u))
                    f = u - j
                    g = 1.0 - f
                    f2 = f * f
                    k = j - 3
                    if 0 <= k < nb:  # d/dx = (1/h) d/df of the 4 local cubic pieces
                        acc += gf[b, 1 + k, i] * (-0.5 * g * g * inv_h)
                    if 0 <= k + 1 < nb:
                        acc += gf[b, 2 + k, i] * ((1.5 * f2 - 2.0 * f) * inv_h)
                    if 0 <= k + 2 < nb:
                        acc += gf[b, 3 + k, i] * ((-1.5 * f2 + f + 0.5) * inv_h)
                    if 0 <= k + 3 < nb:
                        acc += gf[b, 4 + k, i] * (0.5 * f2 * inv_h)
                gx[b, i] = acc


def _np(t: torch.Tensor):
    return t.detach().numpy()


# Two ranks on a 2-core machine, each with a full-size numba pool, run 2 x 2 numba threads and
# the step got 7x slower (measured: 7.5 ms vs 1.0 ms no_sync step, [2,64,1] at world 2). numba
# fixes its pool size at its import, from NUMBA_NUM_THREADS (the launcher sets it per rank) or
# else the core count; importing kan never writes the environment, so in-process the thread
# count is set with set_num_threads, and every kernel call matches torch's threads (_run).


def set_num_threads(num_threads: int) -> None:
    """Run the kernels on num_threads threads, clamped to numba's pool size; no-op without numba.

    The training entry point calls this where it sets the rank's torch threads.
    """
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    if not _HAVE_NUMBA:
        return
    n = min(num_threads, numba.config.NUMBA_NUM_THREADS)
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)


def _run(kernel, *args) -> None:
    """Call a numba kernel on as many threads as torch uses (one per rank when ranks share a node)."""
    num_threads = torch.get_num_threads()
    set_num_threads(num_threads)
    kernel(*args)
    # numba's first parallel call starts its OpenMP pool, which resets this thread's OpenMP
    # thread count (torch's too) to the pool size: measured 1 -> 2 with a 2-thread pool, and
    # 2 ranks x 2 torch threads on 2 cores made the [2,64,1] step 15x slower (47.8 vs 3.1 ms)
    if torch.get_num_threads() != num_threads:
        torch.set_num_threads(num_threads)


def features(x: torch.Tensor, spline, need_grad_x: bool):
    """x (B, I) -> F (B, 1 + K, I), and nothing more for grad_x (it recomputes from x)."""
    x = x.contiguous()
    out = torch.empty(x.shape[0], 1 + spline.num_basis, x.shape[1], dtype=x.dtype)
    _run(_features, _np(x), _np(out), spline.t0, spline.inv_h, spline.num_intervals)
    return out, ()


def grad_x(x: torch.Tensor, spline, saved, grad_y: torch.Tensor, eff: torch.Tensor) -> torch.Tensor:
    """grad_y (B, O), effective weight W (O, 1 + K, I) -> grad_x (B, I)."""
    num_batch, num_out = grad_y.shape
    if num_out == 1:
        # rank-one grad_F = grad_y x W: the kernel reads W broadcast over the batch (stride 0)
        return _grad_x_from(x, eff.expand(num_batch, -1, -1), spline) * grad_y
    grad_f = torch.mm(grad_y, eff.view(num_out, -1)).view(num_batch, -1, x.shape[1])  # (B, 1+K, I)
    return _grad_x_from(x, grad_f, spline)


def _grad_x_from(x: torch.Tensor, grad_f: torch.Tensor, spline) -> torch.Tensor:
    """grad_f (B, 1 + K, I), any strides (a stride-0 batch axis included) -> grad_x (B, I)."""
    gx = torch.empty_like(x)
    _run(_grad_x, _np(x.contiguous()), _np(grad_f), _np(gx), spline.t0, spline.inv_h, spline.num_intervals)
    return gx
