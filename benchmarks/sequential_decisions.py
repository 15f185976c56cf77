"""Adaptive repeats against fixed repeats, on simulated studies with a known truth (no training):
how often each design decides a guideline, how often wrongly, and how many repeats it spends.
The designs use the workflow's own interval, decision, sizing and cap (scaling/decide/sequential.simulate).

    .venv/bin/python benchmarks/sequential_decisions.py [--studies 4000]

Truths are given in units of one repeat's standard deviation from the threshold (sd = cv x threshold
for a mean; for an efficiency, a ratio of two configurations, each with relative sd cv).
"""

from __future__ import annotations

import argparse

from plan import load_schema
from kan.contract.repeats import RepeatPlan
from scaling.decide.sequential import simulate

# the designs' overall false-decision rate: the config's own default (report.alpha)
REPORT = load_schema()["properties"]["report"]["properties"]
ALPHA = REPORT["alpha"]["default"]
MIN_REPEATS = REPORT["min_repeats"]["default"]  # ok repeats before a guideline may decide


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", type=int, default=4000)
    ap.add_argument("--cv", type=float, default=0.1)
    a = ap.parse_args()
    adaptive = RepeatPlan(min=3, max=12, looks=3, alpha=ALPHA)
    designs = [("adaptive 3..12, 3 looks, 98.3% intervals", adaptive, None),
               ("same looks, 95% at every look (unadjusted)", adaptive, 0.95),
               ("fixed 12 repeats, 95%", RepeatPlan(min=12, max=12, alpha=ALPHA), None),
               ("fixed 3 repeats, 95%", RepeatPlan(min=3, max=3, alpha=ALPHA), None)]
    for kind, threshold in (("mean", 20.0), ("ratio", 0.75)):
        print(f"\n{kind}: threshold {threshold}, cv {a.cv}, {a.studies} studies per cell")
        print(f"{'truth (sd from threshold)':>26} | {'design':44} | decided | false | mean repeats")
        for sds in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0):
            sd = a.cv * threshold * (2 ** 0.5 if kind == "ratio" else 1)
            truth = threshold + sds * sd
            for name, plan, level in designs:
                r = simulate(plan, truth, threshold, a.studies, kind, cv=a.cv, seed=11, level=level, min_repeats=MIN_REPEATS)
                print(f"{sds:>26.1f} | {name:44} | {r['decided_rate']:7.1%} | {r['false_decision_rate']:5.1%} | "
                      f"{r['mean_repeats']:12.2f}")


if __name__ == "__main__":
    main()
