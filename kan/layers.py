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
    """Dense Cox-de Boor basis: x (..., ) -> (..., num_knots - 1 - spline_order)."""
    t = knots.to(x.dtype)
    x = x.unsqueeze(-1)
    # order 0: indicator of [t_j, t_{j+1})
    b = ((x >= t[:-1]) & (x < t[1:])).to(x.dtype)
    for p in range(1, spline_order + 1):
        left = (x - t[: -(p + 1)]) / (t[p:-1] - t[: -(p + 1)]) * b[..., :-1]
        right = (t[p + 1 :] - x) / (t[p + 1 :] - t[1:-p]) * b[..., 1:]
        b = left + right
    return b


class KANLinear(nn.Module):
    """One KAN layer.

    Args:
        in_features, out_features: layer width in and out.
        grid_size: number of grid intervals G on grid_range.
        spline_order: B-spline order k (3 = cubic).
        grid_range: (lo, hi) of the uniform grid; inputs outside it still get the
            (extrapolated-to-zero) extended-knot basis and the SiLU base branch.
        basis: "bspline" | "rbf" | "chebyshev".
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
        self.base_weight = nn.Parameter(torch.empty(out_features, in_features))
        self.spline_weight = nn.Parameter(torch.empty(out_features, in_features, self.num_basis))
        self.spline_scaler = nn.Parameter(torch.empty(out_features, in_features))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
        # small spline coefficients: the layer starts close to its SiLU base branch
        nn.init.uniform_(self.spline_weight, -0.1 / self.num_basis, 0.1 / self.num_basis)
        nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5))

    def basis_values(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, in) -> (batch, in, num_basis)."""
        if self.basis == "bspline":
            return bspline_basis(x, self.knots, self.spline_order)
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
        assert x.dim() == 2 and x.shape[1] == self.in_features, x.shape
        base = F.linear(F.silu(x), self.base_weight)  # (batch, out)
        b = self.basis_values(x).reshape(x.shape[0], -1)  # (batch, in * num_basis)
        w = (self.spline_weight * self.spline_scaler.unsqueeze(-1)).reshape(self.out_features, -1)
        return base + F.linear(b, w)  # (batch, out)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, basis={self.basis}, "
            f"grid_size={self.grid_size}, spline_order={self.spline_order}, grid_range={self.grid_range}"
        )
