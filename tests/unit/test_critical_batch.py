"""The batch experiment and the critical batch: its points in the plan, B_crit
recovered within its interval from samples-to-target generated with known E_min and S_min, and
the statuses that say why there is no value."""

import copy

import numpy as np
import pandas as pd
import pytest

import plan
from scaling.tables.critical import critical_batch, critical_batches

BATCHES = (16, 32, 64, 128, 256, 512, 1024)


def _rows(e_min, b_crit, noise=0.05, reps=3, seed=0, batches=BATCHES):
    rng = np.random.default_rng(seed)
    return [(b, e_min * (1 + b / b_crit) * rng.normal(1, noise)) for b in batches for _ in range(reps)]


@pytest.mark.parametrize("e_min, b_crit", [(4000.0, 256.0), (20000.0, 64.0), (1000.0, 600.0)])
def test_b_crit_is_recovered_within_its_interval(e_min, b_crit):
    r = critical_batch(_rows(e_min, b_crit), resamples=300)
    assert r["status"] == "ok"
    lo, hi = r["ci"]
    assert lo <= b_crit <= hi and lo < r["b_crit"] < hi
    assert r["e_min"] == pytest.approx(e_min, rel=0.1)
    # S_min = E_min / B_crit: the steps at an infinite batch
    assert r["s_min"] == pytest.approx(e_min / b_crit, rel=0.15)


def test_noise_free_data_give_the_exact_law():
    r = critical_batch(_rows(5000.0, 128.0, noise=0.0, reps=1), resamples=50)
    assert r["b_crit"] == pytest.approx(128.0) and r["e_min"] == pytest.approx(5000.0)
    assert r["ci"][0] == pytest.approx(128.0) and r["ci"][1] == pytest.approx(128.0)


def test_statuses_say_why_there_is_no_value():
    assert critical_batch([(32, None), (64, None)])["status"] == "not reached"
    r = critical_batch([(32, 100.0), (64, 120.0), (128, None), (256, None)])
    assert r["status"] == "not enough batches" and r["not_reached"] == [128, 256] and r["b_crit"] is None
    # a batch with one repeat that missed the target is not used
    r = critical_batch([(32, 100.0), (64, 120.0), (128, 150.0), (128, None)])
    assert r["status"] == "not enough batches"
    # samples that fall with the batch: no growth, B_crit beyond the largest batch measured
    r = critical_batch([(32, 1000.0), (64, 900.0), (128, 800.0), (256, 800.0)], resamples=20)
    assert r["status"] == "beyond the batches tried" and r["b_crit"] is None and r["b_crit_lower_bound"] == 256


def test_samples_in_proportion_to_the_batch_put_b_crit_below_the_smallest_batch():
    """Every larger batch took as many steps (samples = 500 x B): the fit's B_crit is ~0 (it was
    reported as 4.7e-14, status ok); the status says B_crit lies below the batches tried."""
    r = critical_batch([(b, 500.0 * b) for b in (64, 128, 256) for _ in range(2)], resamples=20)
    assert r["status"] == "below the smallest batch tried"
    assert r["b_crit"] is None and r["ci"] is None and r["b_crit_upper_bound"] == 64
    assert r["s_min"] == pytest.approx(500.0, rel=1e-4) and "B_crit is below 64" in r["why"]


def test_flat_samples_put_b_crit_beyond_the_batches_tried():
    """Samples to target about the same at every batch (each larger batch cut the steps in
    proportion): a fit far past the largest batch (63,936 from batches 64..256 was reported as ok)."""
    r = critical_batch([(64, 4000.0), (128, 4010.0), (256, 4030.0)], resamples=20)
    assert r["status"] == "beyond the batches tried"
    assert r["b_crit"] is None and r["ci"] is None and r["b_crit_lower_bound"] == 256
    assert "the fit puts B_crit at" in r["why"] and "more than 4 x the largest batch" in r["why"]
    r = critical_batch([(64, 4000.0), (128, 4000.0), (256, 4000.0)], resamples=20)  # no growth at all
    assert r["status"] == "beyond the batches tried"


@pytest.mark.parametrize("b_crit, status", [(128.0, "ok"), (17.0, "ok"), (1000.0, "ok"),  # a knee inside
                                            (15.0, "below the smallest batch tried"),
                                            (1030.0, "beyond the batches tried")])
def test_ok_only_within_a_factor_4_of_the_batches_tried(b_crit, status):
    """Noise-free E(B) = E_min (1 + B / B_crit) over batches 64..256: placed within [64 / 4, 4 x 256]."""
    r = critical_batch(_rows(5000.0, b_crit, noise=0.0, reps=1, batches=(64, 128, 256)), resamples=20)
    assert r["status"] == status, r["why"]
    if status == "ok":
        assert r["b_crit"] == pytest.approx(b_crit) and r["ci"] is not None


def _curves(b_crit=100.0, e_min=1000.0):
    """val_curves rows of a batch experiment whose accuracy reaches 0.9 after E(B) samples."""
    rows = []
    for b in (16, 32, 64, 128, 256):
        e = e_min * (1 + b / b_crit)
        for s in range(1, 41):
            seen = 100 * s
            rows.append({"point_id": f"p{b}", "experiment": "batch", "model": "kan", "data": "d", "world_size": 1,
                         "nodes": 1, "gpus_per_node": 1, "placement_class": "single", "ddp": True, "rep": 0,
                         "global_batch": b, "step": s, "samples_seen": seen, "train_time_s": 0.01 * s,
                         "val_loss": 0.1, "val_accuracy": 0.95 if seen >= e else 0.5, "eval_time_s": 0.0,
                         "startup_s": 0.0})
    return pd.DataFrame(rows)


