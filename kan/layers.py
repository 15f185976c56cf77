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

- Packed parameter. W_base, s and C live in one tensor `weight` (out, in, 2 + num_basis) =
  [W_base | s | C_0 .. C_{K-1}] (views `base_weight`, `spline_scaler`, `spline_weight`).
  Adam is elementwise, so packing changes no training arithmetic; it only turns three
  optimizer updates per layer into one (the CPU Adam loops over tensors one by one).
- One matmul. Features F (batch, in, 1 + K) = [silu(x) | B_0(x) .. B_{K-1}(x)] meet the
  effective weight W (out, in, 1 + K) = [W_base | s * C] in a single GEMM.
- Local basis. On a uniform grid, x in knot interval j (u = (x - t_0) / h, j = floor(u),
  f = u - j) has only order + 1 non-zero B-splines, k = j - order .. j, whose values are fixed
  polynomials in f (evaluated by Horner on a (batch, in, order + 1) tensor) and are scattered
  into F. The dense Cox-de Boor recursion over all K basis functions is never run.
- Custom autograd Function. Backward needs only x, F, W and the (order + 1) local
  derivative values and their columns: grad_x gathers order + 1 entries of grad_F per input
  instead of contracting all K, and the input-gradient GEMM is skipped when x needs no grad
  (the first layer).

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
    """Constants of the local evaluation for one (grid, order, range), per (device, dtype)."""

    def __init__(self, grid_size: int, spline_order: int, grid_range: tuple[float, float]) -> None:
        lo, hi = grid_range
        self.order = spline_order
        self.num_basis = grid_size + spline_order
        self.num_intervals = grid_size + 2 * spline_order  # knot intervals in the extended span
        self.h = (hi - lo) / grid_size
        self.inv_h = 1.0 / self.h
        self.t0 = lo - spline_order * self.h  # first knot
        self.coef64 = uniform_bspline_local_coefficients(spline_order)  # (q, r)
        # Column table: for knot interval j (clamped to -1 .. num_intervals, i.e. "left of" and
        # "right of" the span included), the packed-feature column of B_{j - p + r} is
        # 1 + j - p + r when that basis function exists, else 0: column 0 holds silu(x) and is
        # written after the scatter, so it doubles as a trash slot and no mask is needed.
        p, nb = spline_order, self.num_basis
        num_j = self.num_intervals + 2
        table = torch.zeros(p + 1, num_j, dtype=torch.int64)
        for r in range(p + 1):
            for jj in range(num_j):
                k = (jj - 1) - p + r
                if 0 <= k < nb:
                    table[r, jj] = 1 + k
        self.table = table.reshape(-1)
        self.table_row = (torch.arange(p + 1) * num_j + 1).view(1, p + 1, 1)  # + 1: j = -1 is row entry 0
        self._cache: dict[tuple[torch.device, torch.dtype], tuple] = {}

    def constants(self, device: torch.device, dtype: torch.dtype) -> tuple:
        key = (device, dtype)
        if key not in self._cache:
            p = self.order
            coef = self.coef64.to(device=device, dtype=dtype)
            # d/dx = (1/h) d/df, folded into the derivative coefficients
            dcoef = [((q + 1) * self.inv_h) * self.coef64[q + 1] for q in range(p)]
            self._cache[key] = (
                [c.view(1, p + 1, 1) for c in coef],
                [c.to(device=device, dtype=dtype).view(1, p + 1, 1) for c in dcoef],
                self.table.to(device),
                self.table_row.to(device),
            )
        return self._cache[key]

    def local(self, x: torch.Tensor, need_derivative: bool):
        """x (B, I) -> columns (B, p+1, I) int64, values (B, p+1, I), d/dx values or None.

        Entries of basis functions that do not exist (near and beyond the ends of the extended
        knot span) point at column 0 (see `table`); their values are not zeroed.
        """
        coef, dcoef, table, table_row = self.constants(x.device, x.dtype)
        p = self.order
        u = (x - self.t0) * self.inv_h  # (B, I): position in knot intervals from the first knot
        j = torch.floor(u)
        f = (u - j).unsqueeze(1)  # (B, 1, I) in [0, 1)
        jc = j.clamp_(-1, self.num_intervals).to(torch.int64).unsqueeze(1)  # (B, 1, I)
        col = table.take(jc + table_row)  # (B, p+1, I)
        # Horner in f, one polynomial per r (coefficients broadcast along dim 1)
        if p == 0:
            w = torch.ones_like(f)
        else:
            w = torch.addcmul(coef[p - 1], f, coef[p])
            for q in range(p - 2, -1, -1):
                w = torch.addcmul(coef[q], w, f)
        dw = None
        if need_derivative and p > 0:
            if p == 1:
                dw = dcoef[0].expand_as(w)
            else:
                dw = torch.addcmul(dcoef[p - 2], f, dcoef[p - 1])
                for q in range(p - 3, -1, -1):
                    dw = torch.addcmul(dcoef[q], dw, f)
        return col, w, dw

    def features(self, x: torch.Tensor, need_derivative: bool):
        """Packed features (B, 1 + K, I) = [silu(x) | B_0(x) .. B_{K-1}(x)] and what backward needs."""
        col, w, dw = self.local(x, need_derivative)
        feats = x.new_zeros(x.shape[0], 1 + self.num_basis, x.shape[1])
        feats.scatter_(1, col, w)  # trash entries land in column 0 ...
        feats[:, 0] = F.silu(x)  # ... and are overwritten here
        return feats, col, dw


