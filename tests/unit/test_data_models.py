"""Data generation and sharding; parameter counts of the KAN and its MLP baselines."""

import pytest
import torch

from kan import KAN, MLP, build_model
from kan.contract.point import ModelConfig
from kan.data.datasets import make_dataset, shard_indices
from kan.models import matched_mlp_widths, mlp_param_count, num_params


def test_dataset_is_sum_of_squares_with_noise():
    x, y = make_dataset(20000, input_dim=3, noise=0.01, seed=1)
    assert x.shape == (20000, 3) and y.shape == (20000, 1)
    assert x.min() >= -2 and x.max() <= 2
    resid = y[:, 0] - (x**2).sum(1)
    assert abs(resid.std().item() - 0.01) < 0.002
    x2, y2 = make_dataset(20000, input_dim=3, noise=0.01, seed=1)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    x3, _ = make_dataset(20000, input_dim=3, noise=0.01, seed=2)
    assert not torch.equal(x, x3)


@pytest.mark.parametrize("n, world", [(100, 1), (100, 4), (103, 4), (7, 3)])
def test_shards_are_disjoint_and_cover(n, world):
    shards = [shard_indices(n, r, world, epoch=3, seed=5) for r in range(world)]
    assert len({len(s) for s in shards}) == 1  # equal steps on every rank (DDP needs it)
    allidx = torch.cat(shards)
    assert set(allidx.tolist()) == set(range(n))  # every sample seen
    per_rank = -(-n // world)
    assert len(allidx) == per_rank * world
    # overlap only through DistributedSampler-style padding
    assert len(allidx) - len(set(allidx.tolist())) == per_rank * world - n


def test_shards_reshuffle_per_epoch():
    a = shard_indices(1000, 0, 2, epoch=0, seed=0)
    b = shard_indices(1000, 0, 2, epoch=1, seed=0)
    assert not torch.equal(a, b)
    assert torch.equal(a, shard_indices(1000, 0, 2, epoch=0, seed=0))


def test_bad_rank():
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\)"):
        shard_indices(10, 2, 2, 0, seed=0)


def test_kan_parameter_count():
    # per edge: base weight + spline scaler + (grid + order) coefficients
    m = KAN([2, 64, 1], grid_size=10, spline_order=3)
    edges = 2 * 64 + 64 * 1
    assert num_params(m) == edges * (1 + 1 + 13)
    m = KAN([64, 256, 256, 1], grid_size=5, spline_order=3)
    assert num_params(m) == (64 * 256 + 256 * 256 + 256) * (2 + 8)


def test_mlp_parameter_counts():
    assert num_params(MLP([2, 64, 1])) == mlp_param_count([2, 64, 1]) == 2 * 64 + 64 + 64 + 1
    kan_params = num_params(KAN([2, 64, 1], grid_size=10))
    matched = build_model(ModelConfig(impl="mlp_matched", widths=(2, 64, 1), grid_size=10))
    assert abs(num_params(matched) - kan_params) / kan_params < 0.02
    assert matched_mlp_widths([2, 64, 1], kan_params)[0] == 2


def test_models_map_shapes_and_reject_bad_input():
    x = torch.randn(5, 2)
    for impl in ("kanscale", "mlp", "mlp_matched"):
        assert build_model(ModelConfig(impl=impl, widths=(2, 8, 1))).forward(x).shape == (5, 1)
    with pytest.raises(ValueError, match="is not allowed; allowed values: kanscale"):
        ModelConfig(impl="pykan9")
    with pytest.raises(ValueError, match="widths must list"):
        KAN([2])
