"""The tiny study's placements on this machine's device through the point launcher (the same launch
path and record as the workflow's, without Snakemake, which the device machine lacks):

    python benchmarks/device_points.py --device cuda --out results/device-check/points

1x1 (NCCL at world size 1), 1x2 (two ranks on the one GPU: NCCL refuses two ranks on one device,
and the record then names that) and a 1x2 all-reduce sweep. Prints one line per point: status,
backend, throughput, exposed comm, or the reason it failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kan.contract import record as records
from kan.contract.point import AllreduceConfig, LaunchSettings, ModelConfig, Placement, Point, TrainConfig


def points(device: str) -> list[Point]:
    model = ModelConfig(widths=(2, 64, 1), grid_size=10)
    train = TrainConfig(samples=16384, epochs=2, batch_per_rank=512, warmup_steps=5)
    out = [Point(study="device", experiment="strong", model=model, train=train,
                 placement=Placement(device=device, gpus_per_node=g)) for g in (1, 2)]
    out.append(Point(study="device", experiment="allreduce", placement=Placement(device=device, gpus_per_node=2),
                     allreduce=AllreduceConfig(sizes_bytes=(4096, 1048576, 67108864), iters=20)))
    return out


def launch(p: Point, folder: Path) -> dict | str:
    """Run one point through the workflow's launcher; its record, or why there is none."""
    d = p.to_json()
    d.pop("limits")
    out = folder / f"{p.id}.json"
    settings = LaunchSettings(runtime_min=5, pg_timeout_s=60)
    subprocess.run([sys.executable, str(ROOT / "workflow" / "scripts" / "launch_point.py"), "--point",
                    json.dumps(d), "--launch", json.dumps(settings.to_json()), "--out", str(out)],
                   cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    try:
        return records.read(out, p.id)
    except records.InvalidRecord as e:
        return f"no record ({e})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--out", default="results/device-check/points")
    a = ap.parse_args()
    folder = Path(a.out) / "results" / "device" / "points"
    for p in points(a.device):
        rec = launch(p, folder)
        if isinstance(rec, str):
            print(f"{p.id}: {rec}")
            continue
        if rec["status"] != "ok":
            print(f"{p.id}: {rec['status']}: {rec['reason']}")
        elif "allreduce" in rec:
            big = rec["allreduce"]["sizes"][-1]
            print(f"{p.id}: ok, {rec['backend']}, all_reduce {big['size_bytes'] / 2**20:.0f} MiB "
                  f"{big['time_s'] * 1e3:.3f} ms, busbw {big['busbw_gbps']:.1f} GB/s")
        else:
            pct = rec["comm"]["exposed_pct"]
            exposed = "n/a" if pct is None else f"{pct:.1f}%"
            print(f"{p.id}: ok, {rec['backend']} on {rec['ranks'][0]['device_name']}, "
                  f"{rec['throughput']['samples_per_s']:,.0f} samples/s, exposed comm {exposed}")


if __name__ == "__main__":
    main()
