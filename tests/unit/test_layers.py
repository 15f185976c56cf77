"""KANLinear: gradients (gradcheck, float64), the packed-parameter interface, models, the kernels
behind the one autograd Function (eager, numba, Triton), numba's threads."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.func import functional_call

from kan import KAN, KANLinear, layers
from kan.kernels import eager_bspline as _eager_bspline, numba_bspline as _numba_bspline
from kan.layers import BASES, _BSplineKANFunction

CONFIGS = [
    # basis, grid, order
    ("bspline", 5, 3),
    ("bspline", 3, 1),
    ("bspline", 4, 2),
    ("rbf", 5, 3),
    ("chebyshev", 5, 3),
]


@pytest.mark.parametrize("path", ["default", "eager"])  # default: numba's fused kernels when installed
@pytest.mark.parametrize("num_out", [1, 2])  # out = 1 has its own input-gradient branch
@pytest.mark.parametrize("basis,grid,order", CONFIGS)
def test_gradcheck_input_and_parameters(basis, grid, order, num_out, path):
    ctx = _numba_bspline.disabled() if path == "eager" else contextlib.nullcontext()
    with ctx:
        _gradcheck(basis, grid, order, num_out)


def _gradcheck(basis, grid, order, num_out):
    torch.manual_seed(0)
    layer = KANLinear(3, num_out, grid_size=grid, spline_order=order, grid_range=(-1.0, 1.0), basis=basis).double()
    with torch.no_grad():
        layer.spline_weight.normal_()
    # inside the grid, in the extended-knot margin and beyond it
    x = torch.tensor([[-0.9, 0.1, 0.7], [-1.6, 1.3, 0.33], [2.5, -2.7, -0.05], [0.41, -0.52, 1.9]], dtype=torch.float64)
    x.requires_grad_()
    w = layer.weight.detach().clone().requires_grad_()
    call = lambda inp, wt: functional_call(layer, {"weight": wt}, (inp,))  # noqa: E731
    assert torch.autograd.gradcheck(call, (x, w))


def test_parameter_views_read_and_write_the_packed_weight():
    layer = KANLinear(4, 3, grid_size=6, spline_order=3)
    assert layer.num_basis == 9
    assert layer.base_weight.shape == (3, 4)
    assert layer.spline_scaler.shape == (3, 4)
    assert layer.spline_weight.shape == (3, 4, 9)
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    with torch.no_grad():
        layer.base_weight.zero_()
        layer.spline_scaler.fill_(2.0)
        layer.spline_weight.copy_(torch.arange(3 * 4 * 9, dtype=torch.float32).view(3, 4, 9))
    assert layer.weight[:, 0].abs().sum() == 0
    assert torch.all(layer.weight[:, 1] == 2.0)
    assert layer.spline_weight[2, 1, 5].item() == (2 * 4 + 1) * 9 + 5


def test_base_branch_only_when_spline_is_zero():
    layer = KANLinear(5, 3)
    with torch.no_grad():
        layer.spline_weight.zero_()
    x = torch.randn(7, 5)
    assert torch.allclose(layer(x), torch.nn.functional.silu(x) @ layer.base_weight.t(), atol=1e-6)


@pytest.mark.parametrize("basis", BASES)
def test_every_parameter_gets_a_gradient_and_first_layer_skips_input_grad(basis):
    """DDP needs a gradient on every parameter; the no-input-grad path must give the same ones."""
    torch.manual_seed(0)
    model = KAN([4, 8, 2], grid_size=5, basis=basis).double()
    x = torch.rand(32, 4, dtype=torch.float64) * 2 - 1
    model(x).square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    model.zero_grad()
    model(x.clone().requires_grad_()).square().sum().backward()
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, rtol=1e-12, atol=1e-12)


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="basis"):
        KANLinear(2, 2, basis="fourier")
    with pytest.raises(ValueError, match="grid_range"):
        KANLinear(2, 2, grid_range=(1.0, 1.0))
    with pytest.raises(ValueError, match="expected input"):
        KANLinear(3, 2)(torch.zeros(4, 2))


@pytest.mark.parametrize("num_out", [1, 3])
def test_empty_batch_goes_through(num_out):
    layer = KANLinear(3, num_out)
    x = torch.zeros(0, 3, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad.shape == (0, 3) and layer.weight.grad.abs().sum() == 0


def test_training_reduces_loss():
    torch.manual_seed(0)
    model = KAN([2, 8, 1], grid_size=5)
    x = torch.rand(256, 2) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * x[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(150):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


@pytest.mark.skipif(not _numba_bspline.available(), reason="numba is not installed (optional): eager path only")
@pytest.mark.parametrize("need_x_grad", [True, False])  # False: the first layer's backward
@pytest.mark.parametrize("num_out", [1, 3])  # out = 1: both kernels skip forming grad_F
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numba_and_eager_kernels_agree_through_the_one_function(dtype, num_out, need_x_grad):
    torch.manual_seed(0)
    layer = KANLinear(5, num_out, grid_size=4, grid_range=(-1.0, 2.0)).to(dtype)
    with torch.no_grad():
        layer.spline_weight.normal_()
    x = (torch.rand(37, 5, dtype=dtype) * 7 - 3).requires_grad_(need_x_grad)  # inside and outside the span
    wrt = (x, layer.weight) if need_x_grad else (layer.weight,)
    got = {}
    for kernels in (_numba_bspline, _eager_bspline):
        y = _BSplineKANFunction.apply(x, layer.weight, layer._spline, kernels)
        got[kernels] = (y, *torch.autograd.grad(y.square().sum(), wrt))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    for a, b in zip(got[_numba_bspline], got[_eager_bspline]):
        torch.testing.assert_close(a, b, **tol)


def test_layer_picks_triton_then_numba_then_eager(monkeypatch):
    chosen = []
    apply = _BSplineKANFunction.apply

    def spy(x, weight, spline, kernels):
        chosen.append(kernels)
        return apply(x, weight, spline, kernels)

    monkeypatch.setattr(_BSplineKANFunction, "apply", staticmethod(spy))
    x = torch.rand(4, 2)
    KANLinear(2, 3)(x)  # cubic on CPU: numba when installed (Triton needs CUDA or its interpreter)
    KANLinear(2, 3, spline_order=2)(x)  # the fused kernels are cubic-only
    with _numba_bspline.disabled():
        KANLinear(2, 3)(x)
    cubic = _numba_bspline if _numba_bspline.available() else _eager_bspline
    assert chosen == [cubic, _eager_bspline, _eager_bspline]
    assert layers.KERNELS[-1] is _eager_bspline


_THREADS_CHECK = """
import os, torch
torch.set_num_threads(1)
import numba
from kan import KANLinear
from kan.kernels import numba_bspline as _numba_bspline
assert "NUMBA_NUM_THREADS" not in os.environ  # importing kan leaves the environment alone
x = torch.rand(64, 2, requires_grad=True)
KANLinear(2, 3)(x).sum().backward()  # numba's first parallel call starts its OpenMP pool
assert (torch.get_num_threads(), numba.get_num_threads()) == (1, 1), (torch.get_num_threads(), numba.get_num_threads())
_numba_bspline.set_num_threads(10**6)
assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS  # clamped to the pool
_numba_bspline.set_num_threads(1)
assert numba.get_num_threads() == 1
print("THREADS-OK")
"""


def test_numba_threads_follow_torch_without_touching_the_environment():
    """Each rank's kernels use its torch threads: 2 ranks x full-size pools on 2 cores made the
    world-2 step 7x slower. numba's pool start must not leave torch on the pool size either."""
    import os
    import subprocess
    import sys

    pytest.importorskip("numba")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", _THREADS_CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert "THREADS-OK" in proc.stdout, proc.stderr[-2000:]


