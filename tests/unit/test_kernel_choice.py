"""Triton only where it wins (kan/probes/kernel_choice.py): the faster timed path is chosen
and the record says which ran and why; on a CPU no choice is timed; the anatomy table names the
path. On CUDA (skipped without one) the choice is timed, recorded, and leaves the model as it was."""

import pytest
import torch
import torch.nn.functional as F

from kan.kernels import triton_bspline
from kan.probes import kernel_choice
from kan.contract import record as records
from kan import train
from kan.contract.point import ModelConfig
from kan.models import build_model


def test_the_faster_median_wins_and_says_why():
    slow = kernel_choice.decide(triton_ms=2.6, eager_ms=2.0, batch=512)
    assert slow["path"] == "eager" and slow["timed_ms"] == {"triton": 2.6, "eager": 2.0}
    assert "0.77x eager's speed, so eager runs" in slow["why"] and "per-rank batch 512" in slow["why"]
    fast = kernel_choice.decide(triton_ms=1.0, eager_ms=3.0, batch=16384)
    assert fast["path"] == "triton" and "3.00x" in fast["why"]
    assert kernel_choice.decide(1.0, 1.0, 64)["path"] == "eager"  # a tie keeps the path with fewer moving parts


def test_only_cubic_bspline_layers_have_a_fused_path():
    assert kernel_choice.fused_layers(build_model(ModelConfig(widths=(2, 8, 1)), 0)) == 2
    assert kernel_choice.fused_layers(build_model(ModelConfig(widths=(2, 8, 1), spline_order=2), 0)) == 0
    assert kernel_choice.fused_layers(build_model(ModelConfig(widths=(2, 8, 1), impl="mlp"), 0)) == 0


@pytest.mark.parametrize("impl, want", [("kanscale", "numba"), ("mlp", "eager")])
def test_a_cpu_records_path_is_untimed_and_named(tmp_path, impl, want):
    pytest.importorskip("numba")
    out = tmp_path / "r.json"
    assert train.main([f"--impl={impl}", "--widths=2,8,1", "--grid-size=5", "--samples=1024", "--batch-per-rank=64",
                       "--warmup-steps=2", "--epochs=1", "--device=cpu", "--out", str(out)]) == 0
    k = records.read(out)["kernels"]
    assert k["path"] == want and k["timed_ms"] is None
    assert ("numba" in k["why"]) if want == "numba" else ("nothing to fuse" in k["why"])


def test_the_anatomy_table_names_the_kernels_and_a_captured_step():
    import pandas as pd

    from scaling.tables.anatomy_table import anatomy_table

    base = {"status": "ok", "ddp": True, "nodes": 1, "link_mbit": 0.0, "hidden_width": 64, "ddp_setting": "none",
            "placement": "1x1", "placement_class": "single-rank", "global_batch": 128, "samples": 8192, "epochs": 1,
            "grid_size": 10, "ops_per_step": 120.0, "gpu_busy_pct": None, "experiment": "strong", "world_size": 1,
            "gpus_per_node": 1, "batch_per_rank": 128, "step_time_s": 0.0023, "fixed_step_ms": 2.0,
            "per_sample_us": 2.0, "exposed_comm_s": 0.0}
    df = pd.DataFrame([{**base, "model": "kan", "rep": 0, "kernel_path": "eager", "step_kind": "captured"},
                       {**base, "model": "kan", "rep": 1, "kernel_path": "eager", "step_kind": "captured"},
                       {**base, "model": "old", "rep": 0}])
    t = anatomy_table(df).set_index("model")
    assert t.loc["kan", "kernels"] == "eager + graph" and pd.isna(t.loc["old", "kernels"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: there is no Triton choice to time")
def test_the_cuda_choice_is_timed_recorded_and_undone():
    device = torch.device("cuda")
    model = build_model(ModelConfig(widths=(2, 64, 1), grid_size=10), 0).to(device)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.rand(512, 2, device=device) * 2 - 1, torch.rand(512, 1, device=device)
    try:
        k = kernel_choice.choose(model, model, F.mse_loss, x, y, 1e-3, device, ddp=False)
        assert k["path"] in ("triton", "eager") and set(k["timed_ms"]) == {"triton", "eager"}
        assert triton_bspline.available() == (k["path"] == "triton")
        assert all(torch.equal(before[n], v) for n, v in model.state_dict().items())
    finally:
        triton_bspline.set_enabled(True)
