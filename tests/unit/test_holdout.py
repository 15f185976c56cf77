"""report.holdout (scaling/model/holdout.py): the model fitted without the held-out placements
predicts them with the placement model (scaling/model/placement.py); on synthetic records of a known
law in nodes and GPUs a node the prediction is that law's value, what cannot be known is refused or
bounded, and every prediction past what was measured says so."""

import numpy as np
import pandas as pd
import pytest
from scaling.common.columns import clean, clean_allreduce
from scaling.model.fit import training_rows
from scaling.model.holdout import held_places, held_sizes, holdout
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


INTRA, INTER = 0.02, 0.06  # a node's ring: 20 ms at full bandwidth; the NIC's ring across nodes: 60 ms


def placement_law(nodes: int, gpn: int) -> float:
    """Hierarchical all-reduce: compute, DDP's own cost, the node's ring, then the nodes' ring."""
    if nodes * gpn == 1:
        return PER_SAMPLE * B
    return (PER_SAMPLE * B + FIXED + INTRA * 2 * (gpn - 1) / gpn
            + (INTER * 2 * (nodes - 1) / nodes if nodes > 1 else 0.0))


def placed(places, law=placement_law, experiment="weak") -> pd.DataFrame:
    rows = []
    for n, g in places:
        r = imported(n * g, n, experiment=experiment)
        step = law(n, g)
        r.update(gpus_per_node=g, nodes=n, step_time_s=step, samples_per_s=B * n * g / step,
                 step_time_p10_s=step * 0.999, step_time_p90_s=step * 1.001,
                 point_id=f"{experiment}-n{n}g{g}", placement=f"{n}x{g}")
        rows.append(r)
    return clean(frame(rows))


GRID = [(n, g) for n in (1, 2, 3, 4) for g in (1, 2, 4)]


def test_largest_is_every_placement_at_the_largest_world_size():
    train = training_rows(study())
    assert held_sizes("largest", train) == [8] and held_sizes([4, 16], train) == [4] and held_sizes(None, train) == []
    grid = training_rows(placed(GRID))
    assert held_places(["4x1", "4x4", "5x1", 8], grid) == [(2, 4), (4, 1), (4, 2), (4, 4)]  # no 5x1 measured
    assert held_places("largest", grid) == [(4, 4)]


def test_a_law_in_nodes_and_gpus_is_predicted_where_its_placements_identify_it():
    out = holdout(placed(GRID), _no_sweep(), ["4x1", "4x2", "4x4"])
    rows = out["kan-bspline [2,64,1]"]
    assert sorted((r["nodes"], r["gpus_per_node"]) for r in rows) == [(4, 1), (4, 2), (4, 4)]
    for r in rows:
        law = placement_law(r["nodes"], r["gpus_per_node"])
        assert r["predicted_step_s"] == pytest.approx(law, rel=2e-3), r
        lo, hi = r["interval"]
        assert lo <= law <= hi and hi > lo  # never zero width
        assert r["extrapolated"].startswith("extrapolates: 4 nodes, past the 3 measured")
    # 2 x 4 and 4 x 2 are one world size, not one step: the model keeps them apart
    two_by_four = holdout(placed(GRID), _no_sweep(), ["2x4"])["kan-bspline [2,64,1]"][0]
    assert two_by_four["predicted_step_s"] == pytest.approx(placement_law(2, 4), rel=2e-3)
    assert two_by_four["extrapolated"] is None  # inside what was measured
    assert placement_law(2, 4) != pytest.approx(placement_law(4, 2), rel=1e-2)


def test_from_two_nodes_the_growth_across_nodes_is_bounded_not_guessed():
    """Fitted on up to 2 nodes, the inter-node cost at N = 2 fits a fixed, ring, tree or linear growth
    alike: the interval holds all of them and the step without it, and says it extrapolates."""
    out = holdout(placed(GRID), _no_sweep(), [f"{n}x{g}" for n in (3, 4) for g in (1, 2, 4)])
    for r in out["kan-bspline [2,64,1]"]:
        lo, hi = r["interval"]
        law = placement_law(r["nodes"], r["gpus_per_node"])
        assert lo <= law <= hi, r
        assert "nodes, past the 2 measured" in r["extrapolated"]
        # as low as the step without any inter-node cost, as high as a cost growing with N - 1
        g = r["gpus_per_node"]
        node_only = PER_SAMPLE * B + FIXED + INTRA * 2 * (g - 1) / g
        assert lo <= node_only * 1.001 and hi >= node_only + INTER * (r["nodes"] - 1) * 0.999
        assert "growth past the one level measured is unknown" in r["interval_from"]


def test_what_no_placement_measured_is_refused_with_the_reason():
    one_gpu = [(n, 1) for n in (1, 2, 3, 4)] + [(4, 2)]
    (r,) = holdout(placed(one_gpu), _no_sweep(), ["4x2"])["kan-bspline [2,64,1]"]
    assert r["predicted_step_s"] is None and r["interval"] is None
    assert "no placement with more than one GPU a node was measured" in r["reason"]
    intra_only = [(1, 1), (1, 2), (1, 4), (2, 4)]
    (r,) = holdout(placed(intra_only), _no_sweep(), ["2x4"])["kan-bspline [2,64,1]"]
    assert "no placement on more than one node was measured" in r["reason"]
    far = [(1, 1), (1, 2), (2, 1), (2, 2), (9, 2)]
    (r,) = holdout(placed(far), _no_sweep(), ["9x2"])["kan-bspline [2,64,1]"]
    assert "9 nodes is more than 4x the 2 measured" in r["reason"]


