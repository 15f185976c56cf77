"""Every basis of KANLinear against a float64 reference written here, independent of kan/layers.py.

The layer's output must be
    y[b, o] = sum_i W_base[o, i] silu(x[b, i]) + sum_i s[o, i] sum_k C[o, i, k] B_k(x[b, i]),
checked to relative error <= 1e-6 in float64 for outputs and for input gradients, for
inputs inside and outside grid_range.
"""

from __future__ import annotations

import math

import pytest
import torch

from kan import KANLinear
from kan.kernels import numba_bspline


def cox_de_boor(x: torch.Tensor, knots: list[float], order: int) -> torch.Tensor:
    """Textbook recursion, one basis function at a time: x (N,) -> (N, len(knots) - 1 - order)."""

    def b(i: int, p: int) -> torch.Tensor:
        if p == 0:
            return ((x >= knots[i]) & (x < knots[i + 1])).to(torch.float64)
        left = (x - knots[i]) / (knots[i + p] - knots[i]) * b(i, p - 1)
        right = (knots[i + p + 1] - x) / (knots[i + p + 1] - knots[i + 1]) * b(i + 1, p - 1)
        return left + right

    return torch.stack([b(i, order) for i in range(len(knots) - 1 - order)], dim=-1)


def reference_basis(layer: KANLinear, x: torch.Tensor) -> torch.Tensor:
    """x (N, I) float64 -> (N, I, K) from the layer's configuration only."""
    lo, hi = layer.grid_range
    g, k = layer.grid_size, layer.spline_order
    if layer.basis == "bspline":
        h = (hi - lo) / g
        knots = [lo + j * h for j in range(-k, g + k + 1)]
        return cox_de_boor(x.reshape(-1), knots, k).reshape(*x.shape, -1)
    if layer.basis == "rbf":  # Gaussian bumps on grid_size centres spanning grid_range (FastKAN)
        width = (hi - lo) / (g - 1)
        centers = torch.tensor([lo + n * width for n in range(g)], dtype=torch.float64)
        return torch.exp(-(((x.unsqueeze(-1) - centers) / width) ** 2))
    # chebyshev: T_n(tanh x) = cos(n arccos(tanh x))
    z = torch.tanh(x).clamp(-1 + 1e-15, 1 - 1e-15)
    n = torch.arange(g, dtype=torch.float64)
    return torch.cos(n * torch.acos(z).unsqueeze(-1))


def reference_forward(layer: KANLinear, x: torch.Tensor) -> torch.Tensor:
    wb = layer.base_weight.detach().double()  # (O, I)
    c = layer.spline_weight.detach().double()  # (O, I, K)
    s = layer.spline_scaler.detach().double()  # (O, I)
    silu = x / (1 + torch.exp(-x))
    basis = reference_basis(layer, x)  # (N, I, K)
    return silu @ wb.t() + torch.einsum("nik,oik,oi->no", basis, c, s)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


CASES = [
    # basis, grid, order, grid_range
    ("bspline", 5, 3, (-1.0, 1.0)),
    ("bspline", 10, 3, (-2.0, 2.0)),
    ("bspline", 3, 1, (0.0, 1.0)),
    ("bspline", 4, 2, (-1.0, 3.0)),
    ("bspline", 6, 5, (-1.0, 1.0)),
    ("rbf", 8, 3, (-2.0, 2.0)),
    ("chebyshev", 6, 3, (-1.0, 1.0)),
]


def _inputs(lo: float, hi: float, n: int = 400, seed: int = 0) -> torch.Tensor:
    """Points inside grid_range, in the extended-knot margin, and far outside it."""
    g = torch.Generator().manual_seed(seed)
    span = hi - lo
    inside = lo + span * torch.rand(n, generator=g, dtype=torch.float64)
    around = lo - span + 3 * span * torch.rand(n, generator=g, dtype=torch.float64)
    far = torch.tensor([lo - 100 * span, hi + 100 * span, lo - 1e-3, hi + 1e-3], dtype=torch.float64)
    return torch.cat([inside, around, far])


@pytest.mark.parametrize("basis,grid,order,grid_range", CASES)
def test_basis_values_match_reference(basis, grid, order, grid_range):
    layer = KANLinear(3, 2, grid_size=grid, spline_order=order, grid_range=grid_range, basis=basis).double()
    x = _inputs(*grid_range).reshape(-1, 3)  # (268, 3)
    ref = reference_basis(layer, x)
    got = layer.basis_values(x)
    assert got.shape == ref.shape == (x.shape[0], 3, layer.num_basis)
    assert (got - ref).abs().max().item() <= 1e-12


@pytest.mark.parametrize("path", ["default", "eager"])  # default: the fused CPU kernel when numba is installed
@pytest.mark.parametrize("basis,grid,order,grid_range", CASES)
def test_layer_output_and_input_grad_match_reference(basis, grid, order, grid_range, path):
    if path == "eager":
        with numba_bspline.disabled():
            _check_layer_against_reference(basis, grid, order, grid_range)
    else:
        _check_layer_against_reference(basis, grid, order, grid_range)


def _check_layer_against_reference(basis, grid, order, grid_range):
    torch.manual_seed(1)
    layer = KANLinear(3, 4, grid_size=grid, spline_order=order, grid_range=grid_range, basis=basis).double()
    with torch.no_grad():  # spline branch as large as the base branch, so its errors would show
        layer.spline_weight.normal_()
    x = _inputs(*grid_range).reshape(-1, 3).requires_grad_()  # (268, 3)
    xr = x.detach().clone().requires_grad_()
    y = layer(x)
    yr = reference_forward(layer, xr)
    assert rel_err(y.detach(), yr.detach()) <= 1e-6
    v = torch.randn_like(yr)
    (gx,) = torch.autograd.grad((y * v).sum(), x)
    (gr,) = torch.autograd.grad((yr * v).sum(), xr)
    assert rel_err(gx, gr) <= 1e-6


def test_bspline_partition_of_unity_and_zero_outside_span():
    layer = KANLinear(1, 1, grid_size=7, spline_order=3, grid_range=(-1.0, 2.0)).double()
    lo, hi = layer.grid_range
    h = (hi - lo) / 7
    inside = torch.linspace(lo, hi - 1e-9, 301, dtype=torch.float64).unsqueeze(1)
    assert torch.allclose(layer.basis_values(inside).sum(-1), torch.ones(301, 1, dtype=torch.float64), atol=1e-12)
    outside = torch.tensor([[lo - 3 * h - 1e-9], [hi + 3 * h], [math.inf], [-math.inf]], dtype=torch.float64)
    assert layer.basis_values(outside).abs().max().item() == 0.0


def test_float32_close_to_float64():
    torch.manual_seed(2)
    layer = KANLinear(16, 8, grid_size=5)
    x = torch.rand(256, 16) * 3 - 1.5
    y32 = layer(x)
    y64 = layer.double()(x.double())
    assert rel_err(y32.double(), y64) <= 1e-5
