"""Why the performance model needs a per-step DDP cost for runs without a no_sync probe: on an
imported study (default results/seed_paper_import, from `make demo CONFIG=config/seed-paper-import.yaml`)
the largest world size is held out and predicted twice, for each link class measured at two or more
world sizes below it:
  with d      the model as shipped: compute + d + ring all-reduce (scaling.model.fit.fit_derived);
  ring only   compute + ring all-reduce fitted to the same costs (step - non-DDP compute), d left out:
              the unbounded least-squares alpha and beta, and the bounded (>= 0) fit's prediction.

    .venv/bin/python benchmarks/seed_model_terms.py [results/<study>]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

from scaling.common.columns import clean  # noqa: E402
from scaling.model.fit import derive_exposed, fit_all, predict_step, training_rows  # noqa: E402
from scaling.model.terms import bounded_linear, ring, ring_design  # noqa: E402


def main(folder: Path) -> None:
    df = clean(pd.read_csv(folder / "measurements.csv"))
    train = training_rows(df)
    top = int(train["world_size"].max())
    kept = train[train["world_size"] != top]
    fit = fit_all(kept, kept.iloc[0:0])
    costs = derive_exposed(kept, fit["compute"])
    for cls, comm in sorted(fit["comm"].items()):
        held = train[(train["world_size"] == top) & (train["placement_class"] == cls)]
        rows = costs[(costs["placement_class"] == cls) & (costs["world_size"] > 1) & costs["exposed_derived"]]
        if held.empty or not isinstance(comm, dict) or rows["world_size"].nunique() < 2:
            continue
        p, n, e = (rows[c].to_numpy(float) for c in ("world_size", "grads_bytes", "exposed_comm_s"))
        unbounded = np.linalg.lstsq(ring_design(p, n), e, rcond=None)[0]
        (alpha, beta), _ = bounded_linear(ring_design(p, n), e, relative=False)
        for r in held.itertuples():
            with_d = float(predict_step(fit, r.family, cls, top, r.batch_per_rank, r.num_params, r.grads_bytes)[0])
            compute = with_d - comm["ddp_fixed_s"] - float(ring(top, r.grads_bytes, comm["alpha_s"], comm["beta_s_per_byte"]))
            ring_only = compute + float(ring(top, r.grads_bytes, alpha, beta))
            m = r.step_time_s
            print(f"{r.model} {r.experiment} p={top} {cls}: measured {m * 1e3:.1f} ms; with d "
                  f"{with_d * 1e3:.1f} ms ({100 * (with_d / m - 1):+.1f}%, d = {comm['ddp_fixed_s'] * 1e3:.1f} ms); "
                  f"ring only {ring_only * 1e3:.1f} ms ({100 * (ring_only / m - 1):+.1f}%; unbounded alpha "
                  f"{unbounded[0] * 1e3:.2f} ms, beta {unbounded[1]:.3g} s/B; bounded beta {beta:.3g} s/B)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/seed_paper_import"))
