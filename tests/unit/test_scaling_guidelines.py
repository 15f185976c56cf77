"""Guideline rules on hand-built measurements: each fires or not, cites its numbers, or says what's missing."""

import pytest
from scaling.guidelines import compute_guidelines
from scaling.tables import compute_tables
from scaling_data import frame, row, study

TH = {"efficiency_threshold": 0.75, "inter_node_penalty_pct": 10, "comm_share_pct": 20}


def by_prefix(gs, prefix):
    return [g for g in gs if g["id"].startswith(prefix)]


def guidelines(df, **th):
    return compute_guidelines(compute_tables(df), {**TH, **th})


def test_every_guideline_has_text_rule_numbers():
    for g in guidelines(study()):
        assert g["text"] and g["rule"] and isinstance(g["numbers"], dict)
        assert g["status"] in ("advice", "not_enough_data")


def test_strong_efficiency_chooses_world_size():
    (g,) = by_prefix(guidelines(study()), "strong-efficiency")
    assert g["status"] == "advice" and g["numbers"]["chosen_world_size"] == 2
    assert g["numbers"]["efficiency_by_world_size"] == {"1": 1.0, "2": 0.9, "4": 0.6}
    assert "2 ranks" in g["text"] and "90.0% at 2" in g["text"] and "60.0% at 4" in g["text"]
    # a lower threshold admits 4 ranks
    (g,) = by_prefix(guidelines(study(), efficiency_threshold=0.5), "strong-efficiency")
    assert g["numbers"]["chosen_world_size"] == 4 and "largest world size measured" in g["text"]
    # a threshold above every point: stay at the baseline
    (g,) = by_prefix(guidelines(study(), efficiency_threshold=0.95), "strong-efficiency")
    assert g["numbers"]["chosen_world_size"] == 1 and "no world size above 1" in g["text"]


def test_strong_not_enough_data():
    df = frame([row("strong", 1, 1), row("strong", 1, 2, status="failed", reason="timeout")])
    (g,) = by_prefix(guidelines(df), "strong-efficiency")
    assert g["status"] == "not_enough_data" and g["text"].startswith("Not enough data")


def test_inter_node_rule_fires_and_not():
    (g,) = by_prefix(guidelines(study()), "inter-node")
    assert g["numbers"]["loss_pct"] == pytest.approx(20.0) and g["numbers"]["keep_within_node"] is True
    assert "keep jobs within one node" in g["text"] and "1,360 vs 1,700" in g["text"]
    (g,) = by_prefix(guidelines(study(), inter_node_penalty_pct=25), "inter-node")
    assert g["numbers"]["keep_within_node"] is False and "spreading over nodes is fine" in g["text"]


def test_inter_node_not_enough_data():
    df = frame([row("comm", 1, 2), row("comm", 2, 1, status="oom", reason="out of memory")])
    (g,) = by_prefix(guidelines(df), "inter-node")
    assert g["status"] == "not_enough_data"


def test_comm_share():
    (g,) = by_prefix(guidelines(study()), "comm-share")
    assert g["numbers"]["num_points_over"] == 2 and "strong 1x4 (30.0%)" in g["text"]
    (g,) = by_prefix(guidelines(study(), comm_share_pct=50), "comm-share")
    assert g["numbers"]["num_points_over"] == 0 and "stays ≤ 50%" in g["text"]
    (g,) = by_prefix(guidelines(frame([row("strong", 1, 1)])), "comm-share")
    assert g["status"] == "not_enough_data"


def test_per_rank_batch_falls_off():
    # at 2 ranks: per-rank batch 64 reaches 400 samples/s per rank, 256 reaches 1000 -> 64 is too small
    df = frame([row("strong", 1, 2, samples_per_s=800.0, batch_per_rank=64),
                row("weak", 1, 2, samples_per_s=2000.0, batch_per_rank=256),
                row("weak", 1, 1, samples_per_s=1000.0, batch_per_rank=256)])
    (g,) = by_prefix(guidelines(df), "per-rank-batch")
    assert g["numbers"]["falls_off_at_batch"] == 64 and g["numbers"]["min_good_batch"] == 256
    assert g["numbers"]["relative_to_best"]["64"] == pytest.approx(0.4)
    assert "keep the per-rank batch ≥ 256" in g["text"]


def test_per_rank_batch_not_enough_data():
    df = frame([row("strong", 1, 2, batch_per_rank=256), row("weak", 1, 2, batch_per_rank=256)])
    (g,) = by_prefix(guidelines(df), "per-rank-batch")
    assert g["status"] == "not_enough_data"


def test_memory():
    (g,) = by_prefix(guidelines(study()), "memory")
    n = g["numbers"]
    assert n["largest_width"] == 128 and n["num_params"] == 10790
    assert n["params_per_gb"] == pytest.approx(10790 / 0.26, rel=1e-4)
    # 2.0e8 B at width 32, 2.6e8 B at 128: 625,000 B per unit width
    assert n["bytes_per_unit_width"] == pytest.approx(625000.0)
    assert n["max_width_fitting_gb"]["16"] == int((16e9 - (2.0e8 - 32 * 625000)) / 625000)


def test_memory_flat_and_missing():
    flat = frame([row("model_size", 1, 1, hidden_width=32, peak_mem_bytes=3e8),
                  row("model_size", 1, 1, hidden_width=128, peak_mem_bytes=3e8)])
    (g,) = by_prefix(guidelines(flat), "memory")
    assert "does not grow measurably" in g["text"]
    (g,) = by_prefix(guidelines(frame([row("model_size", 1, 1, status="missing")])), "memory")
    assert g["status"] == "not_enough_data"


def test_empty_tables():
    gs = compute_guidelines({}, TH)
    assert gs and all(g["status"] == "not_enough_data" for g in gs)


def test_per_rank_batch_larger_batch_slower_is_not_called_too_small():
    # at 1 rank batch 512 is slower per sample than 256: no "keep >= 512" advice, a "no gain above 256" note
    df = frame([row("strong", 1, 1, samples_per_s=1000.0, batch_per_rank=512),
                row("weak", 1, 1, samples_per_s=3000.0, batch_per_rank=256)])
    (g,) = by_prefix(guidelines(df), "per-rank-batch")
    assert g["numbers"]["falls_off_at_batch"] is None and g["numbers"]["slower_larger_batches"] == [512]
    assert "no gain from going above 256" in g["text"]


def test_noisy_throughput_is_flagged():
    # repeats 1000 and 2000 at 2 ranks: t-based 95% CI half-width = 12.706 * 707.1 / sqrt 2 = 6353 (> 20% of 1500)
    df = frame([row("strong", 1, 1, 0, 1000.0), row("strong", 1, 1, 1, 1000.0),
                row("strong", 1, 2, 0, 1000.0), row("strong", 1, 2, 1, 2000.0)])
    (g,) = by_prefix(guidelines(df), "strong-efficiency")
    assert "caution: noisy" in g["text"] and g["numbers"]["max_ci_half_width_pct"] > 20
    (g,) = by_prefix(guidelines(study()), "strong-efficiency")
    assert "noisy" not in g["text"]
