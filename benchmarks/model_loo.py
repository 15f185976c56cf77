"""The performance model's leave-one-world-size-out errors on a study's records, three ways:
  unshared     the all-reduce not time-shared, no co-run slowdown (the model before 2026-12-02);
  time-shared  sweep times, exposed comm and predictions carry the ranks' oversubscription s
               (scaling.model.fit COMM_SHARES_CORES; 4 ranks on 2 cores: s = 2);
  co-run       and compute carries the co-run slowdown c(k) the sweep measured (scaling.model.fit USE_CORUN,
               kan/probes/corun.py; records from before 2026-12-03 have none: then the same as time-shared).
The sweep's rows get their host facts from the same points' rows of measurements.csv (files from
before allreduce.csv carried them):

    .venv/bin/python benchmarks/model_loo.py results/local

Prints, per model and placement class, the MAPE and the error per held-out world size of each.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

import scaling.model.fit as perfmodel
from scaling.common.columns import clean, clean_allreduce

HOST = ["device_type", "num_hosts", "threads_per_rank", "host_cpus"]
VARIANTS = (("unshared", False, False), ("time-shared", True, False), ("co-run", True, True))


def main(folder: Path) -> None:
    m = pd.read_csv(folder / "measurements.csv")
    ar = pd.read_csv(folder / "allreduce.csv")
    facts = m.drop_duplicates("point_id").set_index("point_id")[HOST]
    sweep = clean_allreduce(ar.drop(columns=[c for c in HOST if c in ar]).join(facts, on="point_id"))
    train = perfmodel.training_rows(clean(m))
    for model in sorted(train["model"].unique()):
        for cls in sorted(set(train.loc[train["model"] == model, "placement_class"])):
            for name, shared, corun in VARIANTS:
                perfmodel.COMM_SHARES_CORES, perfmodel.USE_CORUN = shared, corun
                v = perfmodel.validate(train, sweep, model, cls)
                per = ", ".join(f"p={e['world_size']}: {e['error_pct']:+.1f}%" for e in v["per_world_size"]
                                if "error_pct" in e)
                mape = v.get("loo_mape_pct")
                print(f"{model} | {cls} | {name} | {'-' if mape is None else f'{mape:.1f}%'} | {per or v.get('reason')}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/local"))
