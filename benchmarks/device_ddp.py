"""DDP's own settings on this machine's device through the point launcher (the workflow's launch path
and record, without Snakemake, which the device machine lacks):

    python benchmarks/device_ddp.py --device cuda --out results/device-check/ddp [--quick]

The hooks none / fp16 / bf16 / PowerSGD (rank 2), and on CUDA NCCL's Ring and Tree algorithms with
no hook. World size 2 where the device allows it (CPU + gloo: two processes; CUDA: two GPUs), else
1 on the one GPU (NCCL refuses two ranks on one device): then the hooks and NCCL_ALGO are checked to
run under NCCL, not measured as a comparison. Prints one line per setting: status, world size,
backend, step time, bytes per synced step, final loss, or the reason it could not run (bf16 on gloo).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from device_points import launch

from kan.contract.point import ModelConfig, Placement, Point, TrainConfig


def settings(device: str, quick: bool) -> list[dict]:
    hooks = [{"comm_hook": h} for h in (["none", "fp16", "bf16"] if quick else ["none", "fp16", "bf16", "powersgd"])]
    if device == "cuda":
        hooks += [{"nccl_algo": a} for a in ("Ring", "Tree")]
    return hooks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--out", default="results/device-check/ddp")
    ap.add_argument("--quick", action="store_true", help="fewer settings and steps (the CPU test of device_check.sh)")
    a = ap.parse_args()
    ranks = 2
    if a.device == "cuda":
        import torch

        ranks = 2 if torch.cuda.device_count() >= 2 else 1
        if ranks == 1:
            print("one GPU: each setting at world size 1 (NCCL refuses two ranks on one device); this checks that "
                  "it runs under NCCL, it does not compare settings")
    folder = Path(a.out)
    model = ModelConfig(widths=(8, 64, 1) if a.quick else (64, 256, 256, 1), grid_size=5)
    for s in settings(a.device, a.quick):
        train = TrainConfig(samples=4096 if a.quick else 65536, epochs=1, batch_per_rank=64 if a.quick else 512,
                            warmup_steps=2, max_steps=12 if a.quick else 0, powersgd_rank=2, **s)
        p = Point(study="device", experiment="ddp", model=model, train=train,
                  placement=Placement(device=a.device, gpus_per_node=ranks))
        label = train.ddp_label
        rec = launch(p, folder)
        if isinstance(rec, str):
            print(f"ddp {label}: {rec}")
            continue
        if rec["status"] != "ok":
            print(f"ddp {label}: {rec['status']}: {rec['reason']}")
            continue
        comm = rec["comm"]
        nbytes = comm.get("bytes_per_step")
        print(f"ddp {label}: ok, world {rec['world_size']}, {rec['backend']}, step "
              f"{rec['timing']['step_time_s'] * 1e3:.2f} ms, "
              f"{'–' if nbytes is None else f'{nbytes / 1024:,.1f} KiB'} per synced step, "
              f"final loss {rec['loss']['final_train']:.4g}"
              + (f", NCCL_ALGO={comm['nccl_algo']}" if comm.get("nccl_algo") else ""))


if __name__ == "__main__":
    main()
