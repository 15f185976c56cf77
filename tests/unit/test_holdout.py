"""report.holdout (scaling/model/holdout.py): the model fitted without the held-out world sizes
predicts them; on synthetic records of a known law the prediction is that law's value, and a study
without a no_sync probe (imported runs) gets the per-step DDP cost its law has."""

import numpy as np
import pandas as pd
import pytest
from scaling.common.columns import clean, clean_allreduce
from scaling.model.fit import DDP_FIXED, fit_all, training_rows
from scaling.model.holdout import held_sizes, holdout
from scaling.tables.tidy import ALLREDUCE_COLUMNS
from scaling_data import frame, row

PER_SAMPLE, FIXED, ALPHA = 2e-4, 0.03, 5e-4  # compute 2e-4 s a sample; DDP's own 30 ms; 0.5 ms a message
B, PARAMS = 512, 3648


def law(p: int) -> float:
    return PER_SAMPLE * B + (FIXED + 2 * (p - 1) * ALPHA if p > 1 else 0.0)


def imported(p: int, nodes: int, experiment: str = "strong", spread: float = 0.002) -> dict:
    """A row as import_records writes it: one run, no no_sync probe, its epochs' 10-90% spread."""
    step = law(p)
    r = row(experiment, nodes, p // nodes, 0, samples_per_s=B * p / step, batch_per_rank=B, num_params=PARAMS,
            ddp=p > 1)
    r.update(step_time_s=step, nosync_step_time_s=None, exposed_comm_s=None, exposed_comm_pct=None,
             grads_bytes=4 * PARAMS, launcher="imported", step_time_p10_s=step - spread / 2,
             step_time_p90_s=step + spread / 2, epochs=40, device_type="cuda")
    return r


def study(sizes=((1, 1), (2, 2), (4, 4), (8, 4))) -> pd.DataFrame:
    return clean(frame([imported(p, n) for p, n in sizes]))


def test_largest_is_the_largest_measured_world_size():
    train = training_rows(study())
    assert held_sizes("largest", train) == [8] and held_sizes([4, 16], train) == [4] and held_sizes(None, train) == []


def test_the_held_out_step_is_the_laws_value():
    out = holdout(study(), _no_sweep(), "largest", num_boot=50)
    (r,) = out["kan-bspline [2,64,1]"]
    assert (r["experiment"], r["world_size"], r["placement"]) == ("strong", 8, "inter-node")
    assert r["measured_step_s"] == pytest.approx(law(8))
    # fitted on p = 1, 2, 4 only: d and alpha recovered exactly, so p = 8 is predicted to the law's value
    assert r["predicted_step_s"] == pytest.approx(law(8), rel=1e-6) and abs(r["error_pct"]) < 1e-3
    lo, hi = r["interval"]
    # each epoch's 2 ms 10-90% spread: the median of 39 is known to about 0.16 ms, and extrapolating
    # alpha from p = 2 and 4 to p = 8 widens that to about +-0.9 ms (1.3% of the step) at 95%
    assert lo < r["predicted_step_s"] < hi and 0.002 * law(8) < hi - lo < 0.02 * law(8)
    assert "epochs' spread" in r["interval_from"]


def test_without_the_ddp_term_a_ring_alone_cannot_fit_the_jump_from_one_rank():
    fit = fit_all(training_rows(study()), _no_sweep())
    comm = fit["comm"]["inter-node"]
    # three world sizes above 1 (2, 4, 8): d, alpha and beta all fitted, beta near 0 on this law
    assert comm[DDP_FIXED] == pytest.approx(FIXED, rel=1e-3)
    assert comm["alpha_s"] == pytest.approx(ALPHA, rel=2e-2)


def test_a_ddp_row_at_a_width_no_non_ddp_run_measured_is_left_out():
    rows = [imported(p, n) for p, n in ((1, 1), (2, 2), (4, 4))]
    wide = imported(4, 2, experiment="model_size")
    wide.update(num_params=4 * PARAMS, hidden_width=256, model="kan-bspline [2,256,1]", step_time_s=0.5)
    train = training_rows(clean(frame(rows + [wide])))
    assert "kan-bspline [2,256,1]" not in set(train["model"])  # its compute, and so its DDP cost, is unknown


def test_holdout_off_writes_nothing():
    assert holdout(study(), _no_sweep(), None, num_boot=10) == {}


def _no_sweep() -> pd.DataFrame:
    return clean_allreduce(pd.DataFrame(columns=ALLREDUCE_COLUMNS))


def test_native_law_with_a_sweep_predicts_the_largest_within_a_few_percent():
    from test_scaling_perfmodel import sweep, synthetic
    out = holdout(synthetic(), sweep(), "largest", num_boot=20)
    rows = [r for rs in out.values() for r in rs]
    assert rows and all(r["world_size"] == 8 for r in rows)
    assert max(abs(r["error_pct"]) for r in rows) < 5
    assert np.isfinite([r["interval"][0] for r in rows]).all()


