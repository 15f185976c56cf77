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
- One custom autograd Function (_BSplineKANFunction) owns the weight algebra and the
  forward and grad-W GEMMs; a "kernels" module supplies the features and grad_x. Backward needs
  only x, F, W and what the kernels saved: grad_x reads order + 1 entries of grad_F per input
  instead of contracting all K, the input-gradient work is skipped when x needs no grad (the
  first layer), and for out = 1 the kernels may skip grad_F (a rank-one outer product).
- Kernels, in order of preference: Triton on CUDA (kan/kernels/triton_bspline.py), numba on CPU
  (kan/kernels/numba_bspline.py), both optional and cubic-only, each one fused pass per direction;
  else the eager kernels (kan/kernels/eager_bspline.py: Horner on a (batch, order + 1, in) tensor and
  one scatter into a padded buffer, one gather back), which work for every order, device and dtype.

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

from .kernels import eager_bspline, numba_bspline, triton_bspline
from .contract.model_config import BASES, ModelConfig

_DEFAULT = ModelConfig()  # one set of defaults for layers, models, the trainer and the schema

KERNELS = (triton_bspline, numba_bspline, eager_bspline)  # first usable wins; eager always is


class _BSplineKANFunction(torch.autograd.Function):
    """y = F(x) @ W(P)^T with F = [silu(x) | local B-splines], W = [W_base | s * C].

    `kernels` is one of KERNELS, a module with
        features(x (B, I), spline, need_grad_x) -> (F (B, 1 + K, I), saved: tuple of tensors)
        grad_x(x, spline, saved, grad_y (B, O), W (O, 1 + K, I)) -> (B, I)
    F may be a strided view (the eager kernels' padded buffer). grad_x gets grad_y and W rather
    than grad_F so that each kernel forms grad_F in its own layout, or not at all for out = 1
    (grad_F = grad_y W is rank one there: numba reads W broadcast over the batch, eager gathers W).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, spline: eager_bspline.LocalBSpline, kernels) -> torch.Tensor:
        num_batch, num_out = x.shape[0], weight.shape[0]
        feats, saved = kernels.features(x, spline, need_grad_x=ctx.needs_input_grad[0])  # (B, 1+K, I)
        eff = torch.empty_like(weight[:, 1:])  # (O, 1+K, I)
        eff[:, 0] = weight[:, 0]
        torch.mul(weight[:, 2:], weight[:, 1:2], out=eff[:, 1:])  # s * C
        num_cols = eff.shape[1] * eff.shape[2]  # (1 + K) I, spelled out so that an empty batch reshapes
        y = F.linear(feats.reshape(num_batch, num_cols), eff.view(num_out, num_cols))  # (B, O); reshape is a view
        ctx.spline, ctx.kernels = spline, kernels
        ctx.save_for_backward(x, weight, feats, eff, *saved)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, weight, feats, eff, *saved = ctx.saved_tensors
        grad_y = grad_y.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = ctx.kernels.grad_x(x, ctx.spline, saved, grad_y, eff)  # (B, I)
        if ctx.needs_input_grad[1]:
            feats_2d = feats.reshape(x.shape[0], eff.shape[1] * eff.shape[2])  # (B, (1+K) I), a view
            grad_eff = torch.mm(grad_y.t(), feats_2d).view(eff.shape)  # (O, 1+K, I)
            grad_w = torch.empty_like(weight)  # (O, 2+K, I)
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

    Parameters: one packed tensor `weight` (out, 2 + num_basis, in) = [W_base | s | C]; the
    views `base_weight` (out, in), `spline_scaler` (out, in) and `spline_weight`
    (out, in, num_basis) read and write it.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        grid_size: int = _DEFAULT.grid_size,
        spline_order: int = _DEFAULT.spline_order,
        grid_range: tuple[float, float] = _DEFAULT.grid_range,
        basis: str = _DEFAULT.basis,
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
        self._spline = eager_bspline.LocalBSpline(grid_size, spline_order, self.grid_range) if basis == "bspline" else None
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
            feats, _ = eager_bspline.features(x, self._spline, need_grad_x=False)  # (B, 1+K, I)
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
            for kernels in KERNELS:  # the last, eager, is always usable
                if kernels.usable(x, self.spline_order):
                    return _BSplineKANFunction.apply(x, self.weight, self._spline, kernels)  # (batch, out)
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
