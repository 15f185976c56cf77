"""Table maths on hand-built measurements (no Snakemake, no timing thresholds)."""

import math

import pytest
from scaling.stats import summarize, t975
from scaling.tables import amdahl_fit, compute_tables, gustafson_fit, karp_flatt
from scaling_data import frame, row, study


def at(t, **kw):
    sel = t
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, f"expected one row for {kw}, got {len(sel)}"
    return sel.iloc[0]


def test_ci_known_case():
    # values 1, 2, 3: mean 2, s = 1, t_{0.975, 2} = 4.303 -> half-width 4.303 / sqrt(3) = 2.4843
    s = summarize([1.0, 2.0, 3.0])
    assert s["n"] == 3 and s["mean"] == 2.0 and s["median"] == 2.0 and s["std"] == pytest.approx(1.0)
    assert s["ci_lo"] == pytest.approx(2 - 4.303 / math.sqrt(3), abs=1e-9)
    assert s["ci_hi"] == pytest.approx(2 + 4.303 / math.sqrt(3), abs=1e-9)


def test_ci_single_and_empty():
    one = summarize([5.0])
    assert one["mean"] == 5.0 and math.isnan(one["std"]) and math.isnan(one["ci_lo"])
    assert summarize([])["n"] == 0 and math.isnan(summarize([float("nan")])["mean"])


def test_t_table():
    assert t975(1) == 12.706 and t975(22) == 2.086 and t975(1000) == 1.96
    with pytest.raises(ValueError):
        t975(0)


def test_strong_speedup_efficiency_karp_flatt():
    t = compute_tables(study())["strong"]
    base = at(t, world_size=1)
    assert base["speedup"] == pytest.approx(1.0) and base["efficiency"] == pytest.approx(1.0)
    assert math.isnan(base["karp_flatt"])
    for p, tput in ((2, 1800.0), (4, 2400.0)):
        r = at(t, world_size=p)
        assert r["samples_per_s_mean"] == pytest.approx(tput)
        assert r["speedup"] == pytest.approx(tput / 1000)
        assert r["efficiency"] == pytest.approx(r["speedup"] / p)
        assert r["baseline_world_size"] == 1
    # Karp-Flatt at p = 4, S = 2.4: (1/2.4 - 1/4) / (1 - 1/4) = 0.2222...
    assert at(t, world_size=4)["karp_flatt"] == pytest.approx((1 / 2.4 - 0.25) / 0.75)
    assert karp_flatt(2.0, 2) == pytest.approx(0.0)  # linear speedup: no serial fraction
    assert karp_flatt(1.0, 4) == pytest.approx(1.0)  # no speedup at all: fully serial


def test_strong_ci_from_repeats():
    t = compute_tables(study())["strong"]
    r = at(t, world_size=2)  # repeats 1790, 1810: s = 14.142, half = 12.706 * 14.142 / sqrt 2 = 127.06
    assert r["samples_per_s_ci_hi"] - r["samples_per_s_mean"] == pytest.approx(127.06, abs=0.01)
    assert r["speedup_ci_hi"] == pytest.approx(r["samples_per_s_ci_hi"] / 1000)


def test_failed_and_missing_reported_not_used():
    tables = compute_tables(study())
    r = at(tables["strong"], world_size=4)
    assert (r["n_planned"], r["n_ok"], r["n_failed"], r["n_missing"]) == (3, 2, 1, 0)
    assert r["samples_per_s_mean"] == pytest.approx(2400.0)  # the failed repeat is not averaged in
    assert "rank 1 exited" in r["not_ok"]
    w = at(tables["weak"], world_size=2)
    assert (w["n_ok"], w["n_missing"]) == (2, 1) and "missing" in w["not_ok"]
    pts = tables["points"]
    assert len(pts) == len(study()) and set(pts["status"]) == {"ok", "failed", "missing"}
    assert (pts.loc[pts["status"] == "missing", "reason"] == "no record").all()


def test_baseline_is_smallest_measured_world_size():
    # the 1-rank point failed: the baseline becomes 2 ranks and efficiency is relative to it
    df = frame([row("strong", 1, 1, status="failed", reason="oom"), row("strong", 1, 2, samples_per_s=2000.0),
                row("strong", 1, 4, samples_per_s=3000.0)])
    t = compute_tables(df)["strong"]
    assert at(t, world_size=2)["speedup"] == pytest.approx(1.0)
    r4 = at(t, world_size=4)
    assert r4["baseline_world_size"] == 2 and r4["efficiency"] == pytest.approx(1.5 / 2)
    assert math.isnan(at(t, world_size=1)["speedup"]) and at(t, world_size=1)["n_failed"] == 1


def test_weak_efficiency():
    t = compute_tables(study())["weak"]
    assert at(t, world_size=1)["weak_efficiency"] == pytest.approx(1.0)
    # per rank: 1700 / 2 = 850 vs 900
    assert at(t, world_size=2)["weak_efficiency"] == pytest.approx(850 / 900)
    assert at(t, world_size=2)["scaled_speedup"] == pytest.approx(1700 / 900)


def test_inter_vs_intra_loss():
    t = compute_tables(study())["comm"]
    inter = at(t, world_size=2, nodes=2)
    assert inter["placement"] == "inter"
    assert inter["inter_vs_intra_loss_pct"] == pytest.approx(100 * (1700 - 1360) / 1700)
    assert inter["exposed_comm_pct_median"] == pytest.approx(25.0)
    assert math.isnan(at(t, world_size=2, nodes=1)["inter_vs_intra_loss_pct"])


def test_model_size_params_per_gb():
    t = compute_tables(study())["model_size"]
    r = at(t, hidden_width=128)
    assert r["num_params"] == 10790 and r["params_per_gb"] == pytest.approx(10790 / 0.26)
    assert r["model_state_bytes_median"] == pytest.approx(16 * 10790)  # 4 B weights + 4 grads + 8 Adam


def test_all_missing_never_crashes():
    df = frame([row(e, 1, 1, status="missing") for e in ("strong", "weak", "comm", "model_size")])
    tables = compute_tables(df)
    for name in ("strong", "weak", "comm", "model_size"):
        assert len(tables[name]) == 1 and tables[name]["n_ok"].iloc[0] == 0
    assert tables["fits"] == {}


def test_fits():
    # exact Amdahl with f = 0.1: S(p) = 1 / (0.1 + 0.9 / p)
    ps = [2, 4, 8]
    assert amdahl_fit(ps, [1 / (0.1 + 0.9 / p) for p in ps]) == pytest.approx(0.1)
    assert gustafson_fit(ps, [p - 0.2 * (p - 1) for p in ps]) == pytest.approx(0.2)
    assert math.isnan(amdahl_fit([1], [1.0]))
