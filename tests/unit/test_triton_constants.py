"""The Triton path builds no tensor per call: its knot constants [t0, inv_h] are made once per
(device, dtype, spline) and reused, since a tensor made from Python values is a host-to-device
copy that CUDA-graph capture forbids. Checked on a CPU with the kernel launches stubbed, so it
needs neither a GPU nor triton."""

import types

import pytest
import torch

from kan.kernels import triton_bspline as _triton_bspline
from kan.kernels.eager_bspline import LocalBSpline


class _Launch:
    """Stands in for a @triton.jit kernel: `kernel[grid](*args, **meta)` records the args."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **meta: self.calls.append(args)


@pytest.fixture
def stubbed(monkeypatch):
    feats, grads = _Launch(), _Launch()
    monkeypatch.setattr(_triton_bspline, "_features_kernel", feats, raising=False)
    monkeypatch.setattr(_triton_bspline, "_grad_x_kernel", grads, raising=False)
    monkeypatch.setattr(_triton_bspline, "triton", types.SimpleNamespace(cdiv=lambda a, b: -(-a // b)), raising=False)
    return feats, grads


def _consts_of(feats, grads):
    # _features_kernel(x, out, consts, ...) and _grad_x_kernel(x, grad_f, out, consts, ...)
    return [a[2] for a in feats.calls] + [a[3] for a in grads.calls]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_backward_reuse_one_constants_tensor(stubbed, monkeypatch, dtype):
    spline = LocalBSpline(grid_size=5, spline_order=3, grid_range=(-1.0, 2.0))
    x = torch.rand(8, 4, dtype=dtype)
    eff = torch.rand(3, 1 + spline.num_basis, 4, dtype=dtype)
    grad_y = torch.rand(8, 3, dtype=dtype)
    _triton_bspline.features(x, spline, True)  # the first call may build the constants

    built = []
    real = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, **k: built.append(a) or real(*a, **k))
    for _ in range(2):
        _triton_bspline.features(x, spline, True)
        _triton_bspline.grad_x(x, spline, (), grad_y, eff)
    assert built == []  # no tensor made from Python values after the first call

    consts = _consts_of(*stubbed)
    assert len(consts) == 5 and all(c is consts[0] for c in consts)
    assert consts[0].dtype == dtype and consts[0].tolist() == pytest.approx([spline.t0, spline.inv_h])


def test_constants_are_per_dtype_and_per_spline(stubbed):
    a = LocalBSpline(grid_size=5, spline_order=3, grid_range=(-1.0, 1.0))
    b = LocalBSpline(grid_size=10, spline_order=3, grid_range=(-1.0, 1.0))
    x32, x64 = torch.rand(2, 3), torch.rand(2, 3, dtype=torch.float64)
    for spline, x in ((a, x32), (a, x64), (b, x32), (a, x32)):
        _triton_bspline.features(x, spline, False)
    c = _consts_of(*stubbed)
    assert c[0] is c[3] and c[0] is not c[1] and c[0] is not c[2]
    assert c[1].dtype == torch.float64 and c[2].tolist() == pytest.approx([b.t0, b.inv_h])
