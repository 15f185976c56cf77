"""The emulated cluster measured back (root, Linux): runs config/emulated.yaml through the local
profile at the given rates and prints, from the study's own outputs,
  1. per link: configured rate, the TCP probe's rate, the all-reduce sweep's recovered rate (8/beta),
     its error, alpha and the probe's RTT (model.json link_check);
  2. exposed communication (% of a step, mean [95% CI] over repeats) of the comm-heavy
     [64, 256, 256, 1] and the compute-heavy [64, 16, 16, 1] KAN at 2x1 per rate (model_size table),
     and the 1x2 point on the same 2 cores (comm table);
  3. the cross-link predictions (model.json cross_link): MAPE per held-out rate.

    sudo .venv/bin/python benchmarks/emulated_link.py [--rates 50 100 400] [--workdir DIR]

It runs in a copy of the workflow (DIR, default a temp folder) so the checkout's results/ stay
untouched; a re-run with the same DIR reuses its records.
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
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[50.0, 100.0, 400.0])
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="kanscale-emulated-bench-"))
    for name in ("Snakefile", "workflow", "config", "profiles"):
        if not (work / name).exists():
            (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, work / name)
    # the rates as a second config file layered on the shipped one (--config would pass strings)
    (work / "rates.yaml").write_text(json.dumps({"network": {"emulate": True, "rates_mbit": a.rates}}))
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile",
                          "config/emulated.yaml", "rates.yaml"], cwd=work, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit((res.stdout + res.stderr)[-4000:])
    print(f"study wall {time.monotonic() - t0:.0f} s in {work}\n")
    out = work / "results" / "emulated"
    model = json.loads((out / "model.json").read_text())
    print("| configured Mbit/s | TCP probe Mbit/s | sweep 8/beta Mbit/s | error | pass (15%) | alpha us | RTT us |")
    print("|---|---|---|---|---|---|---|")
    for c in model["link_check"]:
        print(f"| {c['configured_rate_mbit']:g} | {c['probe_tcp_rate_mbit']:.1f} | {c['recovered_rate_mbit']:.1f} | "
              f"{c['error_pct']:+.1f}% | {c['pass']} | {c['alpha_us']:.0f} | {c['rtt_us']:.0f} |")
    m = pd.read_csv(out / "measurements.csv")
    m = m[(m["status"] == "ok") & (m["world_size"] == 2) & m["experiment"].isin(["comm", "model_size"])]
    print("\n| experiment | model | placement | exposed comm % [95% CI] | step ms (mean) | n ok |")
    print("|---|---|---|---|---|---|")
    for key, g in m.groupby(["experiment", "model", "nodes", "link_mbit"]):
        x = g["exposed_comm_pct"].to_numpy(float)
        half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / len(x) ** 0.5 if len(x) > 1 else float("nan")
        print(f"| {key[0]} | {key[1]} | {g['nodes'].iloc[0]}x{g['gpus_per_node'].iloc[0]} "
              f"{g['placement_class'].iloc[0]} | {x.mean():.1f} [{x.mean() - half:.1f}, {x.mean() + half:.1f}] | "
              f"{1e3 * g['step_time_s'].mean():.1f} | {len(x)} |")
    print("\n| held-out link | fitted at | MAPE | per configuration |")
    print("|---|---|---|---|")
    for e in model.get("cross_link", []):
        pts = "; ".join(f"{p['model']} {p['error_pct']:+.1f}%" for p in e["points"] if "error_pct" in p)
        mape = "–" if e.get("mape_pct") is None else f"{e['mape_pct']:.1f}%"
        print(f"| {e['held_out']} | {e['fitted_at']} | {mape} | {pts or e.get('reason', '')} |")


if __name__ == "__main__":
    main()
