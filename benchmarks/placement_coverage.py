"""Coverage of the placement model's 95% intervals on synthetic laws of known form
(scaling/model/placement.py), where the truth is known exactly: each trial draws a law, measures it
at nodes 1-4 x GPUs a node 1, 2, 4 with multiplicative noise, fits on some placements and predicts
the rest. Laws:
    ring        compute + d + a 2 (G - 1) / G + c 2 (N - 1) / N           (hierarchical, in the family)
    latency     compute + d + a (G - 1) + c (N - 1) + e 2 (N - 1) / N      (in the family, 2 inter terms)
    sqrt        compute + d + a 2 (G - 1) / G + c sqrt(N - 1)              (outside the family)
    contention  compute + d + c 2 (N - 1) / N min(G, 2)                    (NIC saturates at 2 GPUs: outside)
Per law and scheme: the share of held-out steps inside their interval (or refused), the mean |error|
and the median hi/lo of the intervals.

    .venv/bin/python benchmarks/placement_coverage.py [trials] [noise]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

from scaling.model.placement import (Measured, Rows, fit_forms, forward_error, plausible, predict,  # noqa: E402
                                     prefer_for, refusal)

GRID = [(n, g) for n in (1, 2, 3, 4) for g in (1, 2, 4)]


def law(kind: str, rng: np.random.Generator):
    C, d = 0.1, rng.uniform(0.0, 0.03)
    a, c, e = rng.uniform(0.0, 0.05), rng.uniform(0.01, 0.1), rng.uniform(0.0, 0.05)

    def step(n, g):
        if kind == "ring":
            x = a * 2 * (g - 1) / g + c * 2 * (n - 1) / n
        elif kind == "latency":
            x = a * (g - 1) * 0.3 + c * (n - 1) * 0.5 + e * 2 * (n - 1) / n
        elif kind == "sqrt":
            x = a * 2 * (g - 1) / g + c * math.sqrt(n - 1)
        else:
            x = c * 2 * (n - 1) / n * min(g, 2)
        return C + d + x
    return C, step


def trial(kind: str, fit_nodes: int, noise: float, rng: np.random.Generator) -> list[tuple[bool, float | None, float]]:
    C, step = law(kind, rng)
    meas = {(n, g): step(n, g) * (1 + noise * rng.standard_normal()) for n, g in GRID if n * g > 1}
    c1 = C * (1 + noise * rng.standard_normal())  # the one-GPU run without DDP: the compute
    fit = [(n, g) for n, g in meas if n <= fit_nodes]
    arr = lambda i: np.array([p[i] for p in fit], float)  # noqa: E731
    rows = Rows(arr(0), arr(1), np.ones(len(fit)), np.array([meas[p] for p in fit]), np.full(len(fit), c1),
                np.ones(len(fit)))
    forms, validated = plausible(fit_forms(rows), len(rows.places()))
    m = Measured(fit_nodes, 4, fit_nodes * 4, (1.0, 1.0), True, True)
    out = []
    for (n, g), truth in meas.items():
        if n <= fit_nodes:
            continue
        if refusal(m, n, g):
            out.append((True, None, 0.0))
            continue
        past = {"nodes": forward_error(rows, forms, "nodes", n)} if n > fit_nodes else {}
        p = predict(forms, validated, rows, n, g, 1.0, c1, past, prefer_for(rows, forms, past))
        inside = p.interval is not None and p.interval[0] <= truth <= p.interval[1]
        ratio = p.interval[1] / p.interval[0] if p.interval else math.nan
        out.append((inside, abs(p.step_s / truth - 1) * 100, ratio))
    return out


def main(trials: int, noise: float) -> None:
    rng = np.random.default_rng(7)
    print(f"{trials} trials a law, noise {100 * noise:.0f}% (sd of each step)")
    print(f"{'law':11s} {'scheme':18s} {'coverage':>8s} {'mean |err|':>10s} {'hi/lo':>6s}")
    for kind in ("ring", "latency", "sqrt", "contention"):
        for fit_nodes, scheme in ((3, "<=3 nodes -> 4"), (2, "<=2 nodes -> 3,4")):
            res = [r for _ in range(trials) for r in trial(kind, fit_nodes, noise, rng)]
            cov = 100 * np.mean([r[0] for r in res])
            err = np.nanmean([r[1] for r in res if r[1] is not None])
            ratio = np.nanmedian([r[2] for r in res if r[1] is not None])
            print(f"{kind:11s} {scheme:18s} {cov:7.0f}% {err:9.1f}% {ratio:6.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40, float(sys.argv[2]) if len(sys.argv) > 2 else 0.03)
