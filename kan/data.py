"""Synthetic regression data and per-rank sharding (no downloads, fully seeded).

The paper's task: f(x, y) = x^2 + y^2 on [-2, 2]^2 with Gaussian noise of std 0.01,
generalised to d inputs as a sum of squares.
"""

from __future__ import annotations

import torch


def make_dataset(
    num_samples: int, input_dim: int, noise: float, seed: int, low: float = -2.0, high: float = 2.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """x (num_samples, input_dim) uniform on [low, high]^d; y (num_samples, 1) = sum x_i^2 + noise."""
    if num_samples < 1 or input_dim < 1:
        raise ValueError(f"num_samples and input_dim must be >= 1, got {num_samples}, {input_dim}")
    g = torch.Generator().manual_seed(seed)
    x = low + (high - low) * torch.rand(num_samples, input_dim, generator=g)
    y = (x * x).sum(dim=1, keepdim=True) + noise * torch.randn(num_samples, 1, generator=g)
    return x, y


def shard_indices(num_samples: int, rank: int, world_size: int, epoch: int, seed: int, shuffle: bool = True) -> torch.Tensor:
    """This rank's sample indices for one epoch, with torch's DistributedSampler semantics:
    one permutation shared by all ranks (seeded by seed + epoch), padded by wrapping around to a
    multiple of world_size, then rank r takes positions r, r + world_size, ... The shards of
    one epoch are disjoint except for the <= world_size - 1 padding samples."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if shuffle:
        g = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(num_samples, generator=g)
    else:
        order = torch.arange(num_samples)
    per_rank = -(-num_samples // world_size)  # ceil
    total = per_rank * world_size
    if total > num_samples:  # pad by repeating the head, as DistributedSampler does
        reps = -(-total // num_samples)
        order = order.repeat(reps)[:total]
    return order[rank:total:world_size]
