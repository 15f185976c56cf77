"""The placement model (scaling/model/placement.py) on public tables that kanscale did not measure
(examples/public-tables, cited in its SOURCES.md), imported through the generic table as a user would
(benchmarks/placement_holdout.py builds the config): held-out placements are predicted with intervals
that hold what was measured, and every prediction past what was measured says so."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import placement_holdout as bench  # noqa: E402
from scaling.model.placement import FORMS, _features, design, identified  # noqa: E402

TABLES = ROOT / "examples" / "public-tables"


def test_forms_are_distinct_and_each_part_is_optional():
    assert len(FORMS) == len(set(FORMS)) == 79  # 2 x 4 x 10 choices, less the empty one
    assert ("ddp",) in FORMS and ("intra_ring", "inter_ring") in FORMS


def test_a_form_is_identified_only_where_the_placements_separate_its_terms():
    N, G = np.array([2.0, 2.0]), np.array([1.0, 2.0])
    # at N = 2 a fixed inter-node cost and the nodes' ring are the same number: not both
    assert not identified(design(("inter_step", "inter_ring"), N, G, np.ones(2)))
    assert identified(design(("ddp", "intra_ring"), N, G, np.ones(2)))
    f = _features(np.array([4.0]), np.array([2.0]))
    assert f["inter_ring"][0] == pytest.approx(1.5) and f["flat_ring"][0] == pytest.approx(2 * 7 / 8)


@pytest.mark.parametrize("table", ["pollux_t4_bert", "pollux_t4_resnet50", "pollux_t4_resnet18"])
def test_up_to_three_nodes_predict_the_four_node_placements(table):
    r = bench.score(TABLES / f"{table}.csv", "<=3 nodes -> 4", [f"4x{g}" for g in (1, 2, 3, 4)], False)
    assert r["held"] == r["predicted"] == 4
    assert r["model_mae_pct"] <= 12 and r["coverage_pct"] >= 75 and r["extrapolation_said"] == 4
    assert r["model_mae_pct"] < r["p-model_mae_pct"]  # the world-size model it replaces


def test_one_node_tables_predict_eight_gpus_from_one_to_four():
    # 42 public one-node tables (NVIDIA DeepLearningExamples: Transformer-XL, Jasper, SSD300, BERT-large,
    # ResNet-50 on DGX-1, DGX-2, DGX-2H, DGX A100): each 8-GPU step predicted from its 1 to 4 GPU runs
    res = [bench.score(p, "1 node -> 8", ["1x8"], False) for p in sorted((TABLES / "one-node").glob("*.csv"))]
    assert len(res) == 42 and all(r["predicted"] == 1 for r in res)
    worst = max(res, key=lambda r: r["model_mae_pct"])
    assert worst["model_mae_pct"] <= 10, worst
    assert np.mean([r["model_mae_pct"] for r in res]) <= 3
    assert np.mean([r["coverage_pct"] for r in res]) >= 75


@pytest.mark.parametrize("table", ["pollux_t4_bert", "sia_rtx_bert"])
def test_up_to_two_nodes_bound_three_and_four_and_say_they_extrapolate(table):
    spec = [f"{n}x{g}" for n in (3, 4) for g in (1, 2, 3, 4, 8)]
    r = bench.score(TABLES / f"{table}.csv", "<=2 nodes -> 3,4", spec, False)
    assert r["held"] >= 4 and r["coverage_pct"] >= 75 and r["extrapolation_said"] == r["held"]


def test_imported_weak_runs_get_predictions_by_placement_and_a_recommendation():
    """Runs without a no_sync probe and weak scaling only (a public table's kind): model.json places the
    largest weak run's work with the placement model, each prediction names its placement and how far
    it extrapolates, and what is too far is refused with the reason."""
    from scaling_data import settings
    from scaling.model.perf_model import fit_performance_model
    from test_holdout import GRID, _no_sweep, placed
    model = fit_performance_model(placed(GRID), _no_sweep(), settings(bootstrap_samples=5))
    m = model["models"]["kan-bspline [2,64,1]"]
    assert "placement model" in m["engine"] and m["work"]["from"].startswith("weak")
    inter = m["placements"]["inter-node"]
    assert inter["validation"]["method"].startswith("leave one placement out")
    assert inter["validation"]["loo_mape_pct"] < 1  # the law is in the family: left-out placements exact
    rows = {r["placement"]: r for r in inter["predictions"]}
    assert rows["4x4"]["extrapolation"] is None and rows["8x4"]["extrapolation"].startswith("extrapolates: 8 nodes")
    lo, hi = rows["8x4"]["step_time_s"]["lo"], rows["8x4"]["step_time_s"]["hi"]
    assert lo < rows["8x4"]["step_time_s"]["value"] < hi
    assert all("more than 4x the 4 measured" in r["reason"] for r in inter.get("refused", []))
    assert m["recommendation"].get("cheapest") is not None
    assert m["placements"]["single-rank"]["validation"].get("measured")
