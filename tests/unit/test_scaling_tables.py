"""Table maths on hand-built measurements (no Snakemake, no timing thresholds)."""

import math

import pytest
from scaling.common.columns import clean
from scaling.common.stats import linear_fit, ratio_ci, summarize, t975
from scaling.tables.all_tables import compute_tables
from scaling.tables.experiments import karp_flatt, karp_flatt_note
from scaling_data import allreduce_sweep, frame, row, settings, study

FAST = settings(bootstrap_samples=20)  # few resamples: these tests check tables, not CIs of fits


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


def ddp(t):
    return t[t["ddp"].astype(bool)]


def test_strong_speedup_efficiency_karp_flatt():
    t = ddp(compute_tables(study(), FAST)["strong"])
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


def test_karp_flatt_outside_its_domain_says_what_it_means():
    assert karp_flatt(5.0, 4) < 0 and "super-linear" in karp_flatt_note(karp_flatt(5.0, 4))
    assert karp_flatt(0.5, 4) > 1 and "retrograde" in karp_flatt_note(karp_flatt(0.5, 4))
    assert "not a serial fraction" in karp_flatt_note(-0.1) and karp_flatt_note(0.3) == ""
    df = frame([row("strong", 1, 1, samples_per_s=1000.0), row("strong", 1, 2, samples_per_s=2500.0),
                row("strong", 1, 4, samples_per_s=800.0)])
    t = compute_tables(df, FAST)["strong"]
    assert "super-linear" in at(t, world_size=2)["karp_flatt_note"]
    assert "retrograde" in at(t, world_size=4)["karp_flatt_note"]


def test_strong_ci_from_repeats():
    t = ddp(compute_tables(study(), FAST)["strong"])
    r = at(t, world_size=2)  # repeats 1790, 1810: s = 14.142, half = 12.706 * 14.142 / sqrt 2 = 127.06
    assert r["samples_per_s_ci_hi"] - r["samples_per_s_mean"] == pytest.approx(127.06, abs=0.01)
    # speedup 1800 / 1000 with both spreads (delta method on the log scale, t with 1 df):
    # rel var = 14.142^2 / (2 * 1800^2) + 14.142^2 / (2 * 1000^2); CI = 1.8 e^(+-12.706 sqrt(rel var))
    rel = (14.1421356 ** 2 / (2 * 1800 ** 2) + 14.1421356 ** 2 / (2 * 1000 ** 2)) ** 0.5
    assert r["speedup_ci_hi"] == pytest.approx(1.8 * math.exp(12.706 * rel), rel=1e-6)
    assert r["speedup_ci_lo"] == pytest.approx(1.8 * math.exp(-12.706 * rel), rel=1e-6)
    assert r["efficiency_ci_hi"] == pytest.approx(r["speedup_ci_hi"] / 2)


def test_ratio_ci_and_linear_fit():
    r = ratio_ci([2.0, 4.0], [1.0, 1.0])  # relative sd of the mean: sqrt(2 / (2 * 9)) = 1/3
    assert r["ratio"] == 3.0 and r["ci_lo"] == pytest.approx(3 * math.exp(-12.706 / 3))
    assert r["ci_lo"] > 0  # the symmetric 3 - 12.706 would be -9.7: no ratio of throughputs is negative
    assert math.isnan(ratio_ci([2.0], [1.0, 1.0])["ci_lo"])  # one repeat: no interval
    fit = linear_fit([1, 2, 3, 4], [3, 5, 7, 9.0])
    assert fit["slope"] == pytest.approx(2) and fit["intercept"] == pytest.approx(1) and fit["r2"] == pytest.approx(1)
    with pytest.raises(ValueError):
        linear_fit([1, 1], [2, 3])


def test_both_baselines():
    t = compute_tables(study(), FAST)["strong"]
    plain = t[~t["ddp"].astype(bool)].iloc[0]
    r2 = at(ddp(t), world_size=2)
    # DDP baseline 1000 samples/s, non-DDP 1100: efficiency at 2 ranks 1800 / 2000 and 1800 / 2200
    assert r2["efficiency"] == pytest.approx(0.9) and r2["efficiency_vs_nonddp"] == pytest.approx(1800 / 2200)
    assert plain["world_size"] == 1 and plain["speedup"] == pytest.approx(1.1) and math.isnan(plain["karp_flatt"])
    w = compute_tables(study(), FAST)["weak"]
    w2 = at(ddp(w), world_size=2)
    assert w2["weak_efficiency"] == pytest.approx(850 / 900) and w2["weak_efficiency_vs_nonddp"] == pytest.approx(0.85)


