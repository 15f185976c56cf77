"""A captured step's anatomy (training.cuda_graphs) says what it measured and nothing more: its
all-reduce runs inside the graph, unprobed, so its communication is "not measured" (never 0), its
dispatch is the rest of the replayed step with the all-reduce in it, its bound is compute or undecided
on more than one rank, and nothing tells it to capture a step that is captured. The GPU's busy share
is taken over the profiled step's own events, not the profiler's start and stop."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from kan.probes import anatomy

# eager line: 3 ms fixed + 1 us a sample (b = 16 and 64)
RAW = {"batches": [16, 64], "step_s": [0.003016, 0.003064], "ops_per_step": 400, "ops_kind": "k", "gpu_busy_pct": 3.0}


@pytest.mark.parametrize("compute,rest,ranks,want", [
    (0.064, 0.036, 2, "compute"),     # compute beats the whole rest: whatever its split, compute is largest
    (0.064, 0.2, 2, "undecided"),     # the rest could be all dispatch or all all-reduce
    (0.064, 0.2, 1, "dispatch"),      # one rank: nothing to all-reduce, the rest is dispatch
    (0.3, 0.2, 1, "compute"),
])
def test_a_captured_bound_is_compute_or_undecided_on_more_than_one_rank(compute, rest, ranks, want):
    assert anatomy.captured_bound(compute, rest, ranks) == want


def test_a_captured_records_communication_is_not_measured_and_its_bound_not_guessed():
    a = anatomy.summarize([RAW, RAW], step_s=0.0003, exposed_s=None, captured=True)  # two ranks
    assert a["parts_ms"]["communication"] is None
    assert a["parts_ms"]["dispatch"] == pytest.approx(0.3 - 0.064) and a["bound"] == "undecided"
    assert "the rest of the replayed step, the all-reduce included" in a["rule"]
    assert anatomy.summarize([RAW], step_s=0.0003, exposed_s=None, captured=True)["bound"] == "dispatch"


def _rows(step_ms, ranks=2, reps=2, kind="captured"):
    base = {"status": "ok", "ddp": True, "nodes": 1, "link_mbit": 0.0, "hidden_width": 64, "ddp_setting": "none",
            "placement": f"1x{ranks}", "placement_class": "single-node", "global_batch": 64 * ranks, "samples": 8192,
            "epochs": 1, "grid_size": 10, "ops_per_step": 1.0, "gpu_busy_pct": 40.0, "experiment": "strong",
            "model": "kan", "world_size": ranks, "gpus_per_node": ranks, "batch_per_rank": 64,
            "kernel_path": "eager", "step_kind": kind}
    # compute 64 x 1 us = 0.064 ms; dispatch = the rest of the replayed step; no probe: exposed unknown
    return pd.DataFrame([{**base, "rep": i, "step_time_s": step_ms / 1e3, "fixed_step_ms": step_ms - 0.064,
                          "per_sample_us": 1.0, "exposed_comm_s": None} for i in range(reps)])


def test_a_captured_rows_table_has_no_zero_communication():
    from scaling.tables.anatomy_table import anatomy_table

    (r,) = [r for _, r in anatomy_table(_rows(0.3)).iterrows()]
    assert bool(r["captured"]) and pd.isna(r["communication_ms"]) and r["communication_ms"] != 0.0
    assert r["bound"] == "undecided" and r["n_agree"] == 2 and r["kernels"] == "eager + graph"
    assert r["other_ms"] == pytest.approx(0.0)
    (r,) = [r for _, r in anatomy_table(_rows(0.05)).iterrows()]  # compute 0.064 > rest 0.05 - 0.064 < 0
    assert r["bound"] == "compute"
    eager = anatomy_table(_rows(0.3, kind="eager").assign(exposed_comm_s=0.0001)).iloc[0]
    assert not eager["captured"] and eager["communication_ms"] == pytest.approx(0.1) and eager["bound"] == "dispatch"


def test_a_captured_steps_guideline_and_section_give_no_capture_advice():
    from scaling.decide.rules import Decide
    from scaling.decide.stepbound import cite_bound, step_bound
    from scaling.report.anatomy_section import anatomy_context
    from scaling.tables.anatomy_table import anatomy_table

    table = anatomy_table(_rows(0.3))
    (g,) = step_bound(table, Decide(2, 0.95))
    assert g["status"] == "inconclusive" and g["numbers"]["bound"] == "undecided", g
    assert g["numbers"]["communication_ms"] is None and g["numbers"]["captured"] is True
    assert "capture the step" not in g["text"] and "0.000 ms exposed all-reduce" not in g["text"]
    assert "rest of the replayed step, the all-reduce included" in g["text"]
    assert "the all-reduce not measured" in g["text"] and "raise the per-rank batch" in g["text"]
    ctx = anatomy_context(table, {}, None)
    assert ctx["rows"][0][7] == "not measured" and "capture the step" not in ctx["words"][0]

    # one rank, captured and dispatch-bound: advice, and it is to raise the batch, not to capture
    (g,) = step_bound(anatomy_table(_rows(0.3, ranks=1)), Decide(2, 0.95))
    assert g["status"] == "advice" and g["numbers"]["bound"] == "dispatch"
    assert "capture the step" not in g["text"] and "already captured" in g["text"]
    assert "raise the per-rank batch" in g["text"]
    deploy = {"id": "deploy-kan", "status": "advice", "text": "kan: fastest 1 rank.", "numbers": {}}
    (_, d) = cite_bound([g, deploy], None)
    assert "dispatch-bound" in d["text"] and "capture the step" not in d["text"], d["text"]


def _event(kind, start_us, end_us):
    device = torch.autograd.DeviceType.CUDA if kind == "cuda" else torch.autograd.DeviceType.CPU
    return SimpleNamespace(device_type=device, time_range=SimpleNamespace(start=start_us, end=end_us))


def test_gpu_busy_is_over_the_profiled_steps_own_events():
    # the profiler started 5 ms before the step's first operator and stopped long after its last: the
    # step runs from 5000 to 6000 us, with kernels busy 300 + 200 us of it
    events = [_event("cpu", 5000, 5900), _event("cuda", 5100, 5400), _event("cuda", 5700, 5900),
              _event("cpu", 5950, 6000), _event("cpu", 5500, 5500)]  # an instant marker
    assert anatomy.gpu_busy(events) == (2, pytest.approx(50.0))
    assert anatomy.gpu_busy([_event("cpu", 0, 10)]) == (0, None)


def test_a_captured_record_shows_no_eager_profile_as_its_own_and_flags_a_clamp():
    """The operator count and the GPU's busy share were profiled on the eager step: a captured record
    keeps them under eager_ names only; its compute says it is the eager line's; a replayed step
    shorter than the eager compute is a clamped dispatch, flagged, not a silent 0."""
    a = anatomy.summarize([RAW], step_s=0.0003, exposed_s=None, captured=True)
    assert a["ops_per_step"] is None and a["gpu_busy_pct"] is None
    assert a["eager_ops_per_step"] == 400 and a["eager_gpu_busy_pct"] == 3.0
    assert "eager step's line" in a["compute_from"] and a["dispatch_clamped"] is False
    short = anatomy.summarize([RAW], step_s=0.00005, exposed_s=None, captured=True)  # 0.05 ms < 0.064 ms compute
    assert short["dispatch_clamped"] is True and short["parts_ms"]["dispatch"] == 0.0
    eager = anatomy.summarize([RAW], step_s=0.0031, exposed_s=0.0, captured=False)
    assert eager["ops_per_step"] == 400 and "dispatch_clamped" not in eager and "eager_ops_per_step" not in eager


def test_the_section_labels_a_captured_rows_compute_and_its_clamp():
    from scaling.report.anatomy_section import anatomy_context
    from scaling.tables.anatomy_table import anatomy_table

    rows = _rows(0.05).assign(ops_per_step=None, gpu_busy_pct=None, dispatch_clamped=True)
    ctx = anatomy_context(anatomy_table(rows), {}, None)
    (row,) = ctx["rows"]
    cells = dict(zip(ctx["headers"], row))
    assert cells["compute (ms)"].endswith("(eager line)") and "clamped" in cells["dispatch (ms)"]
    assert cells["operators / step"] == "" and cells["GPU busy"] == ""