class _BSplineKANFunction(torch.autograd.Function):
    """y = F(x) @ W(P)^T with F = [silu(x) | local B-splines], W = [W_base | s * C]."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, spline: _LocalBSpline) -> torch.Tensor:
        num_batch = x.shape[0]
        num_out = weight.shape[0]
        need_x_grad = ctx.needs_input_grad[0]
        feats, col, dw = spline.features(x, need_derivative=need_x_grad)  # (B, 1+K, I)
        eff = torch.empty_like(weight[:, 1:])  # (O, 1+K, I)
        eff[:, 0] = weight[:, 0]
        torch.mul(weight[:, 2:], weight[:, 1:2], out=eff[:, 1:])  # s * C
        y = F.linear(feats.view(num_batch, -1), eff.view(num_out, -1))  # (B, O)
        ctx.save_for_backward(x, weight, feats, eff, col, dw)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, weight, feats, eff, col, dw = ctx.saved_tensors
        num_batch = x.shape[0]
        num_out = weight.shape[0]
        grad_y = grad_y.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_f = torch.mm(grad_y, eff.view(num_out, -1)).view(feats.shape)  # (B, 1+K, I)
            sig = torch.sigmoid(x)
            grad_x = grad_f[:, 0] * (sig * (1 + x * (1 - sig)))  # silu'(x)
            if dw is not None:
                grad_f[:, 0] = 0  # trash column of the local gather (see _LocalBSpline.table)
                grad_x += (grad_f.gather(1, col) * dw).sum(1)
        if ctx.needs_input_grad[1]:
            grad_eff = torch.mm(grad_y.t(), feats.view(num_batch, -1)).view(eff.shape)  # (O, 1+K, I)
            grad_w = torch.empty_like(weight)  # (O, 2+K, I)
            grad_w[:, 0] = grad_eff[:, 0]
            torch.mul(grad_eff[:, 1:], weight[:, 1:2], out=grad_w[:, 2:])  # d/dC = s * d/dW
            torch.sum(grad_eff[:, 1:] * weight[:, 2:], dim=1, out=grad_w[:, 1])  # d/ds = sum_k C_k d/dW_k
        return grad_x, grad_w, None


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
            feats, _, _ = self._spline.features(x, need_derivative=False)  # (B, 1+K, I)
            return feats[:, 1:].transpose(1, 2)
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
