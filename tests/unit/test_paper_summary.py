"""benchmarks/paper_summary.py: the device check's eager-against-captured table names what differs
between the two runs besides capture and shows no eager-profiled number as the replay's own."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import paper_summary  # noqa: E402  (a script beside the benchmarks, not an installed module)

EAGER = {"status": "ok", "cuda_graphs": False, "step_ms": 1.2, "steps": 7840, "steps_per_epoch": 196,
         "probe_every": 2, "optimizer": "Adam(fused=True)", "train_time_s": 10.0, "test_loss": 0.0100, "epochs": 40,
         "anatomy": {"ops_per_step": 420, "ops_kind": "kernels", "bound": "dispatch"}, "kernels": {"path": "eager"}}
CAPTURED = {"status": "ok", "cuda_graphs": True, "step_ms": 0.3, "steps": 7800, "steps_per_epoch": 195,
            "probe_every": 0, "optimizer": "Adam(capturable=True), its rate a device tensor", "train_time_s": 2.4,
            "test_loss": 0.0101, "epochs": 40,
            "anatomy": {"ops_per_step": None, "eager_ops_per_step": 420, "ops_kind": "kernels", "bound": "dispatch"},
            "kernels": {"path": "triton", "why": "timed", "timed_as": "eager steps, launches included"}}


def test_every_difference_besides_capture_is_named_and_steps_compared_like_with_like():
    lines = paper_summary.verdicts(EAGER, CAPTURED)
    text = "\n".join(lines)
    assert "drops the partial batch (195 steps an epoch against 196)" in text
    assert "optimizer Adam(capturable=True)" in text and "Adam(fused=True) eager" in text
    assert "one eager step in 2 is a comm probe" in text
    assert "training time per step (like with like): eager 1.276 ms, captured 0.308 ms (4.1x)" in text


def test_a_captured_row_says_its_kernel_count_is_the_eager_steps():
    row = paper_summary.row("captured", CAPTURED)
    assert "one graph launch (the eager step it replays: 420 kernels)" in row and "None" not in row
    assert "420 kernels" in paper_summary.row("eager", EAGER)
