"""A quick study against the full one it stands in for: what each spent and what each decided.

    make demo CONFIG=config/local.yaml && make demo CONFIG=config/local-quick.yaml
    .venv/bin/python benchmarks/quick_vs_full.py results/local results/local_quick

Spent: world size x each job's wall time (the rank-seconds a cluster would charge, start-up
included), summed over every run that has a wall time. Verdicts: each guideline's status in both;
"same" where they agree, else both. Both folders are read as they are: run both in one session on
one machine, so that their costs compare.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def spent(folder: Path) -> tuple[int, float]:
    m = pd.read_csv(folder / "measurements.csv")
    ran = m[pd.to_numeric(m["job_wall_s"], errors="coerce").notna()]
    return len(ran), float((ran["world_size"] * ran["job_wall_s"]).sum())


def verdicts(folder: Path) -> dict[str, str]:
    return {g["id"]: g["status"] for g in json.loads((folder / "guidelines.json").read_text())["guidelines"]}


def main(full: Path, quick: Path) -> None:
    (n_full, s_full), (n_quick, s_quick) = spent(full), spent(quick)
    print(f"spent: full {s_full:.1f} rank-s over {n_full} runs; quick {s_quick:.1f} rank-s over {n_quick} runs; "
          f"quick / full = {s_quick / s_full:.0%}")
    vf, vq = verdicts(full), verdicts(quick)
    decided = [g for g, s in vf.items() if s == "advice"]
    same = [g for g in decided if vq.get(g) == "advice"]
    print(f"guidelines the full study decides: {len(decided)}; the quick one decides the same: {len(same)}")
    for g in sorted(set(vf) | set(vq)):
        a, b = vf.get(g, "–"), vq.get(g, "–")
        print(f"  {g[:60]:60s} {'same: ' + a if a == b else f'full {a}, quick {b}'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
