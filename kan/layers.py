"""KAN layers: pure nn.Modules (no I/O, no environment, no torch.distributed).

Every layer maps (batch, in_features) -> (batch, out_features) and shares one constructor
signature so that models and the study config can swap the basis freely.

B-spline layer (the studied one), as in the original KAN paper and its common efficient
re-implementation:

    y[b, o] = sum_i  W_base[o, i] * silu(x[b, i])
            + sum_i  s[o, i] * sum_k  C[o, i, k] * B_k(x[b, i])

with B_k the cardinal B-splines of order `spline_order` on a uniform grid of `grid_size`
intervals on `grid_range`, extended by `spline_order` knots on each side, so there are
grid_size + spline_order basis functions per input.

How the fast path works (B-spline, any device):

- Packed parameter. W_base, s and C live in one tensor `weight` (out, 2 + K, in) =
  [W_base | s | C_0 .. C_{K-1}] (views `base_weight`, `spline_scaler`, `spline_weight`).
  Adam is elementwise, so packing changes no training arithmetic; it only turns three
  optimizer updates per layer into one (the CPU Adam loops over tensors one by one).
- One matmul. Features F (batch, 1 + K, in) = [silu(x) | B_0(x) .. B_{K-1}(x)] meet the
  effective weight W (out, 1 + K, in) = [W_base | s * C] in a single GEMM.
- Local basis. On a uniform grid, x in knot interval j (u = (x - t_0) / h, j = floor(u),
  f = u - j) has only order + 1 non-zero B-splines, k = j - order .. j, whose values are fixed
  polynomials in f. The dense Cox-de Boor recursion over all K basis functions is never run.
- Custom autograd Function. Backward needs only x, F, W and the local derivative values:
  grad_x reads order + 1 entries of grad_F per input instead of contracting all K, the
  input-gradient GEMM is skipped when x needs no grad (the first layer), and for out = 1
  grad_x gathers the weights directly (grad_F would be a rank-one outer product).
- Kernels, in order of preference: Triton on CUDA (kan/_triton_bspline.py), numba on CPU
  (kan/_numba_bspline.py), both optional and cubic-only, each one fused pass per direction;
  else the eager path here (Horner on a (batch, order + 1, in) tensor and one scatter into a
  padded buffer, one gather back), which works for every order, device and dtype.

GEMM arithmetic of a [64, 256, 256, 1] grid-5 cubic KAN at batch 1024: the 256 -> 256 layer has
K_packed = 256 * 9 = 2304, so forward, grad-W and grad-x GEMMs each cost
2 * 1024 * 2304 * 256 = 1.2 GFLOP; with the first layer's 2 GEMMs (0.6 GFLOP) a step is
~4.2 GFLOP, i.e. ~35 ms at the ~120 GFLOP/s two cores sustain. Everything else must stay small.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import _numba_bspline, _triton_bspline

BASES = ("bspline", "rbf", "chebyshev")


def uniform_knots(grid_size: int, spline_order: int, grid_range: tuple[float, float]) -> torch.Tensor:
    """Knots t_0 .. t_{G+2k} (float64): a uniform grid extended by k knots on each side."""
    lo, hi = grid_range
    h = (hi - lo) / grid_size
    j = torch.arange(-spline_order, grid_size + spline_order + 1, dtype=torch.float64)
    return lo + j * h


def bspline_basis(x: torch.Tensor, knots: torch.Tensor, spline_order: int) -> torch.Tensor:
    """Dense Cox-de Boor basis: x (..., ) -> (..., num_knots - 1 - spline_order).

    Slow and memory-hungry (it materialises every basis function at every recursion level);
    kept as a readable reference. The layer uses the local evaluation below.
    """
    t = knots.to(x.dtype)
    x = x.unsqueeze(-1)
    # order 0: indicator of [t_j, t_{j+1})
    b = ((x >= t[:-1]) & (x < t[1:])).to(x.dtype)
    for p in range(1, spline_order + 1):
        left = (x - t[: -(p + 1)]) / (t[p:-1] - t[: -(p + 1)]) * b[..., :-1]
        right = (t[p + 1 :] - x) / (t[p + 1 :] - t[1:-p]) * b[..., 1:]
        b = left + right
    return b


def uniform_bspline_local_coefficients(spline_order: int) -> torch.Tensor:
    """Polynomial coefficients (float64, (order + 1, order + 1)) of the local B-spline values.

    For u = j + f inside knot interval j, the non-zero basis functions are
    B_{j - order + r}, r = 0 .. order, and B_{j - order + r}(u) = sum_q M[q, r] f^q.
    Derived from the cardinal recursion N_p(z) = (z N_{p-1}(z) + (p + 1 - z) N_{p-1}(z - 1)) / p
    with z = p - r + f, which gives, on the local values v_p[r] = N_p(p - r + f):
        v_p[r] = ((p - r + f) v_{p-1}[r - 1] + (r + 1 - f) v_{p-1}[r]) / p.
    """
    p_max = spline_order
    # polys[r] = coefficient list (ascending powers of f), padded to p_max + 1 entries
    polys = [[1.0] + [0.0] * p_max]

    def mul_linear(poly: list[float], c0: float, c1: float) -> list[float]:
        out = [0.0] * (p_max + 1)
        for q, a in enumerate(poly):
            if a == 0.0:
                continue
            out[q] += a * c0
            if q + 1 <= p_max:
                out[q + 1] += a * c1
        return out

    for p in range(1, p_max + 1):
        new = []
        for r in range(p + 1):
            acc = [0.0] * (p_max + 1)
            if r - 1 >= 0:
                acc = [a + b for a, b in zip(acc, mul_linear(polys[r - 1], p - r, 1.0))]
            if r <= p - 1:
                acc = [a + b for a, b in zip(acc, mul_linear(polys[r], r + 1, -1.0))]
            new.append([a / p for a in acc])
        polys = new
    return torch.tensor(polys, dtype=torch.float64).t().contiguous()  # (q, r)


class _LocalBSpline:
    """Local evaluation of the uniform B-spline basis for one (grid, order, range).

    Features live in a padded buffer (B, E, I), E = K + 2p + 2, rows
        [0, p)             left padding
        p                  silu(x) (the base branch)
        p + 1 + k          B_k(x), k = 0 .. K - 1
        [p + 1 + K, E)     right padding
    For x in knot interval j (clamped to -1 .. G + 2p, so "left of" and "right of" the span are
    intervals too) the p + 1 local values go to rows j + 1 + r, r = 0 .. p. Values of basis
    functions that do not exist land in the padding or in the base row (written after the
    scatter), so no masks are needed; the GEMM reads rows [p, p + 1 + K) through a strided view.
    """

    def __init__(self, grid_size: int, spline_order: int, grid_range: tuple[float, float]) -> None:
        lo, hi = grid_range
        p = spline_order
        self.order = p
        self.num_basis = grid_size + p
        self.num_intervals = grid_size + 2 * p  # knot intervals in the extended span
        self.num_rows = self.num_basis + 2 * p + 2  # E
        self.h = (hi - lo) / grid_size
        self.inv_h = 1.0 / self.h
        self.t0 = lo - p * self.h  # first knot
        self.coef64 = uniform_bspline_local_coefficients(p)  # (q, r)
        self._cache: dict[tuple[torch.device, torch.dtype], tuple] = {}

    def constants(self, device: torch.device, dtype: torch.dtype) -> tuple:
        key = (device, dtype)
        if key not in self._cache:
            p = self.order
            coef = self.coef64  # (q, r): B_{j-p+r} = sum_q coef[q, r] f^q
            # d/dx = (1/h) d/df: derivative coefficients, degree p - 1, padded to p + 1 powers
            dcoef = torch.zeros_like(coef)
            dcoef[:p] = coef[1:] * (torch.arange(1, p + 1, dtype=torch.float64) * self.inv_h).unsqueeze(1)
            both = torch.cat([coef, dcoef], dim=1)  # (q, 2(p+1)): values and derivatives in one Horner
            as_t = lambda t: t.to(device=device, dtype=dtype).view(p + 1, 1, -1, 1)  # noqa: E731
            self._cache[key] = (
                as_t(coef),
                as_t(both),
                (torch.arange(p + 1, device=device) + 1).view(1, p + 1, 1),
                torch.tensor(self.inv_h, dtype=dtype, device=device),
                torch.tensor(-self.t0 * self.inv_h, dtype=dtype, device=device),
            )
        return self._cache[key]

    def local(self, x: torch.Tensor, need_derivative: bool):
        """x (B, I) -> buffer rows (B, p+1, I) int64, values (B, p+1, I), d/dx values or None."""
        coef, both, row_offset, scale, shift = self.constants(x.device, x.dtype)
        p = self.order
        u = torch.addcmul(shift, x, scale)  # (B, I): (x - t_0) / h, position in knot intervals
        j = torch.floor(u)
        f = (u - j).unsqueeze(1)  # (B, 1, I) in [0, 1)
        rows = j.clamp_(-1, self.num_intervals).to(torch.int64).unsqueeze(1) + row_offset  # (B, p+1, I)
        c = both if need_derivative and p > 0 else coef
        # Horner in f, one polynomial per column of c (coefficients broadcast along dim 1)
        if p == 0:
            return rows, torch.ones_like(f), None
        v = torch.addcmul(c[p - 1], f, c[p])
        for q in range(p - 2, -1, -1):
            v = torch.addcmul(c[q], v, f)
        if c is coef:
            return rows, v, None
        return rows, v[:, : p + 1], v[:, p + 1 :]

    def features(self, x: torch.Tensor, need_derivative: bool):
        """Padded buffer (B, E, I) whose rows [p, p + 1 + K) are [silu(x) | B_0(x) .. B_{K-1}(x)]."""
        p, nb = self.order, self.num_basis
        rows, w, dw = self.local(x, need_derivative)
        buf = x.new_empty(x.shape[0], self.num_rows, x.shape[1])
        buf[:, p + 1 : p + 1 + nb].zero_()  # padding may hold anything: it is never read
        buf.scatter_(1, rows, w)
        torch.ops.aten.silu.out(x, out=buf[:, p])  # overwrites values that landed in the base row
        return buf, rows, dw

    def feature_view(self, buf: torch.Tensor) -> torch.Tensor:
        """(B, E, I) buffer -> (B, (1 + K) * I) matrix view (row stride E * I, no copy)."""
        p = self.order
        return buf[:, p : p + 1 + self.num_basis].reshape(buf.shape[0], -1)


class _BSplineKANFunction(torch.autograd.Function):
    """y = F(x) @ W(P)^T with F = [silu(x) | local B-splines], W = [W_base | s * C]."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, spline: _LocalBSpline) -> torch.Tensor:
        num_out = weight.shape[0]
        need_x_grad = ctx.needs_input_grad[0]
        buf, rows, dw = spline.features(x, need_derivative=need_x_grad)  # (B, E, I)
        eff = torch.empty_like(weight[:, 1:])  # (O, 1+K, I)
        eff[:, 0] = weight[:, 0]
        torch.mul(weight[:, 2:], weight[:, 1:2], out=eff[:, 1:])  # s * C
        y = F.linear(spline.feature_view(buf), eff.view(num_out, -1))  # (B, O)
        ctx.spline = spline
        ctx.save_for_backward(x, weight, buf, eff, rows, dw)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, weight, buf, eff, rows, dw = ctx.saved_tensors
        spline = ctx.spline
        p, nb = spline.order, spline.num_basis
        num_out = weight.shape[0]
        grad_y = grad_y.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            sig = torch.sigmoid(x)
            dsilu = sig * (1 + x * (1 - sig))  # silu'(x)
            if num_out == 1:
                # grad_F = grad_y (B, 1) x W (1, (1+K) I) is an outer product: gather the local
                # entries of W (zero-padded like the features) instead of materialising grad_F
                w_pad = torch.zeros_like(buf[0])  # (E, I)
                w_pad[p + 1 : p + 1 + nb] = eff[0, 1:]
                grad_x = eff[0, 0] * dsilu
                if dw is not None:
                    grad_x += (w_pad.expand_as(buf).gather(1, rows) * dw).sum(1)
                grad_x *= grad_y
            else:
                grad_buf = torch.empty_like(buf)  # (B, E, I), same padded layout as the features
                grad_buf[:, :p].zero_()
                grad_buf[:, p + 1 + nb :].zero_()
                torch.mm(grad_y, eff.view(num_out, -1), out=spline.feature_view(grad_buf))
                grad_x = grad_buf[:, p] * dsilu
                if dw is not None:
                    grad_buf[:, p] = 0  # base row: the local gather must read zeros there
                    grad_x += (grad_buf.gather(1, rows) * dw).sum(1)
        if ctx.needs_input_grad[1]:
            grad_eff = torch.mm(grad_y.t(), spline.feature_view(buf)).view(eff.shape)  # (O, 1+K, I)
            grad_w = torch.empty_like(weight)  # (O, 2+K, I)
            grad_w[:, 0] = grad_eff[:, 0]
            torch.mul(grad_eff[:, 1:], weight[:, 1:2], out=grad_w[:, 2:])  # d/dC = s * d/dW
            torch.sum(grad_eff[:, 1:] * weight[:, 2:], dim=1, out=grad_w[:, 1])  # d/ds = sum_k C_k d/dW_k
        return grad_x, grad_w, None


