"""A point's data as tensors (load_data: synthetic, Feynman, a file or a sklearn table, with the
held-out rows) and per-rank sharding (no downloads, fully seeded).

The paper's task (the default): f(x, y) = x^2 + y^2 on [-2, 2]^2 with Gaussian noise of std 0.01,
generalised to d inputs as a sum of squares.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..contract.data_config import DataConfig


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


class Data(NamedTuple):
    """A point's data as tensors: `samples` training rows, the held-out rows, and what they are."""

    x: torch.Tensor       # (samples, inputs)
    y: torch.Tensor       # (samples, 1) float, or (samples,) int64 class index
    x_val: torch.Tensor   # (held-out, inputs)
    y_val: torch.Tensor
    classification: bool
    facts: dict           # for the record: kind, rows, classes, the held-out rows' checksum


def load_data(data: DataConfig, num_samples: int, input_dim: int, noise: float, seed: int) -> Data:
    """The point's training rows (exactly `num_samples`) and held-out rows.

    synthetic: today's rows, unchanged; the held-out rows are a fresh draw (seed + 1) of
    round(val_fraction x samples). feynman: the same, the equation's inputs in the database's ranges.
    file / sklearn: the table split once (kan/data/user_tables.py, seeded, the same on every rank); training
    row i is table row i mod the training rows (a small table repeats, a large one is cut), so the
    experiments' `samples` keep their meaning. Features (and a regression target) are standardised
    with the training rows' mean and std; val_loss is then in units of the target's variance."""
    from . import user_tables

    n_val = max(1, round(data.val_fraction * num_samples))
    if data.kind == "synthetic":
        x, y = make_dataset(num_samples, input_dim, noise, seed)
        xv, yv = make_dataset(n_val, input_dim, noise, seed + 1)
        return Data(x, y, xv, yv, False, {"kind": "synthetic", "num_train_rows": num_samples, "num_val": n_val,
                                          "val_checksum": _checksum(xv, yv)})
    if data.kind == "feynman":
        from .feynman import sample

        x, y = sample(data.equation, num_samples, seed)
        xv, yv = sample(data.equation, n_val, seed + 1)
        y = y + noise * np.random.default_rng(seed + 2).standard_normal(len(y))
        facts = {"kind": "feynman", "equation": data.equation, "num_train_rows": num_samples}
        rows = None
    else:
        table = user_tables.read_table(data)
        found = user_tables.content_hash(data) if data.sha256 else ""
        if found != data.sha256:
            raise ValueError(f"{table.source}: the file changed since the study was planned (sha256 "
                             f"{found[:12]}, planned {data.sha256[:12]}); plan again")
        train, val = user_tables.split(len(table.y), data.val_fraction, seed)
        rows = np.arange(num_samples) % len(train)  # positions in the training rows
        x, y, xv, yv = table.x[train], table.y[train], table.x[val], table.y[val]
        facts = {"kind": data.kind, "source": table.source, "features": list(table.features),
                 "num_train_rows": len(train), "classes": [str(c) for c in table.classes]}
    x, xv = user_tables.standardise(x, xv)  # with the training rows' statistics (each row once)
    if not data.classification:
        y, yv = user_tables.standardise(y, yv)
    if rows is not None:
        x, y = x[rows], y[rows]
    if data.classification:
        yt, yvt = torch.from_numpy(y).long(), torch.from_numpy(yv).long()
    else:
        yt, yvt = torch.from_numpy(y).float()[:, None], torch.from_numpy(yv).float()[:, None]
    xt, xvt = torch.from_numpy(x).float(), torch.from_numpy(xv).float()
    facts.update(num_val=len(yvt), val_checksum=_checksum(xvt, yvt))
    return Data(xt, yt, xvt, yvt, data.classification, facts)


def _checksum(x: torch.Tensor, y: torch.Tensor) -> float:
    """The held-out rows' sum (float64): equal on every rank iff they hold the same rows."""
    return float(x.double().sum().item() + 1e-3 * y.double().sum().item())
