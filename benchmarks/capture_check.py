"""Can it be captured? on this machine's device: kan/probes/capture.py's verdicts, and on CUDA each one held
against a real capture (torch.cuda.graph), so the check's rules are measured, not assumed.

    python benchmarks/capture_check.py --device cuda [--json OUT]    (benchmarks/device_check.sh)

1. The built-in models (kanscale on each basis, and on its eager and Triton kernels; the MLPs): the
   verdict on the device's own kernels, and on CUDA a whole step (forward, loss, backward, capturable
   Adam) captured after 3 warm-up steps on a side stream and replayed 3 times.
2. Probes, one thing each that the check calls fine or breaking (tests/unit/test_capture.py's cases):
   the verdict on meta, and on CUDA whether a real capture of the same step succeeds. Each real
   capture runs in a child process of its own: a capture that fails may leave the CUDA context
   unusable for what follows.
Without CUDA only the verdicts are printed (on meta). Prints one line per model or probe and a last
line: how many verdicts a real capture agreed with.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from kan.probes import capture  # noqa: E402
from kan.contract.point import ModelConfig  # noqa: E402
from kan.models import build_model  # noqa: E402

WIDTHS = (2, 64, 1)
MODELS = [("kanscale", "bspline"), ("kanscale", "rbf"), ("kanscale", "chebyshev"), ("mlp", "bspline"),
          ("mlp_matched", "bspline")]


class Probe(nn.Module):
    def __init__(self, extra) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 3)
        self.out = nn.Linear(3, 1)
        self.extra = extra
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x):
        return self.out(self.extra(self, self.lin(x)))


# name -> (what it does to the hidden activations y, the verdict the check gives)
PROBES = {
    "torch.tensor on the device": (lambda m, y: y * torch.tensor([1.0, 2.0, 3.0], device=y.device), False),
    ".to(device) of a host tensor": (lambda m, y: y * torch.ones(3).to(y.device), False),
    ".item()": (lambda m, y: y * y.max().item(), False),
    "if on a tensor": (lambda m, y: y * 2 if y.sum() > 0 else y, False),
    "boolean mask": (lambda m, y: y + y[y > 0].sum(), False),
    "nonzero": (lambda m, y: y + torch.nonzero(y > 0).shape[0], False),
    "synchronize": (lambda m, y: torch.cuda.synchronize() or y, False),
    "zeros and full on the device": (lambda m, y: y + torch.zeros(3, device=y.device) + torch.full_like(y, 1.0), True),
    "where with a Python number": (lambda m, y: torch.where(y > 0, y, 0.0), True),
    "a 0-dim CPU tensor as an operand": (lambda m, y: y * torch.tensor(2.0), True),
    "a registered buffer": (lambda m, y: y * m.scale, True),
    "masked_fill": (lambda m, y: y.masked_fill(y < 0, 0), True),
}


def build(name: str) -> tuple[nn.Module, tuple]:
    if name in PROBES:
        torch.manual_seed(0)
        return Probe(PROBES[name][0]), (2, 1)
    impl, basis = name.split(":")
    torch.manual_seed(0)
    return build_model(ModelConfig(impl=impl, basis=basis, widths=WIDTHS)), WIDTHS


def real_capture(name: str, path: str) -> str:
    """'ok', or the error a real capture of the step gave (on CUDA)."""
    from kan import graphs

    try:
        model, widths = build(name)
        device = torch.device("cuda")
        with capture.kernel_path(path, device) if path != "default" else _nothing():
            model = model.to(device)
            x = torch.rand(256, widths[0], device=device) * 4 - 2
            y = torch.rand(256, widths[-1], device=device)
            opt = graphs.make_optimizer(model.parameters(), 1e-3, device)
            loss_fn = torch.nn.functional.mse_loss
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    opt.zero_grad(set_to_none=True)
                    loss_fn(model(x), y).backward()
                    opt.step()
            torch.cuda.current_stream().wait_stream(side)
            opt.zero_grad(set_to_none=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
            return "ok" if torch.isfinite(loss).item() else "replayed, loss not finite"
    except Exception as e:  # noqa: BLE001 - the finding itself
        return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


class _nothing:
    def __enter__(self):
        return {}

    def __exit__(self, *exc):
        return False


def in_child(name: str, path: str, timeout_s: float = 120) -> str:
    r = subprocess.run([sys.executable, __file__, "--one", name, "--path", path], capture_output=True, text=True,
                       timeout=timeout_s, cwd=ROOT)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1])["capture"] if lines else f"child exited {r.returncode}: {r.stderr.strip()[-200:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "meta")
    ap.add_argument("--json")
    ap.add_argument("--one")
    ap.add_argument("--path", default="default")
    args = ap.parse_args()
    if args.one:  # a child: one real capture
        print(json.dumps({"capture": real_capture(args.one, args.path)}))
        return 0
    device = torch.device("meta" if args.device == "cpu" else args.device)
    real = device.type == "cuda"
    rows, agree, total = [], 0, 0
    for impl, basis in MODELS:
        name = f"{impl}:{basis}"
        model, widths = build(name)
        r = capture.check(model, widths, device=device, grid_range=(-2.0, 2.0))
        rows += [{"name": name, "path": path, "verdict": r["pass"], "detail": r["detail"]} for path in r["paths"]]
    for name, (_, expected) in PROBES.items():
        model, widths = build(name)
        r = capture.check(model, widths, device="meta")
        rows.append({"name": name, "path": "default", "verdict": r["pass"], "expected": expected,
                     "detail": r["detail"]})
    # the real captures, one child each (6 at a time: the device machine has cores to spare)
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda row: in_child(row["name"], row["path"]) if real else "not tried (no CUDA)", rows))
    for row, g in zip(rows, got):
        row["capture"] = g
    for row in rows:
        if real:
            total += 1
            agree += (row["capture"] == "ok") == (row["verdict"] is True)
        print(f"{row['name']:<36} {row['path']:<8} verdict {str(row['verdict']):<5} capture {row['capture']}")
    print(f"capture check: {agree} of {total} verdicts agree with a real capture" if real else
          f"capture check: {len(rows)} verdicts on {device.type}; no CUDA, so no real capture to hold them against")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
