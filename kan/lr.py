"""The learning rate a point trains with (training.lr_scaling, lr_reference_batch, lr_warmup_samples).

`training.lr` is the rate at a reference global batch: by default the global batch of the same
experiment's one-rank point (its batch_per_rank, or a strong study's global_batch), or the study's
`training.lr_reference_batch`. A point of another global batch trains with

    none    lr                                     (the default: every point trains with lr)
    linear  lr x (global batch / reference batch)  (Goyal et al. 2017, "Accurate, Large Minibatch SGD")
    sqrt    lr x sqrt(global / reference)          (Krizhevsky 2014; Hoffer et al. 2017)

e.g. batch 512 per rank x 8 ranks = 4096 global against the one-rank 512: linear gives lr x 8,
sqrt lr x 2.83. Neither rule holds past the critical batch (McCandlish et al. 2018).

Warm-up (Goyal et al.'s gradual warm-up, counted in samples like their 5 epochs): the step that
brings the samples seen by all ranks to s trains with rate x min(1, s / lr_warmup_samples), a
linear ramp from about 0 to the scaled rate; the same samples at every world size, so a larger global
batch warms up in fewer steps. No torch import: the record and the plan read these rules too.
"""

from __future__ import annotations

import math

LR_SCALINGS = ("none", "linear", "sqrt")


def scaled_lr(lr: float, scaling: str, global_batch: int, reference_batch: int) -> float:
    """`lr` (the rate at `reference_batch`) for a point of `global_batch` under `scaling`."""
    if scaling == "none":
        return lr
    ratio = global_batch / reference_batch
    if scaling == "linear":
        return lr * ratio
    if scaling == "sqrt":
        return lr * math.sqrt(ratio)
    raise ValueError(f"training.lr_scaling: {scaling!r} is not allowed; allowed values: {', '.join(LR_SCALINGS)}")


def warmup_factor(samples_after_step: int, warmup_samples: int) -> float:
    """The share of the scaled rate a step trains with, given the samples seen (all ranks) once it
    is done: a linear ramp over `warmup_samples` (0 = no ramp: 1.0)."""
    if warmup_samples <= 0:
        return 1.0
    return min(1.0, samples_after_step / warmup_samples)


def warmup_steps(warmup_samples: int, global_batch: int) -> int:
    """Steps that train below the scaled rate: ceil(warmup samples / global batch) less the one
    that reaches it (full batches), e.g. 4096 warm-up samples at a global batch of 1024 = steps
    0, 1, 2 at 1/4, 2/4, 3/4; step 3 at the full rate."""
    return max(0, math.ceil(warmup_samples / global_batch) - 1) if warmup_samples > 0 else 0
