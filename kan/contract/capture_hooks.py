"""Which DDP comm hooks may run inside a CUDA-graph captured step: one rule for the planner (which
leaves the others out of the ddp experiment) and the trainer (which refuses them on its command line)."""

from __future__ import annotations

# DDP comm hooks known to run inside a captured step. A hook's Python runs once, while the step is
# captured, and a replay re-runs only the kernels it launched then: PowerSGD's decompress calls
# torch.cuda.synchronize (illegal while capturing) and rebinds its per-bucket error-feedback tensor
# in Python, so even without the sync every replay would reuse the error frozen at capture; fp16
# and bf16 finish in a future's `.then` callback that no CUDA test here has shown to be captured.
# A hook joins this tuple when a CUDA test shows a captured step with it trains as the eager one.
CAPTURE_SAFE_HOOKS = ("none",)
CAPTURE_UNSAFE_WHY = {
    "powersgd": "PowerSGD synchronises the device inside its hook (illegal while capturing) and keeps "
                "per-bucket error state in Python that a replay would freeze",
}
NOT_SHOWN_WHY = "no CUDA test has shown the hook runs inside a captured step"


def capture_conflict(setting: dict) -> str | None:
    """Why a ddp setting (TrainConfig fields) cannot run under CUDA-graph capture; None if it can or
    does not capture."""
    if not setting["cuda_graphs"] or setting["comm_hook"] in CAPTURE_SAFE_HOOKS:
        return None
    return CAPTURE_UNSAFE_WHY.get(setting["comm_hook"], NOT_SHOWN_WHY)


def capture_refusal(cuda_graphs: bool, comm_hook: str) -> str | None:
    """The trainer's error for a hook that cannot run under capture (None: it can, or nothing is captured)."""
    why = capture_conflict({"cuda_graphs": cuda_graphs, "comm_hook": comm_hook})
    return None if why is None else (f"{comm_hook} cannot run under CUDA-graph capture (training.cuda_graphs): "
                                     f"{why}; allowed under capture: {', '.join(CAPTURE_SAFE_HOOKS)}")
