"""Side-by-side training-step throughput of kanscale's KAN and its peers.

One training step = zero_grad, forward, MSE, backward, Adam (lr 1e-3), float32, on one fixed
random batch (inputs uniform on the grid range, the same seed for every implementation).
Each implementation runs in its own fresh subprocess (its own sys.path, so pykan's import
name `kan` never meets ours, and its own peak-RSS baseline); a round runs every
implementation once, and rounds repeat so that load from other work on a shared machine hits
all implementations alike. Reported: for each implementation the best and the median over rounds of
the per-process median step, kanscale / peer as best vs best and as the median of per-round
ratios, and peak RSS above the baseline taken after imports, data and a tiny warm-up step,
before the model is built. On a machine shared with other work the best round is the one
least disturbed; report both.

    python benchmarks/bench_layers.py --workload all --rounds 5 \
        --efficient-kan-path .peers/Blealtan+efficient-kan/src \
        --fast-kan-path .peers/ZiyaoLi+fast-kan \
        --inkan-path .peers/inkan --pykan-path .peers/pykan:.peers/pykan-deps

Peers that are not found are skipped with a note. inkan and pykan come from PyPI
(benchmarks/requirements.txt); efficient-kan and fast-kan are not on PyPI: pass a local
checkout. Nothing here is a test: no thresholds are asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WORKLOADS = {
    # name: (widths, grid_size, spline_order, batch)
    "small": ([2, 64, 1], 10, 3, 512),
    "medium": ([64, 256, 256, 1], 5, 3, 1024),
}
IMPLS = ("kanscale", "kanscale-eager", "inkan", "inkan-eager", "efficient-kan", "fast-kan", "pykan", "mlp")
GRID_RANGE = (-1.0, 1.0)
IMPORTS = {"kanscale": "kan.models", "kanscale-eager": "kan.models", "mlp": "kan.models", "inkan": "inkan", "inkan-eager": "inkan",
           "efficient-kan": "efficient_kan", "fast-kan": "fastkan", "pykan": "kan"}


# ---------------------------------------------------------------------------------------------
# child: build one model, time it, print one JSON line


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _build(impl: str, widths, grid_size: int, spline_order: int):
    import torch

    if impl in ("kanscale", "kanscale-eager", "mlp"):
        from kan.kernels import numba_bspline
        from kan.models import KAN, MLP, matched_mlp_widths, num_params

        if impl == "kanscale-eager":  # without the optional fused CPU kernels (numba)
            numba_bspline.set_enabled(False)

        model = KAN(widths, grid_size, spline_order, GRID_RANGE)
        if impl == "mlp":  # an MLP with the KAN's parameter count
            model = MLP(matched_mlp_widths(widths, num_params(model)))
        return model
    if impl in ("inkan", "inkan-eager"):
        from inkan import KANNetwork

        return KANNetwork(
            widths, grid_size=grid_size, spline_order=spline_order, grid_range=GRID_RANGE,
            compile_basis=(impl == "inkan"),
        )
    if impl == "efficient-kan":
        from efficient_kan import KAN

        return KAN(widths, grid_size=grid_size, spline_order=spline_order, grid_range=list(GRID_RANGE))
    if impl == "fast-kan":
        from fastkan import FastKAN

        # RBF basis: grid_size + spline_order centres, the B-spline layer's basis count
        return FastKAN(widths, grid_min=GRID_RANGE[0], grid_max=GRID_RANGE[1], num_grids=grid_size + spline_order)
    if impl == "pykan":
        from kan import KAN  # pykan's package; this child never sees ours

        torch.set_default_dtype(torch.float32)
        return KAN(width=widths, grid=grid_size, k=spline_order, grid_range=list(GRID_RANGE), seed=0, auto_save=False)
    raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")


def child(args: argparse.Namespace) -> None:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    widths, grid_size, spline_order, batch = WORKLOADS[args.workload]
    batch = args.batch or batch
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(batch, widths[0], generator=gen) * 2 - 1).to(device)  # on the grid range
    y = torch.sin(3 * x[:, :1]).repeat(1, widths[-1]).to(device)
    __import__(IMPORTS[args.impl])  # imports count in the baseline, not in the peak
    # so do torch's lazily loaded kernels and thread pools (tens of MB, the same for every model)
    warm = torch.nn.Linear(8, 8).to(device)
    torch.optim.Adam(warm.parameters()).zero_grad()
    warm(torch.ones(4, 8, device=device)).square().sum().backward()
    torch.optim.Adam(warm.parameters()).step()
    try:
        with open("/proc/self/clear_refs", "w") as fh:  # reset the peak-RSS high-water mark
            fh.write("5")
    except OSError:
        pass
    rss0 = _rss_kib("VmRSS")
    torch.manual_seed(0)
    model = _build(args.impl, widths, grid_size, spline_order).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    rec = {
        "impl": args.impl,
        "workload": args.workload,
        "batch": batch,
        "median_step_s": med,
        "samples_per_s": batch / med,
        "peak_rss_above_baseline_mb": max(0, _rss_kib("VmHWM") - rss0) / 1024,
        "num_params": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "num_threads": torch.get_num_threads(),
        "step_times_s": times,
    }
    if device.type == "cuda":
        rec["peak_cuda_mem_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print("RESULT " + json.dumps(rec), flush=True)


# ---------------------------------------------------------------------------------------------
# parent: rounds of one subprocess per implementation


def _child_path(impl: str, args: argparse.Namespace) -> list[str] | None:
    """sys.path entries for the child, or None when the implementation is unavailable."""
    paths = {
        "kanscale": str(REPO),
        "kanscale-eager": str(REPO),
        "mlp": str(REPO),
        "inkan": args.inkan_path,
        "inkan-eager": args.inkan_path,
        "efficient-kan": args.efficient_kan_path,
        "fast-kan": args.fast_kan_path,
        "pykan": args.pykan_path,
    }
    if impl in ("inkan", "inkan-eager") and not args.inkan_path:
        return []  # installed in this interpreter, if at all
    p = paths[impl]
    if p is None:
        return None
    return [str(Path(q).resolve()) for q in p.split(os.pathsep)]


def run_child(impl: str, workload: str, args: argparse.Namespace) -> dict | str:
    path = _child_path(impl, args)
    if path is None:
        return "no path given"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(path)
    cmd = [
        sys.executable, __file__, "--child", impl, "--workload", workload, "--device", args.device,
        "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
    ]
    if args.batch:
        cmd += ["--batch", str(args.batch)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, cwd=str(REPO / "benchmarks"))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()
    return tail[-1] if tail else f"exit {proc.returncode}"


def parent(args: argparse.Namespace) -> None:
    workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    impls = args.impls.split(",")
    for impl in impls:
        if impl not in IMPLS:
            raise SystemExit(f"--impls: {impl!r} is not one of {IMPLS}")
    all_records = []
    for workload in workloads:
        records: dict[str, list[dict]] = {i: [] for i in impls}
        errors: dict[str, str] = {}
        for r in range(args.rounds):
            for impl in impls:
                if impl in errors:
                    continue
                rec = run_child(impl, workload, args)
                if isinstance(rec, str):
                    errors[impl] = rec
                    continue
                rec["round"] = r
                records[impl].append(rec)
                all_records.append(rec)
                print(f"# {workload} round {r} {impl}: {rec['samples_per_s']:,.0f} samples/s", file=sys.stderr, flush=True)
        widths, grid_size, spline_order, batch = WORKLOADS[workload]
        batch = args.batch or batch
        print(f"\n{workload}: widths {widths}, grid {grid_size}, order {spline_order}, batch {batch}, "
              f"device {args.device}, {args.rounds} rounds x {args.steps} steps, "
              f"load average {os.getloadavg()[0]:.1f} at the end")
        print("| impl | samples/s, best round | samples/s, median round | kanscale / impl, best vs best "
              "| kanscale / impl, median per-round ratio | peak RSS above baseline (MB) | params |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        ref = records.get("kanscale", [])
        ref_best = max((r["samples_per_s"] for r in ref), default=None)
        for impl in impls:
            if impl in errors and not records[impl]:
                print(f"| {impl} | skipped: {errors[impl][:80]} | | | | | |")
                continue
            recs = records[impl]
            best = max(r["samples_per_s"] for r in recs)
            med = statistics.median(r["samples_per_s"] for r in recs)
            rss = statistics.median(r["peak_rss_above_baseline_mb"] for r in recs)
            ratio_best = f"{ref_best / best:.2f}x" if ref_best else ""
            ratio_med = ""
            if ref:
                by_round = {r["round"]: r["samples_per_s"] for r in ref}
                ratios = [by_round[r["round"]] / r["samples_per_s"] for r in recs if r["round"] in by_round]
                ratio_med = f"{statistics.median(ratios):.2f}x" if ratios else ""
            print(f"| {impl} | {best:,.0f} | {med:,.0f} | {ratio_best} | {ratio_med} | {rss:,.0f} | {recs[0]['num_params']:,} |")
    if args.json:
        Path(args.json).write_text(json.dumps(all_records, indent=1))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="all", choices=[*WORKLOADS, "all"])
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {IMPLS}")
    p.add_argument("--batch", type=int, default=0, help="override the workload's batch size")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--steps", type=int, default=30, help="timed steps per process")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (torch.compile peers compile here)")
    p.add_argument("--rounds", type=int, default=3, help="processes per implementation, interleaved")
    p.add_argument("--timeout", type=float, default=900, help="seconds per child process")
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: torch's default)")
    p.add_argument("--efficient-kan-path", help="dir holding the efficient_kan package (e.g. <checkout>/src)")
    p.add_argument("--fast-kan-path", help="dir holding the fastkan package (the checkout root)")
    p.add_argument("--inkan-path", help="dir holding inkan (pip --target dir); default: this interpreter's")
    p.add_argument("--pykan-path", help=f"'{os.pathsep}'-separated dirs holding pykan's kan package and its deps")
    p.add_argument("--json", help="also write every per-process record to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        args.impl = args.child
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