def test_the_guideline_is_advice_only_within_the_model_error_threshold():
    from scaling.decide.deploy import held_out
    row = {"experiment": "strong", "world_size": 8, "nodes": 4, "gpus_per_node": 2, "placement": "inter-node",
           "measured_step_s": 0.1461, "predicted_step_s": 0.1474, "interval": [0.1472, 0.1476], "error_pct": 0.9,
           "interval_from": "bootstrap"}
    (g,) = held_out({"m": [row]}, max_error_pct=25)
    assert g["status"] == "advice" and "147.4 ms [147.2, 147.6] predicted, 146.1 ms measured, outside it" in g["text"]
    (g,) = held_out({"m": [{**row, "predicted_step_s": 0.2, "error_pct": 36.9}]}, max_error_pct=25)
    assert g["status"] == "inconclusive" and "misses a held-out point by 37%" in g["settle"]
    assert held_out({}, 25) == []


def _two_experiments(jitter: float) -> pd.DataFrame:
    """The law's steps measured by two experiments each, one run each, the second `jitter` slower:
    the same step run twice, as the seed paper's strong and weak runs are."""
    rows = []
    for p, n in ((1, 1), (2, 2), (4, 4), (8, 4)):
        for experiment, factor in (("strong", 1.0), ("weak", 1.0 + jitter)):
            r = imported(p, n, experiment=experiment)
            r.update(step_time_s=r["step_time_s"] * factor)
            rows.append(r)
    return clean(frame(rows))


def test_the_interval_adds_the_spread_between_runs_of_one_step():
    from scaling.model.holdout import run_to_run
    jitter = 0.02
    out = holdout(_two_experiments(jitter), _no_sweep(), "largest", num_boot=400)
    rows = {r["experiment"]: r for r in out["kan-bspline [2,64,1]"]}
    # pairs x and x(1 + j): each deviates j / (2 + j) from their mean; pooled over 3 steps, 3 dof:
    # s = sqrt(2 (j / (2 + j))^2) = 1.40% at j = 2%
    s = np.sqrt(2) * jitter / (2 + jitter)
    assert rows["strong"]["run_to_run_pct"] == pytest.approx(100 * s, rel=1e-6)
    assert "1.4% (pooled over 3 steps run more than once, 3 degrees of freedom)" in rows["strong"]["interval_from"]
    for r in rows.values():
        (lo, hi), (mlo, mhi) = r["interval"], r["model_interval"]
        assert lo < mlo < mhi < hi and r["runs"] == 1
        assert lo <= r["measured_step_s"] <= hi  # each run, 1% either side of the fitted mean, falls inside
        assert mhi - mlo < 0.25 * (hi - lo)  # the model's own uncertainty is the smaller part here
    # the held-out world size's own runs never set the spread: only what the reduced fit saw
    train = training_rows(_two_experiments(jitter))
    assert run_to_run(train[train["world_size"] < 8])[0] == pytest.approx(s, rel=1e-6)
    assert run_to_run(training_rows(study()))[0] is None  # no step ran twice


def test_without_a_step_run_twice_the_interval_says_so():
    (r,) = holdout(study(), _no_sweep(), "largest", num_boot=50)["kan-bspline [2,64,1]"]
    assert r["interval"] == r["model_interval"] and r["run_to_run_pct"] is None
    assert "no step of the fit ran twice, so the spread between runs is not in it" in r["interval_from"]


def test_imported_repeats_are_resampled_and_set_the_spread():
    """Repeats imported from a table (its repeat column): the bootstrap draws some twice, which the
    derived DDP cost must survive, and the spread between runs comes from them."""
    from scaling.model.holdout import run_to_run
    rows = []
    for p, n in ((1, 1), (2, 2), (4, 4), (8, 4)):
        for rep, factor in ((0, 0.99), (1, 1.01)):
            r = imported(p, n)
            r.update(rep=rep, step_time_s=r["step_time_s"] * factor, point_id=f"{r['point_id']}-{rep}")
            rows.append(r)
    df = clean(frame(rows))
    (r,) = holdout(df, _no_sweep(), "largest", num_boot=100)["kan-bspline [2,64,1]"]
    assert r["runs"] == 2 and r["measured_step_s"] == pytest.approx(law(8))
    assert "over repeats, each imported step also drawn from its epochs' spread" in r["interval_from"]
    # pairs 0.99x and 1.01x: each 1% from their mean; pooled over 3 steps, 3 dof: s = sqrt(2 x 0.01^2) = 1.41%
    assert r["run_to_run_pct"] == pytest.approx(100 * np.sqrt(2) * 0.01, rel=1e-6)
    assert run_to_run(training_rows(df))[1] == 4  # all four steps, had nothing been held out
    lo, hi = r["interval"]
    assert lo < law(8) < hi