class _FusedBSplineKANFunction(torch.autograd.Function):
    """Same contract as _BSplineKANFunction, with fused feature and grad_x kernels.

    `kernels` is kan._triton_bspline (CUDA) or kan._numba_bspline (CPU): features(x, spline)
    -> dense F (B, 1 + K, I); grad_x(x, grad_F (B, 1 + K, I), spline) -> (B, I).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, spline: _LocalBSpline, kernels) -> torch.Tensor:
        num_batch, num_out = x.shape[0], weight.shape[0]
        feats = kernels.features(x, spline)  # (B, 1+K, I)
        eff = torch.empty_like(weight[:, 1:])  # (O, 1+K, I)
        eff[:, 0] = weight[:, 0]
        torch.mul(weight[:, 2:], weight[:, 1:2], out=eff[:, 1:])  # s * C
        y = F.linear(feats.view(num_batch, -1), eff.view(num_out, -1))  # (B, O)
        ctx.spline, ctx.kernels = spline, kernels
        ctx.save_for_backward(x, weight, feats, eff)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, weight, feats, eff = ctx.saved_tensors
        num_batch, num_out = x.shape[0], weight.shape[0]
        grad_y = grad_y.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            if num_out == 1 and ctx.kernels is _numba_bspline:
                # rank-one grad_F = grad_y x W: hand the kernel W broadcast over the batch
                grad_x = ctx.kernels.grad_x(x, eff.expand(num_batch, -1, -1), ctx.spline) * grad_y
            else:
                grad_f = torch.mm(grad_y, eff.view(num_out, -1)).view(feats.shape)  # (B, 1+K, I)
                grad_x = ctx.kernels.grad_x(x, grad_f, ctx.spline)
        if ctx.needs_input_grad[1]:
            grad_eff = torch.mm(grad_y.t(), feats.view(num_batch, -1)).view(eff.shape)  # (O, 1+K, I)
            grad_w = torch.empty_like(weight)
            grad_w[:, 0] = grad_eff[:, 0]
            torch.mul(grad_eff[:, 1:], weight[:, 1:2], out=grad_w[:, 2:])  # d/dC = s * d/dW
            torch.sum(grad_eff[:, 1:] * weight[:, 2:], dim=1, out=grad_w[:, 1])  # d/ds = sum_k C_k d/dW_k
        return grad_x, grad_w, None, None


class KANLinear(nn.Module):
    """One KAN layer.

    Args:
        in_features, out_features: layer width in and out.
        grid_size: number of grid intervals G on grid_range.
        spline_order: B-spline order k (3 = cubic).
        grid_range: (lo, hi) of the uniform grid; inputs outside it still get the
            (extrapolated-to-zero) extended-knot basis and the SiLU base branch.
        basis: "bspline" | "rbf" | "chebyshev".

    Parameters: one packed tensor `weight` (out, in, 2 + num_basis) = [W_base | s | C]; the
    views `base_weight` (out, in), `spline_scaler` (out, in) and `spline_weight`
    (out, in, num_basis) read and write it.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        grid_size: int = 5,
        spline_order: int = 3,
        grid_range: tuple[float, float] = (-1.0, 1.0),
        basis: str = "bspline",
    ) -> None:
        super().__init__()
        if basis not in BASES:
            raise ValueError(f"basis must be one of {BASES}, got {basis!r}")
        if grid_size < 1 or spline_order < 0:
            raise ValueError(f"grid_size must be >= 1 and spline_order >= 0, got {grid_size}, {spline_order}")
        lo, hi = float(grid_range[0]), float(grid_range[1])
        if not hi > lo:
            raise ValueError(f"grid_range must be (lo, hi) with hi > lo, got {grid_range}")
        self.in_features = in_features
        self.out_features = out_features
        self.grid_size = grid_size
        self.spline_order = spline_order
        self.grid_range = (lo, hi)
        self.basis = basis
        self.num_basis = grid_size + spline_order if basis == "bspline" else grid_size
        self.register_buffer("knots", uniform_knots(grid_size, spline_order, self.grid_range), persistent=False)
        self._spline = _LocalBSpline(grid_size, spline_order, self.grid_range) if basis == "bspline" else None
        # (out, 2 + K, in): rows [W_base | s | C_0 .. C_{K-1}], matching the feature layout
        self.weight = nn.Parameter(torch.empty(out_features, 2 + self.num_basis, in_features))
        self.reset_parameters()

    @property
    def base_weight(self) -> torch.Tensor:
        return self.weight[:, 0]  # (out, in)

    @property
    def spline_scaler(self) -> torch.Tensor:
        return self.weight[:, 1]  # (out, in)

    @property
    def spline_weight(self) -> torch.Tensor:
        return self.weight[:, 2:].transpose(1, 2)  # (out, in, K)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
        # small spline coefficients: the layer starts close to its SiLU base branch
        nn.init.uniform_(self.spline_weight, -0.1 / self.num_basis, 0.1 / self.num_basis)
        nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5))

    def basis_values(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, in) -> (batch, in, num_basis), dense (for inspection and the generic path)."""
        if self.basis == "bspline":
            buf, _, _ = self._spline.features(x, need_derivative=False)  # (B, E, I)
            p = self.spline_order
            return buf[:, p + 1 : p + 1 + self.num_basis].transpose(1, 2)
        lo, hi = self.grid_range
        if self.basis == "rbf":
            centers = torch.linspace(lo, hi, self.grid_size, dtype=x.dtype, device=x.device)
            width = (hi - lo) / max(self.grid_size - 1, 1)
            return torch.exp(-(((x.unsqueeze(-1) - centers) / width) ** 2))
        # chebyshev: T_n(tanh(x)) for n = 0 .. grid_size - 1
        z = torch.tanh(x)
        ts = [torch.ones_like(z), z]
        for _ in range(2, self.grid_size):
            ts.append(2 * z * ts[-1] - ts[-2])
        return torch.stack(ts[: self.grid_size], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"expected input (batch, {self.in_features}), got {tuple(x.shape)}")
        if self.basis == "bspline":
            for kernels in (_triton_bspline, _numba_bspline):  # optional fused paths
                if kernels.usable(x, self.spline_order):
                    return _FusedBSplineKANFunction.apply(x, self.weight, self._spline, kernels)  # (batch, out)
            return _BSplineKANFunction.apply(x, self.weight, self._spline)  # (batch, out)
        # generic path (RBF, Chebyshev): one packed GEMM, plain autograd
        feats = torch.cat([F.silu(x).unsqueeze(1), self.basis_values(x).transpose(1, 2)], dim=1)  # (B, 1+K, I)
        w = self.weight
        eff = torch.cat([w[:, :1], w[:, 2:] * w[:, 1:2]], dim=1)  # (O, 1+K, I)
        return F.linear(feats.reshape(x.shape[0], -1), eff.reshape(self.out_features, -1))  # (B, O)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, basis={self.basis}, "
            f"grid_size={self.grid_size}, spline_order={self.spline_order}, grid_range={self.grid_range}"
        )
