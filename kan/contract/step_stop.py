"""When a step-time point stops (training.step_tolerance_pct): once the 95% interval of its mean
step is within +- the tolerance of the mean; else at its cap (max_steps) or the end of its work.

Steps are not independent: a slow patch (another process on the host, the allocator, a garbage
collection) slows neighbouring steps together, so an interval over single steps would be too
narrow. The interval is taken over BATCHES contiguous batch means of the timed steps (the method of
batch means), with Student's t at BATCHES - 1 degrees of freedom:

    half-width % = 100 x T_975 x sd(batch means) / sqrt(BATCHES) / mean,   T_975 = t(0.975, 9) = 2.262

and not before MIN_TIMED timed steps (5 a batch), since a handful of steps can agree by chance. The
record's step is the median; the rule holds the mean, which a tail of slow steps widens, so it is
the stricter of the two. Every rank computes its own; the largest decides for all (kan/loop.py),
so every rank stops at the same step. Torch-free: the planner and the tests use it as it is.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

BATCHES = 10
T_975 = 2.262  # Student's t, 97.5% quantile, BATCHES - 1 = 9 degrees of freedom
MIN_TIMED = 50


def interval_pct(times_s: Sequence[float]) -> float:
    """Half-width of the 95% interval of the mean step, in % of the mean, by batch means over the
    latest whole batches of `times_s` (inf with fewer than MIN_TIMED)."""
    n = len(times_s)
    if n < MIN_TIMED:
        return math.inf
    k = n // BATCHES
    recent = times_s[n - k * BATCHES:]  # the oldest leftover steps drop out: the latest are the point's pace
    means = [statistics.fmean(recent[i * k:(i + 1) * k]) for i in range(BATCHES)]
    mean = statistics.fmean(means)
    return 100.0 * T_975 * statistics.stdev(means) / math.sqrt(BATCHES) / mean if mean > 0 else math.inf


def reason(tolerance_met: bool, steps: int, cap: int) -> str:
    """Why a point's training ended, as its record says (timing.stop.reason): 'tolerance' (its mean
    step's interval came within the tolerance), 'cap' (max_steps ran out first) or 'work' (the whole
    work was trained)."""
    if tolerance_met:
        return "tolerance"
    return "cap" if cap and steps >= cap else "work"
