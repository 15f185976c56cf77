"""The "not communication" guideline (scaling/decide/overhead.py): stated only when the per-step DDP
cost dwarfs both the intra/inter difference and the wire time of the gradients at 1 Gbit/s."""

import pandas as pd
from scaling.decide.overhead import not_communication

MODEL = "pykan [2,64,1]"


def tables(intra_ms: float, inter_ms: float) -> list[pd.DataFrame]:
    rows = [{"model": MODEL, "ddp": True, "world_size": 2, "placement_class": "intra-node",
             "step_time_s_mean": intra_ms / 1e3},
            {"model": MODEL, "ddp": True, "world_size": 2, "placement_class": "inter-node",
             "step_time_s_mean": inter_ms / 1e3},
            {"model": MODEL, "ddp": False, "world_size": 1, "placement_class": "single-rank",
             "step_time_s_mean": 0.1136}]
    return [pd.DataFrame(rows)]


def model_json(fixed_ms: float = 30.5, lo_ms: float = 30.2, grads_bytes: float = 14592) -> dict:
    fixed = {"value": fixed_ms / 1e3, "ci_lo": lo_ms / 1e3, "ci_hi": (2 * fixed_ms - lo_ms) / 1e3}
    return {"models": {MODEL: {"grads_bytes": grads_bytes,
                               "placements": {"inter-node": {"comm": {"ddp_fixed_s": fixed}}}}}}


def test_a_cost_the_same_on_and_off_node_is_not_communication():
    (g,) = not_communication(tables(142.2, 143.8), model_json())
    assert g["status"] == "advice" and g["id"] == f"overhead-not-comm-{MODEL}"
    # 2 (p - 1) / p x 14,592 B x 8 bit / 1 Gbit/s = 0.117 ms at p = 2
    (pair,) = g["numbers"]["world_sizes"]
    assert abs(pair["wire_s_at_1_gbit"] - 1.16736e-4) < 1e-9 and abs(pair["spread_s"] - 1.6e-3) < 1e-9
    assert "not communication" in g["text"] and "142.2 ms within one node" in g["text"]


def test_a_cost_that_crossing_nodes_changes_is_not_called_anything():
    # across nodes 5 ms slower: 10 x 5 ms is above the 30.2 ms lower end of d
    assert not_communication(tables(142.2, 147.2), model_json()) == []


def test_gradients_too_big_for_a_slow_link_are_not_ruled_out():
    # 40 MB of gradients take 320 ms at 1 Gbit/s at p = 2: the wire could explain the cost
    assert not_communication(tables(142.2, 142.4), model_json(grads_bytes=4e7)) == []


def test_no_ddp_cost_term_no_guideline():
    assert not_communication(tables(142.2, 143.8), {"models": {MODEL: {"placements": {}}}}) == []


def test_a_training_loss_target_is_read_in_the_held_out_columns():
    """decide/accuracy.training_loss_view: the std over repeats comes back from the CI's upper half."""
    from scaling.common.stats import t_quantile
    from scaling.decide.accuracy import TRAIN_LOSS, training_loss_view
    half = t_quantile(0.95, 2) * 2.0 / 3 ** 0.5  # std 2 s over 3 repeats
    t = pd.DataFrame([{"model": MODEL, "n_ok": 3, "target_loss": 0.1, "time_to_target_s": 10.0,
                       "time_to_target_s_ci_lo": 10.0 - half, "time_to_target_s_ci_hi": 10.0 + half},
                      {"model": MODEL, "n_ok": 1, "target_loss": 0.1, "time_to_target_s": float("nan"),
                       "time_to_target_s_ci_lo": float("nan"), "time_to_target_s_ci_hi": float("nan")}])
    v = training_loss_view(t)
    assert list(v["target_metric"]) == [TRAIN_LOSS] * 2 and list(v["target_reached"]) == [True, False]
    assert abs(v["time_to_target_s_std"].iloc[0] - 2.0) < 1e-9
