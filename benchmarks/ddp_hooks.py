"""DDP's communication hooks measured over loopback (1x2, one host) and over the emulated link (2x1,
100 Mbit/s; root): the comm-heavy KAN [64, 256, 256, 1] (3.3 MB of gradients), 3 repeats of every
setting, through the workflow (experiments.ddp). Prints the workflow's ddp.csv per setting: step
time, exposed communication, bytes a rank all-reduced per synced step, final training loss, and the
time to reach 1.5 x the `none` setting's final loss, each as mean [95% CI] and as a ratio to `none`;
then the DDP-settings guideline and the performance model's prediction per setting.

    sudo .venv/bin/python benchmarks/ddp_hooks.py [--workdir DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def study(name: str, topology: dict, emulate: bool, repeats: int) -> dict:
    return {"study": name, "device": "cpu", "cpu_threads_per_rank": 1, "repeats": repeats,
            "network": {"emulate": emulate, "rates_mbit": [100]},
            "model": {"widths": [64, 256, 256, 1], "grid_size": 5},
            "training": {"epochs": 1, "warmup_steps": 2, "lr": 0.003, "loss_every_steps": 4, "comm_probe_every": 4},
            "experiments": {"ddp": {"samples": 4096, "batch_per_rank": 64, "topology": topology,
                                    "comm_hook": ["none", "fp16", "bf16", "powersgd"], "powersgd_rank": 2},
                            # the sweep gives the model alpha and beta of the link (its per-setting predictions)
                            "allreduce": {"sizes_bytes": [65536, 1048576, 4194304], "iters": 5, "warmup": 2}},
            "resources": {"runtime_min": 10, "mem_mb_per_rank": 2000, "cpus_per_rank": 1},
            "timeouts": {"pg_s": 60}}


def table(work: Path, name: str) -> None:
    """The workflow's own ddp.csv (what the report shows): per setting mean [95% CI] and the ratio to none."""
    out = work / "results" / name
    t = pd.read_csv(out / "ddp.csv")

    def cell(r, c, scale=1.0, fmt="{:.3g}"):
        m, lo, hi = (r.get(f"{c}_{s}") for s in ("mean", "ci_lo", "ci_hi"))
        if pd.isna(m):
            return "–"
        return fmt.format(scale * m) + ("" if pd.isna(lo) else f" [{fmt.format(scale * lo)}, {fmt.format(scale * hi)}]")

    def ratio(r, c):
        if r["ddp_setting"] == "none":
            return "1"
        v, lo, hi = r.get(c), r.get(f"{c}_ci_lo"), r.get(f"{c}_ci_hi")
        return "–" if pd.isna(v) else f"{v:.2f}" + ("" if pd.isna(lo) else f" [{lo:.2f}, {hi:.2f}]")

    print(f"\n{name}: {t['placement_class'].iloc[0]}, target loss {t['target_loss'].dropna().iloc[0]:.4g} "
          f"(1.5 x none's final loss)")
    print("| setting | ok | step ms | / none | exposed comm % | KiB / synced step | final loss / none | "
          "time to target s | / none |")
    print("|---|---|---|---|---|---|---|---|---|")
    for _, r in t.iterrows():
        if r["n_ok"] == 0:
            print(f"| {r['ddp_setting']} | 0/{r['n_planned']} | {str(r['not_ok']).split(' (log:')[0]} |")
            continue
        print(f"| {r['ddp_setting']} | {r['n_ok']}/{r['n_planned']} | {cell(r, 'step_time_s', 1e3)} | "
              f"{ratio(r, 'step_ratio')} | {cell(r, 'exposed_comm_pct')} | {r['bytes_per_step_mean'] / 1024:,.1f} | "
              f"{ratio(r, 'final_loss_ratio')} | {cell(r, 'time_to_target_s')} | {ratio(r, 'ttt_ratio')} |")
    # what the workflow made of it: the guideline and the model's prediction per setting
    for g in json.loads((out / "guidelines.json").read_text())["guidelines"]:
        if g["topic"] == "ddp":
            print(f"\nguideline ({g['status']}): {g['text']}" + (f" Settle: {g['settle']}" if g.get("settle") else ""))
    model = json.loads((out / "model.json").read_text())
    for entries in (model.get("ddp_settings") or {}).values():
        for e in entries:
            pred = e.get("predicted_step_time_s")
            print(f"model {e['ddp_setting']}: bytes x{e['bytes_factor']:.3g}, measured {1e3 * e['measured_step_time_s']:.1f} "
                  f"ms, predicted " + (f"{1e3 * pred:.1f} ms ({e['error_pct']:+.0f}%)" if pred else f"- ({e.get('reason')})"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="kanscale-ddp-bench-"))
    for name in ("Snakefile", "workflow", "config", "profiles"):
        # this checkout's workflow every time (a kept --workdir keeps its records, not an old workflow)
        if (work / name).is_dir():
            shutil.rmtree(work / name)
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, work / name)
    runs = [("ddp_loopback", {"nodes": 1, "gpus_per_node": 2}, False),
            ("ddp_link100", {"nodes": 2, "gpus_per_node": 1}, True)]
    for name, topo, emulate in runs:
        (work / f"{name}.json").write_text(json.dumps(study(name, topo, emulate, a.repeats)))
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile",
                            f"{name}.json"], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit((r.stdout + r.stderr)[-4000:])
        print(f"{name}: study wall {time.monotonic() - t0:.0f} s")
        table(work, name)


if __name__ == "__main__":
    main()
