"""Which pykan 0.2.8 options change its speed, and which setting the seed paper's speed comes from.
Runs in pykan's own environment (the workflow's .venv-pykan; `make pykan-env` makes it):

    .venv-pykan/bin/python benchmarks/pykan_options.py [--threads 1] [--rounds 4]

For KAN(width=[2, w, 1], grid=10, k=3) at w = 32, 64, 128, 256 and each option setting:
  * parameter counts, all and trainable, against the paper's 2,726 / 5,414 / 10,790 / 21,542;
  * aten ops one training step dispatches (forward, MSE, backward, Adam): deterministic, so it
    explains the timings without their noise;
  * the median time of a training step at batch 512 (float32, CPU), every model timed in this one
    process, interleaved round by round in a rotating order, so load from other work hits all alike.
The paper's A100 throughput fell ~2x per doubling of w (6,156 -> 867 samples/s per GPU): a step
dominated by dispatched ops scales like the op count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import kan as pykan

PAPER_PARAMS = {32: 2726, 64: 5414, 128: 10790, 256: 21542}
SETTINGS = {  # name: the options that differ from pykan's defaults (auto_save off everywhere: it only
    "defaults (the paper's)": {},           # writes ./model/ once, at construction)
    "save_act=False": {"save_act": False},
    "symbolic_enabled=False": {"symbolic_enabled": False},
    "both False": {"save_act": False, "symbolic_enabled": False},
}


class CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def build(width: int, options: dict):
    return pykan.KAN(width=[2, width, 1], grid=10, k=3, grid_range=[-2, 2], seed=0, auto_save=False, **options)


def make_step(model, batch: int):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, 2, generator=g) * 4 - 2
    y = (x * x).sum(1, keepdim=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="32,64,128,256")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6, help="timed steps per model per round")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    widths = [int(w) for w in a.widths.split(",")]
    print(f"pykan {getattr(pykan, '__version__', '0.2.8')}, torch {torch.__version__}, {a.threads} thread(s), "
          f"batch {a.batch}, load average {os.getloadavg()[0]:.2f}")
    steps, ops = {}, {}
    print(f"{'setting':26} {'w':>4} {'params all':>10} {'trainable':>9} {'paper':>6} {'ops/step':>8}")
    for name, options in SETTINGS.items():
        for w in widths:
            model = build(w, options)
            step = make_step(model, a.batch)
            for _ in range(3):  # warm-up (Adam state, allocator)
                step()
            counter = CountOps()
            with counter:
                step()
            steps[(name, w)], ops[(name, w)] = step, counter.n
            n_all = sum(p.numel() for p in model.parameters())
            n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
            print(f"{name:26} {w:4d} {n_all:10,d} {n_train:9,d} {PAPER_PARAMS.get(w, 0):6,d} {counter.n:8,d}")
    times = {k: [] for k in steps}
    keys = list(steps)
    t0 = time.time()
    for r in range(a.rounds):
        k = r % len(keys)
        for key in keys[k:] + keys[:k]:
            for _ in range(a.steps):
                t = time.perf_counter()
                steps[key]()
                times[key].append(time.perf_counter() - t)
    print(f"\nmedian step over {a.rounds * a.steps} interleaved steps per model ({time.time() - t0:.0f} s, "
          f"load average now {os.getloadavg()[0]:.2f})")
    print(f"{'setting':26} " + " ".join(f"{'w=' + str(w):>18}" for w in widths) + "  time x per doubling | ops x")
    for name in SETTINGS:
        med = [statistics.median(times[(name, w)]) for w in widths]
        cells = " ".join(f"{m * 1e3:7.1f} ms {a.batch / m:7,.0f}/s" for m in med)
        tr = " ".join(f"{med[i + 1] / med[i]:.2f}" for i in range(len(med) - 1))
        orat = " ".join(f"{ops[(name, widths[i + 1])] / ops[(name, widths[i])]:.2f}" for i in range(len(widths) - 1))
        print(f"{name:26} {cells}  {tr} | {orat}")
    print("\nthe paper (A100, 2 nodes x 2 GPUs, workflow/report/reference/model_size.csv): 6,156 / 3,336 / 1,717 / "
          "867 samples/s per GPU, time x 1.85 / 1.94 / 1.98 per doubling")


if __name__ == "__main__":
    main()