def test_one_node_predicts_eight_gpus_from_one_to_four():
    """A node's ring 2 (G - 1) / G: from 1, 2 and 4 GPUs the 8-GPU step within 2%."""
    (r,) = holdout(placed([(1, 1), (1, 2), (1, 3), (1, 4), (1, 8)]), _no_sweep(), ["1x8"])["kan-bspline [2,64,1]"]
    assert abs(r["error_pct"]) < 2 and "8 GPUs a node, past the 4 measured" in r["extrapolated"]


def test_a_run_without_num_params_is_still_modelled():
    df = placed(GRID)
    df["num_params"] = np.nan
    df["grads_bytes"] = np.nan
    rows = holdout(df, _no_sweep(), ["4x2"])["kan-bspline [2,64,1]"]
    assert rows and rows[0]["predicted_step_s"] == pytest.approx(placement_law(4, 2), rel=2e-3)


def test_a_held_out_point_the_model_cannot_use_is_named_with_its_reason():
    df = placed(GRID)
    bad = df["point_id"] == "weak-n4g2"
    df.loc[bad, "status"], df.loc[bad, "reason"] = "failed", "rank 3 exited with code 1"
    rows = {(r["nodes"], r["gpus_per_node"]): r for r in holdout(df, _no_sweep(), ["4x1", "4x2"])["kan-bspline [2,64,1]"]}
    assert rows[(4, 1)]["predicted_step_s"] is not None
    assert rows[(4, 2)]["reason"] == "left out of the model: the run is failed: rank 3 exited with code 1"


def test_without_enough_placements_or_repeats_there_is_no_zero_width_interval():
    """One DDP placement left and no step run twice: every identified form fits it exactly; at a
    placement where they agree nothing bounds the prediction, and the row says why."""
    out = holdout(placed([(1, 1), (1, 2), (1, 4)]), _no_sweep(), ["1x4"])
    (r,) = out["kan-bspline [2,64,1]"]
    if r["interval"] is None:
        assert "no interval" in r["reason"]
    else:
        assert r["interval"][1] > r["interval"][0]


def test_holdout_off_writes_nothing():
    assert holdout(study(), _no_sweep(), None) == {}


def _no_sweep() -> pd.DataFrame:
    return clean_allreduce(pd.DataFrame(columns=ALLREDUCE_COLUMNS))


def test_native_law_with_a_sweep_predicts_the_largest_within_a_few_percent():
    from test_scaling_perfmodel import sweep, synthetic
    out = holdout(synthetic(), sweep(), "largest")
    rows = [r for rs in out.values() for r in rs]
    assert rows and all(r["world_size"] == 8 for r in rows)
    done = [r for r in rows if r["predicted_step_s"] is not None]
    assert done and max(abs(r["error_pct"]) for r in done) < 5


def test_the_guideline_is_advice_only_within_the_model_error_threshold():
    from scaling.decide.deploy import held_out
    row = {"experiment": "strong", "world_size": 8, "nodes": 4, "gpus_per_node": 2, "placement": "inter-node",
           "measured_step_s": 0.1461, "predicted_step_s": 0.1474, "interval": [0.1472, 0.1476], "error_pct": 0.9,
           "interval_from": "bootstrap", "extrapolated": "extrapolates: 8 ranks, past the 4 measured"}
    (g,) = held_out({"m": [row]}, max_error_pct=25)
    assert g["status"] == "advice" and "147.4 ms [147.2, 147.6] predicted, 146.1 ms measured, outside it" in g["text"]
    assert "extrapolates: 8 ranks, past the 4 measured" in g["text"]
    (g,) = held_out({"m": [{**row, "predicted_step_s": 0.2, "error_pct": 36.9}]}, max_error_pct=25)
    assert g["status"] == "inconclusive" and "misses a held-out point by 37%" in g["settle"]
    assert held_out({}, 25) == []


def _two_experiments(jitter: float) -> pd.DataFrame:
    """The law's steps measured by two experiments each, one run each, the second `jitter` slower:
    the same step run twice, as the seed paper's strong and weak runs are."""
    rows = []
    for n, g in GRID:
        for experiment, factor in (("strong", 1.0), ("weak", 1.0 + jitter)):
            r = placed([(n, g)], experiment=experiment).iloc[0].to_dict()
            r.update(step_time_s=r["step_time_s"] * factor, point_id=f"{r['point_id']}-{experiment}")
            rows.append(r)
    return clean(pd.DataFrame(rows))


def test_the_spread_between_runs_of_one_step_is_a_floor_under_the_interval():
    from scaling.model.holdout import run_to_run
    jitter = 0.02
    out = holdout(_two_experiments(jitter), _no_sweep(), ["4x2"])
    rows = {r["experiment"]: r for r in out["kan-bspline [2,64,1]"]}
    # pairs x and x(1 + j): each deviates j / (2 + j) from their mean; s = sqrt(2 (j / (2 + j))^2) = 1.40%
    s = np.sqrt(2) * jitter / (2 + jitter)
    assert rows["strong"]["run_to_run_pct"] == pytest.approx(100 * s, rel=1e-6)
    for r in rows.values():
        lo, hi = r["interval"]
        assert lo <= r["measured_step_s"] <= hi and (hi - lo) / r["predicted_step_s"] > 2 * s
    train = training_rows(_two_experiments(jitter))
    assert run_to_run(train)[0] == pytest.approx(s, rel=1e-6)
    assert run_to_run(training_rows(placed(GRID)))[0] is None  # no step ran twice
