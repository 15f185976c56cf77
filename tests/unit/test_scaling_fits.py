"""Bounded law fits on synthetic speedups from known parameters (no timing thresholds)."""

import numpy as np
import pytest
from scaling.common.columns import clean
from scaling.tables.fits import AMDAHL, GUSTAFSON, USL, fit_curve, fit_text, fits, not_enough
from scaling_data import frame, row


def usl_speedup(p, sigma, kappa):
    return p / (1 + sigma * (p - 1) + kappa * p * (p - 1))


def curve(law_fn, sizes=(1, 2, 4, 8, 16, 32), reps=4, noise=0.01, seed=3, base=1000.0):
    """{p: throughputs of `reps` repeats}: base * S(p) * (1 + noise * N(0, 1))."""
    rng = np.random.default_rng(seed)
    return {p: base * law_fn(p) * (1 + noise * rng.standard_normal(reps)) for p in sizes}


def test_usl_recovers_known_sigma_kappa():
    # sigma 0.05, kappa 0.002 (peak near p = sqrt(0.95 / 0.002) = 21.8), 1% noise on 4 repeats:
    # recovered within 0.01 (sigma) and 0.0005 (kappa), and the 95% CI covers the truth
    f = fit_curve(USL, curve(lambda p: usl_speedup(p, 0.05, 0.002)), num_boot=200)
    s, k = f["params"]["sigma"], f["params"]["kappa"]
    assert f["status"] == "fit" and f["num_residuals"] == 24
    assert s["value"] == pytest.approx(0.05, abs=0.01) and k["value"] == pytest.approx(0.002, abs=0.0005)
    assert s["ci_lo"] <= 0.05 <= s["ci_hi"] and k["ci_lo"] <= 0.002 <= k["ci_hi"]
    assert f["peak_world_size_rel"] == pytest.approx((0.95 / 0.002) ** 0.5, rel=0.15)


def test_amdahl_and_gustafson_recover_their_fractions():
    a = fit_curve(AMDAHL, curve(lambda p: 1 / (0.1 + 0.9 / p)), num_boot=100)
    assert a["params"]["f"]["value"] == pytest.approx(0.1, abs=0.01)
    g = fit_curve(GUSTAFSON, curve(lambda p: p - 0.2 * (p - 1)), num_boot=100)
    assert g["params"]["a"]["value"] == pytest.approx(0.2, abs=0.01)


def test_two_world_sizes_are_not_enough():
    f = fit_curve(USL, {1: np.array([1000.0, 1010.0]), 2: np.array([1800.0, 1790.0])}, num_boot=10)
    assert f["status"] == "not_enough_data"
    assert f["reason"] == "not enough world sizes to fit (have 2, need 3)" == not_enough(2)
    assert fit_text(f) == f["reason"] and "params" not in f


def test_parameters_at_their_bounds_are_reported_as_such():
    # linear speedup: no contention, no coherency -> both USL parameters at 0
    f = fit_curve(USL, curve(lambda p: float(p), noise=0.0), num_boot=10)
    assert f["params"]["sigma"]["at_bound"] == "σ at its lower bound 0"
    assert f["params"]["kappa"]["at_bound"] == "κ at its lower bound 0"
    assert fit_text(f) == "σ at its lower bound 0, κ at its lower bound 0"
    # super-linear speedup pushes Amdahl's f below 0: it stops at the bound, never prints f < 0
    sup = fit_curve(AMDAHL, curve(lambda p: 1.2 * p if p > 1 else 1.0, noise=0.0), num_boot=10)
    assert sup["params"]["f"]["value"] >= 0 and sup["params"]["f"]["at_bound"] == "f at its lower bound 0"
    # no speedup at all: f = 1, the upper bound
    flat = fit_curve(AMDAHL, curve(lambda p: 0.8 if p > 1 else 1.0, noise=0.0), num_boot=10)
    assert flat["params"]["f"]["at_bound"] == "f at its upper bound 1"


def test_bootstrap_is_seeded_and_needs_two_repeats():
    c = curve(lambda p: usl_speedup(p, 0.05, 0.002))
    assert fit_curve(USL, c, 50) == fit_curve(USL, c, 50)
    one = {p: v[:1] for p, v in c.items()}
    f = fit_curve(USL, one, 50)
    assert f["params"]["sigma"]["ci_lo"] is None and "one ok repeat" in f["ci_reason"]


def test_fits_from_measurements_leave_out_non_ddp_and_split_placements():
    rows = []
    for rep, j in ((0, -5.0), (1, 5.0)):
        rows += [row("strong", 1, 1, rep, 1000 + j), row("strong", 1, 1, rep, 3000 + j, ddp=False),
                 row("strong", 1, 2, rep, 1900 + j), row("strong", 1, 4, rep, 3400 + j),
                 row("strong", 2, 1, rep, 1500 + j, num_hosts=1)]
    out = fits(clean(frame(rows)), num_boot=20)
    by_cls = out["strong"]["kan-bspline [2,64,1]"]
    # the non-DDP point (3000 samples/s) is no world size of its own and not the baseline
    assert by_cls["intra-node"]["usl"]["world_sizes"] == [1, 2, 4]
    assert by_cls["intra-node"]["usl"]["status"] == "fit"
    sim = by_cls["simulated inter-node (one host)"]["usl"]
    assert sim["world_sizes"] == [1, 2] and sim["reason"] == not_enough(2)
    assert out["weak"] == {}
