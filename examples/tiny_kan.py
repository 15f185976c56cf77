"""A small KAN of your own, as kanscale measures it: copy this file, change the layer, and name it in
a study config as `model: {impl: [path/to/your_file.py:build]}` (docs/your-model.md).

Each edge is a sum of Gaussian bumps on a fixed grid plus a SiLU residual (the radial-basis KAN of
FastKAN, written here from its idea, not its code): out_j = sum_i [ w_ij * silu(x_i) +
sum_k c_ijk * exp(-((x_i - g_k) / h)^2) ], with g_k the grid_size + 1 grid points and h their spacing.
"""

import torch
from torch import nn


class RBFKANLayer(nn.Module):
    def __init__(self, n_in: int, n_out: int, grid_size: int, grid_range: tuple[float, float]) -> None:
        super().__init__()
        lo, hi = grid_range
        # a buffer, not a parameter: fixed, the same on every rank (DDP broadcasts it at forward)
        self.register_buffer("grid", torch.linspace(lo, hi, grid_size + 1))
        self.inv_h = grid_size / (hi - lo)
        self.base = nn.Linear(n_in, n_out)
        self.coef = nn.Parameter(torch.randn(n_out, n_in * (grid_size + 1)) * 0.1 / (n_in * (grid_size + 1)) ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, n_in) -> (batch, n_out)
        bumps = torch.exp(-(((x.unsqueeze(-1) - self.grid) * self.inv_h) ** 2))  # (batch, n_in, grid points)
        return self.base(nn.functional.silu(x)) + bumps.flatten(1) @ self.coef.T


def build(widths: list[int], grid_size: int, grid_range: tuple[float, float]) -> nn.Module:
    """The factory kanscale calls: it takes only the settings it names (widths, grid_size, grid_range)."""
    return nn.Sequential(*(RBFKANLayer(i, o, grid_size, grid_range) for i, o in zip(widths[:-1], widths[1:])))
