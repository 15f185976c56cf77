"""The performance model's leave-one-world-size-out errors on a study's records, with the all-reduce
taken as unshared (perfmodel.COMM_SHARES_CORES off: only the compute term time-shares the cores, the
model before 2026-12-02) and as time-shared (on: sweep times, exposed comm and predictions carry the
ranks' oversubscription, e.g. 4 ranks on 2 cores at s = 2). The sweep's rows get their host facts
from the same points' rows of measurements.csv (files from before allreduce.csv carried them):

    .venv/bin/python benchmarks/model_loo.py results/local

Prints, per model and placement class, the MAPE and the error per held-out world size of both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

import scaling.perfmodel as perfmodel  # noqa: E402
from scaling.columns import clean, clean_allreduce  # noqa: E402

HOST = ["device_type", "num_hosts", "threads_per_rank", "host_cpus"]


def main(folder: Path) -> None:
    m = pd.read_csv(folder / "measurements.csv")
    ar = pd.read_csv(folder / "allreduce.csv")
    facts = m.drop_duplicates("point_id").set_index("point_id")[HOST]
    sweep = clean_allreduce(ar.drop(columns=[c for c in HOST if c in ar]).join(facts, on="point_id"))
    train = perfmodel.training_rows(clean(m))
    for model in sorted(train["model"].unique()):
        for cls in sorted(set(train.loc[train["model"] == model, "placement_class"])):
            for name, on in (("unshared", False), ("time-shared", True)):
                perfmodel.COMM_SHARES_CORES = on
                v = perfmodel.validate(train, sweep, model, cls)
                per = ", ".join(f"p={e['world_size']}: {e['error_pct']:+.1f}%" for e in v["per_world_size"]
                                if "error_pct" in e)
                mape = v.get("loo_mape_pct")
                print(f"{model} | {cls} | {name} | {'-' if mape is None else f'{mape:.1f}%'} | {per or v.get('reason')}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/local"))