def test_placement_class_from_hosts():
    df = clean(frame([row("comm", 1, 1), row("comm", 1, 2), row("comm", 2, 1, num_hosts=2),
                      row("comm", 2, 1, rep=1, num_hosts=1)]))
    assert list(df["placement_class"]) == ["single-rank", "intra-node", "inter-node", "simulated inter-node (one host)"]
    # a collector's label "inter-node" does not survive a record that saw one host
    labelled = frame([row("comm", 2, 1, num_hosts=1)]).assign(placement_class="inter-node")
    assert clean(labelled)["placement_class"].iloc[0] == "simulated inter-node (one host)"


def test_allreduce_sizes_table():
    t = compute_tables(study(), FAST, allreduce=allreduce_sweep())["allreduce_sizes"]
    r = at(t, placement_class="intra-node", size_bytes=4096)
    # ring at p = 2: 2 * 2e-5 + 4096 * 1e-9 s; busbw = algbw * 2 (p - 1) / p = algbw at p = 2
    assert r["time_s_mean"] == pytest.approx(2 * 2e-5 + 4096e-9) and r["n_ok"] == 2
    assert r["algbw_gbps"] == pytest.approx(4096 / r["time_s_mean"] / 1e9) and r["busbw_gbps"] == r["algbw_gbps"]


def test_failed_and_missing_reported_not_used():
    tables = compute_tables(study(), FAST)
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
    t = compute_tables(df, FAST)["strong"]
    assert at(t, world_size=2)["speedup"] == pytest.approx(1.0)
    r4 = at(t, world_size=4)
    assert r4["baseline_world_size"] == 2 and r4["efficiency"] == pytest.approx(1.5 / 2)
    assert math.isnan(at(t, world_size=1)["speedup"]) and at(t, world_size=1)["n_failed"] == 1


def test_weak_efficiency():
    t = ddp(compute_tables(study(), FAST)["weak"])
    assert at(t, world_size=1)["weak_efficiency"] == pytest.approx(1.0)
    # per rank: 1700 / 2 = 850 vs 900
    assert at(t, world_size=2)["weak_efficiency"] == pytest.approx(850 / 900)
    assert at(t, world_size=2)["scaled_speedup"] == pytest.approx(1700 / 900)


def test_inter_vs_intra_loss():
    t = compute_tables(study(), FAST)["comm"]
    inter = at(t, world_size=2, nodes=2)
    assert inter["placement_class"] == "inter-node"
    assert inter["inter_vs_intra_loss_pct"] == pytest.approx(100 * (1700 - 1360) / 1700)
    assert inter["exposed_comm_pct_median"] == pytest.approx(25.0)
    assert math.isnan(at(t, world_size=2, nodes=1)["inter_vs_intra_loss_pct"])


def test_model_size_params_per_gb():
    t = compute_tables(study(), FAST)["model_size"]
    r = at(t, hidden_width=128)
    assert r["num_params"] == 10790 and r["params_per_gb"] == pytest.approx(10790 / 0.26)
    assert r["model_state_bytes_median"] == pytest.approx(16 * 10790)  # 4 B weights + 4 grads + 8 Adam


def test_all_missing_never_crashes():
    df = frame([row(e, 1, 1, status="missing") for e in ("strong", "weak", "comm", "model_size")])
    tables = compute_tables(df, FAST)
    for name in ("strong", "weak", "comm", "model_size"):
        assert len(tables[name]) == 1 and tables[name]["n_ok"].iloc[0] == 0
    assert tables["fits"]["strong"] == {} and tables["fits"]["weak"] == {}


def test_fits_written_for_strong_and_weak():
    f = compute_tables(study(), FAST)["fits"]
    assert f["strong"]["kan-bspline [2,64,1]"]["intra-node"]["usl"]["status"] == "fit"
    assert f["weak"]["kan-bspline [2,64,1]"]["intra-node"]["gustafson"]["reason"] == (
        "not enough world sizes to fit (have 2, need 3)")


def test_baseline_ratios_are_exact():
    # the baseline against itself is 1 by definition: no interval (its own spread would count twice)
    tables = compute_tables(study(), FAST)
    s = ddp(tables["strong"])
    base = at(s, world_size=1)
    assert base["is_baseline"] and base["efficiency"] == pytest.approx(1.0)
    for c in ("speedup_ci_lo", "speedup_ci_hi", "efficiency_ci_lo", "efficiency_ci_hi"):
        assert math.isnan(base[c])
    assert not at(s, world_size=2)["is_baseline"] and not math.isnan(at(s, world_size=2)["efficiency_ci_lo"])
    assert not math.isnan(base["samples_per_s_ci_lo"])  # the measurement itself keeps its interval
    w = at(ddp(tables["weak"]), world_size=1)
    assert w["is_baseline"] and math.isnan(w["weak_efficiency_ci_lo"]) and math.isnan(w["scaled_speedup_ci_hi"])
