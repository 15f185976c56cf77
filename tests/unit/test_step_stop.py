"""kan/contract/step_stop.py: when a step-time point's mean step is known within its tolerance."""

import math
import random

from kan.contract import step_stop


def test_too_few_timed_steps_never_stop():
    assert step_stop.interval_pct([1.0] * (step_stop.MIN_TIMED - 1)) == math.inf


def test_equal_steps_have_no_spread_and_a_noisy_pace_a_wider_interval():
    assert step_stop.interval_pct([0.002] * step_stop.MIN_TIMED) == 0.0
    rng = random.Random(0)
    calm = [0.010 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(200)]
    rough = [0.010 * (1 + 0.50 * rng.gauss(0, 1)) for _ in range(200)]
    # independent steps: the batch means' interval is about t x sd / sqrt(n) of the steps' own
    assert 0.05 < step_stop.interval_pct(calm) < 1.0
    assert step_stop.interval_pct(rough) > 5 * step_stop.interval_pct(calm)


def test_a_slow_patch_counts_more_than_scattered_slow_steps():
    """Correlated steps (a patch of slow ones together) widen the interval over batch means more than
    the same slow steps scattered: the steps are not taken as independent."""
    n = 200
    patch = [0.01] * n
    for i in range(80, 100):
        patch[i] = 0.03
    scattered = [0.03 if i % 10 == 0 else 0.01 for i in range(n)]
    assert step_stop.interval_pct(patch) > 3 * step_stop.interval_pct(scattered)


def test_the_latest_whole_batches_decide():
    # 9 leftover steps (209 = 10 x 20 + 9): the first, slow ones drop out
    times = [1.0] * 9 + [0.01] * 200
    assert step_stop.interval_pct(times) == 0.0


def test_the_reason_says_which_limit_ended_training():
    assert step_stop.reason(True, 120, 0) == "tolerance"
    assert step_stop.reason(False, 80, 80) == "cap"
    assert step_stop.reason(False, 16, 0) == "work"
    assert step_stop.reason(False, 16, 100) == "work"  # the work ended before the cap
