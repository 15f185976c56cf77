"""Can it be captured? (kan/probes/capture.py) on a CPU: each thing that breaks CUDA-graph capture fails the
check naming its operator and where it ran; what is legitimately fine passes; kanscale's own KAN
passes on both kernel paths a GPU may take (eager, and Triton with its launches stubbed), and
fails when the Triton path builds a tensor per call again."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch import tensor  # the name a caller may use: a patch of torch.tensor never sees it

from kan.kernels import triton_bspline
from kan.probes import capture
from kan.contract.point import ModelConfig
from kan.models import KAN, build_model


class Step(nn.Module):
    """A linear layer followed by `extra(self, y)`: one thing under test in an otherwise clean forward."""

    def __init__(self, extra, width: int = 3) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.extra = extra
        self.register_buffer("scale", torch.full((width,), 2.0))

    def forward(self, x):
        return self.extra(self, self.lin(x))


def verdict(extra):
    return capture.check(Step(extra), (3, 3))


BREAKS = {
    "tensor from Python values": (lambda m, y: y * torch.tensor([1.0, 2.0, 3.0], device=y.device),
                                  "torch.tensor", "python"),
    "new_tensor": (lambda m, y: y + y.new_tensor([1.0, 2.0, 3.0]), "Tensor.new_tensor", "python"),
    "host tensor copied in": (lambda m, y: y * torch.ones(3).to(y.device), "aten._to_copy", "copy"),
    ".item()": (lambda m, y: y * y.max().item(), "aten._local_scalar_dense", "read"),
    "if on a tensor": (lambda m, y: y * 2 if y.sum() > 0 else y, "aten._local_scalar_dense", "read"),
    ".cpu()": (lambda m, y: y + y.detach().cpu().sum().to(y.device), "aten._to_copy", "read"),
    ".tolist()": (lambda m, y: y * len(y.tolist()), "aten._to_copy", "read"),
    "print": (lambda m, y: print(y) or y, "Tensor.__repr__", "read"),
    "nonzero": (lambda m, y: y + torch.nonzero(y > 0).shape[0], "aten.nonzero", "shape"),
    "boolean mask": (lambda m, y: y + y[y > 0].sum(), "aten.index", "shape"),
    "unique": (lambda m, y: y + torch.unique(y.detach()).sum(), "aten._unique2", "shape"),
    "masked_select": (lambda m, y: y + torch.masked_select(y, y > 0).sum(), "aten.masked_select", "shape"),
    "synchronize": (lambda m, y: torch.cuda.synchronize() or y, "torch.cuda.synchronize", "sync"),
    "tensor imported by name": (lambda m, y: y * tensor([1.0, 2.0, 3.0], device=y.device), "torch.tensor", "python"),
    "a host index tensor on a device tensor": (lambda m, y: y[:, torch.tensor([0, 2, 1])], "aten.index", "copy"),
    "torch.linalg.inv (its error check syncs)": (lambda m, y: y @ torch.linalg.inv(m.lin.weight),
                                                 "aten._linalg_check_errors", "check"),
    "a read that starts on the 5th call": (lambda m, y: _from_fifth_call(m, y), "aten._local_scalar_dense", "read"),
}


def _from_fifth_call(m, y):
    """Fine for 4 calls, then a read back every call: the trainer warms up 11 calls before it captures
    the 12th, so the check must watch a call after as many warm-up calls, not the 2nd."""
    m.calls = getattr(m, "calls", 0) + 1
    return y * y.max().item() if m.calls >= 5 else y


@pytest.mark.parametrize("case", list(BREAKS))
def test_what_breaks_capture_fails_naming_the_operator_and_the_module(case, capsys):
    extra, op, kind = BREAKS[case]
    r = verdict(extra)
    assert r["pass"] is False, r
    hits = [f for f in r["findings"] if f["op"] == op and f["kind"] == kind]
    assert hits and hits[0]["where"] == "the forward of the model (Step)", r["findings"]
    assert op in r["detail"] and "the forward of the model (Step)" in r["detail"]


FINE = {
    "allocations and fills on the device": lambda m, y: y + torch.zeros(3, device=y.device) + torch.full_like(y, 1.0),
    "where with a Python number (aten.scalar_tensor on the device)": lambda m, y: torch.where(y > 0, y, 0.0),
    "Python numbers as operands": lambda m, y: y * 2.0 + 1,
    "a 0-dim CPU tensor as an operand (a scalar, no copy)": lambda m, y: y * torch.tensor(2.0),
    "a registered buffer": lambda m, y: y * m.scale,
    "arange and masks used arithmetically":
        lambda m, y: y * (torch.arange(3, device=y.device) > 0) + y.masked_fill(y < 0, 0),
    "a constant made once and cached": lambda m, y: y * _cached(y.device),
}
_CACHE: dict = {}


def _cached(device):
    if device not in _CACHE:  # the warm-up step builds it; the watched step reuses it
        _CACHE[device] = torch.tensor([1.0, 2.0, 3.0], device=device)
    return _CACHE[device]


@pytest.mark.parametrize("case", list(FINE))
def test_what_is_legitimately_fine_passes(case):
    r = verdict(FINE[case])
    assert r["pass"] is True and r["findings"] == [], r


def test_the_backward_and_the_loss_are_watched_and_named():
    class ReadsInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float(g.abs().max())  # a read back to the host in the backward

    class Inner(nn.Module):
        def forward(self, x):
            return ReadsInBackward.apply(x)

    model = nn.Sequential(nn.Linear(3, 3), Inner(), nn.Linear(3, 2))
    r = capture.check(model, (3, 2), loss="cross_entropy")
    (f,) = r["findings"]
    assert (f["op"], f["kind"], f["where"]) == ("aten._local_scalar_dense", "read", "the backward of 1 (Inner)")


def test_a_nested_module_is_named_by_its_path():
    class Reads(nn.Module):
        def forward(self, x):
            return x * x.sum().item()

    model = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.SiLU(), Reads()), nn.Linear(4, 1))
    (f,) = capture.check(model, (3, 1))["findings"]
    assert f["where"] == "the forward of 1.1 (Reads)" and f["via"] == "Tensor.item"


@pytest.mark.parametrize("basis", ["bspline", "rbf", "chebyshev"])
def test_kanscale_kan_passes_on_every_kernel_path(basis):
    model = KAN((2, 8, 4, 1), 5, 3, (-2.0, 2.0), basis)
    r = capture.check(model, (2, 1), grid_range=(-2.0, 2.0))
    assert r["pass"] is True, r["detail"]
    assert r["paths"] == (["eager", "triton"] if basis == "bspline" else ["default"])


def test_the_triton_path_is_really_taken_with_its_launches_stubbed():
    model = KAN((2, 8, 1), 5, 3, (-2.0, 2.0), "bspline")
    launched = []
    with capture.kernel_path("triton", torch.device("meta")) as seen:
        r = capture.run_path(model, (2, 1))
        launched.append(seen["launches"])
    assert r["pass"] is True and launched[0] >= 6  # 2 layers x (features in warm-up and step) + grad_x
    assert triton_bspline.usable.__module__ == "kan.kernels.triton_bspline"  # put back after the block


def test_the_triton_path_fails_when_it_builds_its_constants_per_call(monkeypatch):
    # the bug the capture check exists to find: [t0, inv_h] as a new tensor in every forward
    monkeypatch.setattr(triton_bspline, "_consts",
                        lambda x, spline: torch.tensor([spline.t0, spline.inv_h], dtype=x.dtype, device=x.device))
    r = capture.check(KAN((2, 8, 1), 5, 3, (-2.0, 2.0), "bspline"), (2, 1))
    assert r["pass"] is False
    found = {(f["op"], f["where"], f["path"]) for f in r["findings"]}
    assert ("torch.tensor", "the forward of layers.0 (KANLinear)", "triton") in found
    assert ("torch.tensor", "the backward of layers.1 (KANLinear)", "triton") in found
    assert all(f["path"] == "triton" for f in r["findings"])  # the eager kernels cache theirs


@pytest.mark.parametrize("impl", ["mlp", "mlp_matched"])
def test_the_mlps_pass(impl):
    model = build_model(ModelConfig(impl=impl, widths=(2, 16, 1)))
    r = capture.check(model, (2, 1))
    assert r["pass"] is True and r["paths"] == ["default"], r["detail"]


def test_a_model_that_cannot_run_on_meta_is_not_checked_rather_than_passed():
    class NeedsData(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 1)

        def forward(self, x):
            return self.lin(torch.from_numpy(x.detach().numpy()))

    r = capture.check(NeedsData(), (2, 1))
    assert r["pass"] is None and r["detail"].startswith("not checked:")


def test_the_check_leaves_torch_as_it_found_it():
    before = (torch.tensor, torch.as_tensor, torch.Tensor.new_tensor, torch.cuda.synchronize)
    verdict(BREAKS["synchronize"][0])
    verdict(BREAKS["tensor from Python values"][0])
    assert (torch.tensor, torch.as_tensor, torch.Tensor.new_tensor, torch.cuda.synchronize) == before
    y = F.linear(torch.ones(1, 2), torch.ones(1, 2))
    assert y.item() == 2.0


def test_the_device_scripts_probes_get_the_verdicts_it_expects():
    # benchmarks/capture_check.py holds these verdicts against real captures on a GPU
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "capture_check.py"
    spec = importlib.util.spec_from_file_location("capture_check_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name, (_, expected) in script.PROBES.items():
        model, widths = script.build(name)
        assert capture.check(model, widths)["pass"] is expected, name


def test_common_layers_pass_and_batchnorms_cumulative_average_is_found():
    fine = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.1), nn.LayerNorm(16), nn.GELU(),
                         nn.Linear(16, 1))
    assert capture.check(fine, (8, 1))["pass"] is True
    # momentum=None averages over float(num_batches_tracked): a read back to the host every step
    reads = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16, momentum=None), nn.Linear(16, 1))
    (f,) = capture.check(reads, (8, 1))["findings"]
    assert (f["op"], f["via"], f["where"]) == ("aten._local_scalar_dense", "Tensor.__float__",
                                                "the forward of 1 (BatchNorm1d)")