def test_set_num_threads_rejects_less_than_one():
    with pytest.raises(ValueError, match="num_threads"):
        _numba_bspline.set_num_threads(0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the fused GPU path cannot run here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_gpu_path_matches_eager(dtype):
    from kan.kernels import triton_bspline as _triton_bspline

    if not _triton_bspline.available():
        pytest.skip("triton is not importable: the layer uses the eager path on CUDA")
    torch.manual_seed(0)
    layer = KANLinear(64, 32, grid_size=10).to("cuda", dtype)
    x = (torch.rand(1000, 64, device="cuda", dtype=dtype) * 3 - 1.5).requires_grad_()
    y_fused = layer(x)
    (gx_fused, gw_fused) = torch.autograd.grad(y_fused.square().sum(), (x, layer.weight))
    with _triton_bspline.disabled():
        y_eager = layer(x)
        (gx_eager, gw_eager) = torch.autograd.grad(y_eager.square().sum(), (x, layer.weight))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(y_fused, y_eager, **tol)
    torch.testing.assert_close(gx_fused, gx_eager, **tol)
    torch.testing.assert_close(gw_fused, gw_eager, **tol)


_INTERPRETER_CHECK = """
import itertools
import torch
from kan import KANLinear
from kan.kernels import numba_bspline as _numba_bspline, triton_bspline as _triton_bspline
assert _triton_bspline._INTERPRET
for (dtype, tol), num_out in itertools.product(((torch.float64, 1e-12), (torch.float32, 1e-4)), (1, 3)):
    torch.manual_seed(0)
    layer = KANLinear(5, num_out, grid_size=4, grid_range=(-1.0, 2.0)).to(dtype)
    with torch.no_grad():
        layer.spline_weight.normal_()
    x = (torch.rand(37, 5, dtype=dtype) * 5 - 2).requires_grad_()  # inside and outside the span
    y1 = layer(x)
    g1 = torch.autograd.grad(y1.square().sum(), (x, layer.weight))
    with _triton_bspline.disabled(), _numba_bspline.disabled():  # the reference: eager kernels
        y0 = layer(x)
        g0 = torch.autograd.grad(y0.square().sum(), (x, layer.weight))
    for a, b in zip((y1, *g1), (y0, *g0)):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
print("TRITON-INTERPRETER-OK")
"""


def test_triton_kernels_match_eager_in_the_interpreter():
    """The fused kernels' arithmetic, checked without a GPU (TRITON_INTERPRET=1, CPU tensors)."""
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (optional): nothing to interpret")
    env = dict(os.environ, TRITON_INTERPRET="1")  # kan is installed: the child imports it as we do
    proc = subprocess.run([sys.executable, "-c", _INTERPRETER_CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert "TRITON-INTERPRETER-OK" in proc.stdout, proc.stderr[-2000:]
