"""Operator speed vs scaling: step shares and the crossover, from hand-built tables."""

import pandas as pd
import pytest

from scaling.report import operator


def strong_rows():
    # kanscale: fast compute, the same all-reduce as pykan: a larger exposed share, lower efficiency
    rows = []
    for fam, step1, nosync2, exposed2 in (("kan-bspline", 1e-3, 0.6e-3, 0.9e-3), ("pykan", 20e-3, 10.5e-3, 1.0e-3)):
        for p, step, nosync, exposed, ci in ((1, step1, step1, 0.0, (1.0, 1.0)),
                                             (2, nosync2 + exposed2, nosync2, exposed2, (0.5, 0.9))):
            rows.append({"model": f"{fam} [2,64,1]", "world_size": p, "placement_class": "single-rank" if p == 1
                         else "intra-node", "batch_per_rank": 512 // p, "ddp": True, "step_time_s_mean": step,
                         "nosync_step_time_s_mean": nosync, "exposed_comm_s_mean": exposed,
                         "samples_per_s_mean": 512 / step, "efficiency": step1 / step / p,
                         "efficiency_ci_lo": ci[0] / 2, "efficiency_ci_hi": ci[1] / 2,
                         "speedup": step1 / step, "speedup_ci_lo": ci[0], "speedup_ci_hi": ci[1]})
    return pd.DataFrame(rows)


def test_shares_are_fractions_of_the_synced_step():
    s = operator.shares(strong_rows())
    two = s[s["world_size"] == 2].set_index("family")
    assert two.loc["kan-bspline", "exposed_share_pct"] == pytest.approx(60.0)
    assert two.loc["pykan", "exposed_share_pct"] == pytest.approx(100 / 11.5)
    assert (two["compute_share_pct"] + two["exposed_share_pct"]).round(6).tolist() == [100.0, 100.0]


def test_crossover_from_a_validated_model():
    model = {"models": {"pykan [2,64,1]": {
        "num_params": 1000, "grads_bytes": 4000,
        "compute": {"params": {"per_sample_s": {"value": 2e-6, "ci_lo": 1e-6, "at_bound": None},
                               "per_sample_param_s": {"value": 0.0, "ci_lo": 0.0, "at_bound": "at bound"}}},
        "placements": {"intra-node": {"comm": {"alpha_s": {"value": 1e-4}, "beta_s_per_byte": {"value": 1e-9},
                                               "exposure": {"value": 0.5}},
                                      "validation": {"loo_mape_pct": 12.0}}}}}}
    c = operator.crossovers(strong_rows(), model)
    # exposed(2) = 0.5 * (2 * 1e-4 + 4000 * 1e-9) = 1.02e-4 s; per sample 2e-6 s -> b* = 51
    assert c["pykan [2,64,1]"]["source"] == "model"
    assert c["pykan [2,64,1]"]["per_rank_batch"] == pytest.approx(51.0)
    assert "model error within one node: 12%" in operator.crossover_text(c["pykan [2,64,1]"])
    # kanscale has no model entry: measured, speedup CI [0.5, 0.9] < 1 at per-rank batch 256
    assert c["kan-bspline [2,64,1]"]["source"] == "measured"
    assert "do not beat 1 at per-rank batches up to 256" in operator.crossover_text(c["kan-bspline [2,64,1]"])


def test_an_unresolved_compute_term_gives_no_model_crossover():
    model = {"models": {"pykan [2,64,1]": {
        "num_params": 1000, "grads_bytes": 4000,
        "compute": {"params": {"per_sample_s": {"value": 0.0, "ci_lo": 0.0, "at_bound": "per_sample_s at its lower bound 0"}}},
        "placements": {"intra-node": {"comm": {"alpha_s": {"value": 1e-4}, "beta_s_per_byte": {"value": 1e-9},
                                               "exposure": {"value": 0.5}}, "validation": {"loo_mape_pct": 5.0}}}}}}
    c = operator.crossovers(strong_rows(), model)["pykan [2,64,1]"]
    assert c["source"] == "measured" and "not resolved" in operator.crossover_text(c)


def test_section_says_when_only_one_implementation_was_measured():
    one = strong_rows()
    one = one[one["model"].str.startswith("pykan")]
    sec = operator.section(one, None)
    assert sec["families"] == ["pykan"] and not sec["comparable"] and len(sec["rows"]) == 2
    assert not sec["no_probe"]


def test_runs_without_a_no_sync_step_leave_the_shares_unknown():
    """Imported runs have no no_sync probe: their shares are unknown, not 0 or 100."""
    runs = strong_rows()
    runs[["nosync_step_time_s_mean", "exposed_comm_s_mean"]] = None
    sec = operator.section(runs, None)
    assert sec["no_probe"] and sec["comparable"]
    two = [r for r in sec["rows"] if r[1] == "2"]
    assert two and all(r[6] == "–" and r[7] == "–" for r in two)
    assert [r[2] for r in sec["rows"]] == ["–"] * len(sec["rows"])  # no nodes column: not guessed
    runs["nodes"], runs["gpus_per_node"] = 1, runs["world_size"]
    assert {r[2] for r in operator.section(runs, None)["rows"] if r[1] == "2"} == {"1x2"}