def test_from_curves_and_a_fixed_target():
    out = critical_batches(_curves(), {"metric": "val_accuracy", "value": 0.9}, resamples=50)
    r = out["kan"]
    assert r["status"] == "ok" and r["target_value"] == 0.9
    # E(B) known to the evaluation cadence (100 samples): B_crit near 100
    assert 70 < r["b_crit"] < 140, r


CFG = {
    "study": "s", "data": {"kind": "sklearn", "name": "breast_cancer"},
    "model": {"impl": ["kanscale"], "widths": [30, 8, 2]},
    "training": {"eval_every_samples": 256, "lr": 0.01, "lr_scaling": "sqrt"},
    "report": {"target": {"metric": "val_accuracy", "from_reference": 0.98}},
    "experiments": {"strong": {"samples": 2048, "global_batch": 64, "non_ddp_baseline": False,
                               "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
                    "allreduce": {"enabled": False},
                    "batch": {"samples": 4096, "global_batches": [16, 64, 256]}},
}


def test_the_batch_experiment_plans_one_rank_points_at_their_scaled_rates():
    pts = [p for p in plan.build_points(plan.validate_config(copy.deepcopy(CFG))).values() if p.experiment == "batch"]
    assert sorted(p.train.batch_per_rank for p in pts) == [16, 64, 256]
    assert {p.placement.world_size for p in pts} == {1} and "b256" in max(pts, key=lambda p: p.train.batch_per_rank).id
    # sqrt scaling from the study's reference batch (strong's 64): 16 -> lr/2, 256 -> 2 lr
    rates = {p.train.batch_per_rank: p.lr_effective for p in pts}
    assert rates[16] == pytest.approx(0.005) and rates[64] == pytest.approx(0.01) and rates[256] == pytest.approx(0.02)


def test_the_batch_experiment_needs_a_target():
    cfg = copy.deepcopy(CFG)
    cfg["report"]["target"] = None
    with pytest.raises(plan.ConfigError, match="experiments.batch: the critical batch is fitted"):
        plan.validate_config(cfg)


def test_the_figure_marks_b_crit_and_draws_the_fit(tmp_path, monkeypatch):
    """The figure of critical_batch.json: a dot per repeat, the fitted curve through the law's values,
    B_crit as a vertical line at the fitted value; a model with no fit is named in the caption; no
    data, no figure."""
    from scaling.report import plotkit
    from scaling.report.plots_accuracy import CRITICAL, plot_critical_batch

    ok = critical_batch(_rows(5000.0, 128.0, noise=0.0, reps=2), resamples=50)
    few = critical_batch([(32, 900.0), (64, 1000.0), (128, None)])
    kept = {}
    real = plotkit.save

    def keep(fig, folder, name):
        kept[name] = fig
        return real(fig, folder, name)

    monkeypatch.setattr(plotkit, "save", keep)
    out = plot_critical_batch({"kan": ok, "mlp": few}, tmp_path)
    assert (tmp_path / out[CRITICAL]["file"]).stat().st_size > 0
    assert "mlp: not enough batches" in out[CRITICAL]["caption"]
    ax = kept[CRITICAL].axes[0]
    dots = sum(len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets"))
    assert dots == 2 * len(BATCHES) + 2
    vertical = [ln for ln in ax.lines if len(set(ln.get_xdata())) == 1]
    assert [ln.get_xdata()[0] for ln in vertical] == [pytest.approx(128.0)]
    curve = next(ln for ln in ax.lines if len(ln.get_xdata()) > 2)
    x, y = np.asarray(curve.get_xdata()), np.asarray(curve.get_ydata())
    assert y == pytest.approx(5000.0 * (1 + x / 128.0))
    assert plot_critical_batch({}, tmp_path) == {} and plot_critical_batch(None, tmp_path) == {}


def test_the_table_shows_each_models_target_and_says_when_they_differ():
    from scaling.report.cells import critical_rows

    ok = critical_batch(_rows(5000.0, 128.0, noise=0.0, reps=1, batches=(64, 128, 256)), resamples=20)
    below = critical_batch([(b, 500.0 * b) for b in (64, 128, 256)], resamples=20)
    kan = {**ok, "target_metric": "val_accuracy", "target_value": 0.9025, "reference_value": 0.95}
    mlp = {**below, "target_metric": "val_accuracy", "target_value": 0.855, "reference_value": 0.9}
    t = critical_rows({"kan": kan, "mlp": mlp})
    col = t["headers"].index("target (differs between models)")
    assert [r[col] for r in t["rows"]] == ["val_accuracy ≥ 0.9025 (0.95 x 0.95)",
                                           "val_accuracy ≥ 0.855 (0.95 x 0.9)"]
    assert t["rows"][1][1] == "< 64" and t["rows"][1][4] == "below the smallest batch tried"
    assert all("not comparable" in w for w in t["why"].values()) and t["targets_differ"]
    # one fixed target for both: one plain column, nothing to say
    same = critical_rows({"kan": {**kan, "target_value": 0.9, "reference_value": float("nan")},
                          "mlp": {**mlp, "target_value": 0.9, "reference_value": None}})
    col = same["headers"].index("target")
    assert [r[col] for r in same["rows"]] == ["val_accuracy ≥ 0.9"] * 2
    assert not same["targets_differ"] and not any("not comparable" in w for w in same["why"].values())
