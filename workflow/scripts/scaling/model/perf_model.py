"""A performance model of one DDP training step, fitted to the measurements, validated on held-out
world sizes, and used to predict beyond them. A model, not a measurement: model.json keeps it apart
from the measured tables, and every prediction carries its held-out error.

    step(p, b, P, link) = compute(b, P) + [p > 1] * exposure_link * ring_link(p, n),  n = grads_bytes

Compute term, per model family (implementation and basis, all widths): the no_sync step time, which
has no gradient all-reduce, as a function of the per-rank batch b and the parameter count P:
    compute(b, P) = c0 + k_b * b + k_bP * b * P        (c0, k_b, k_bP >= 0)
c0 is the fixed cost of a step, k_b the per-sample cost that does not grow with the model, k_bP the
per-sample-per-parameter cost (a KAN's FLOPs per sample grow with its parameters). CPU ranks that
share too few cores time-share them: a step of ranks x threads > cores on one host takes
s = ranks_per_host x threads_per_rank / cores times its compute (s >= 1; s = 1 on GPUs and wherever
the host's core count is unknown, e.g. on Slurm), so compute is fitted to no_sync / s and predicted
as s x compute (4 ranks x 1 thread on 2 cores: s = 2). Ranks that do not time-share still slow each
other (shared caches and memory bandwidth; on the 2-core VM 1.6x at 2 ranks): the all-reduce sweep's
point measures it (kan/probes/corun.py: a fixed KAN kernel's rate alone vs with every rank at once), and
c(k), the slowdown with k = min(ranks_per_host x threads, cores) busy cores divided by its time-sharing
s, multiplies compute like s: compute is fitted to no_sync / (s c(k)) and predicted as s c(k) x compute.
c(k) is the mean over the sweep's points at k, at least 1; c(1) = 1; linear between measured k, held at its value
beyond the largest; c = 1 where the sweep measured none (GPUs, or no sweep). A term the data cannot
separate is left out and the model says so: with one per-rank batch, c0 is not separable from
k_b * b and compute = k_b * b is assumed (proportional to the batch); with one parameter count k_bP
merges into k_b. Relative residuals (prediction / measured - 1), one per ok repeat, so a 1 ms and a
100 ms step weigh alike.

Communication term, per link class (intra-node, inter-node, and simulated inter-node kept apart):
the ring all-reduce of n bytes over p ranks sends 2 (p - 1) messages of n / p bytes per rank, so
    ring(p, n) = 2 (p - 1) * alpha + 2 (p - 1) / p * n * beta
(alpha: latency per message in s; beta: s per byte, 1 / beta the link's bus bandwidth). On CPU
ranks (gloo) the all-reduce is the ranks' own CPU work (copies, sums, socket wake-ups), so ranks that
time-share cores time-share it too: sweep times, exposed comm and predictions carry the same
oversubscription s as the compute term (measured on the 2-core VM: 4 ranks' all-reduce took 1.8x
the ring time predicted from 2 ranks, where s = 2; s = 1 on GPUs and wherever cores are unknown). Two sources:
  (a) the all-reduce sweep (allreduce.csv: time of one all_reduce of size_bytes at each topology):
      alpha and beta by bounded least squares over every ok row, relative residuals (the sizes span
      4 KiB to 64 MiB: small sizes pin alpha, large ones beta);
  (b) the exposed communication of the training points (synced step - no_sync step at the same
      batch): DDP overlaps its bucketed all-reduce with the backward pass, so a step pays only part
      of ring(p, n). With (a) present, one exposure factor per link class is fitted from (b) with
      alpha, beta fixed: exposed = exposure * ring(p, grads_bytes), exposure >= 0 (0: fully hidden;
      > 1: bucketing and hook overheads cost more than one flat all-reduce). Without (a), alpha and
      beta are fitted from (b) directly (exposure = 1: then they are effective, exposed-cost
      parameters, not the wire's), which needs two world sizes > 1 or two gradient sizes per class.
      With (a) but no training point of a class, exposure = 1 is assumed (no overlap: an upper
      bound) and the model says so. World-1 points have no all-reduce (ring(1, n) = 0); their exposed
      comm is noise around zero and is not fitted. Absolute residuals in (b): the values can be <= 0.

Without a no_sync probe (runs imported from elsewhere, docs/import.md): a family's compute is its
non-DDP one-rank step, and a DDP point's cost beyond compute is its step less that compute, which holds
whatever DDP adds, not only the all-reduce. Such a link class gets a per-step DDP cost d beside alpha
and beta: exposed(p) = d + 2 (p - 1) alpha + 2 (p - 1) / p n beta for p > 1, each term fitted only
where the world sizes separate it (beta dropped first, then alpha), and a DDP point is modelled only at
a batch and parameter count a non-DDP run measured. The seed paper's A100 runs need it: 113.6 ms on one
GPU, 142-146 ms at 2 to 8, whether or not the ranks cross nodes; a ring term alone is zero at one rank.

Validation: leave one world size out. For each measured world size p, everything measured at p
(training points and sweep rows) is removed, the whole model refitted, and the step time of every
configuration at p predicted; error = 100 * (predicted - measured) / measured on the mean step time
over repeats. MAPE = mean |error| over all predicted configurations. A MAPE is reported only when
some world size > 1 could be held out and predicted (p = 1 alone does not test the comm term).

Uncertainty: a bootstrap over repeats (resampled within each configuration; sweep repeats resampled
whole, all sizes of one run together), refitting the whole model; parameter CIs and prediction bands
are the 2.5 and 97.5 percentiles. Seed fixed.

Predictions: for the configured strong-scaling work of each model (samples, epochs, and the fixed
global batch or fixed per-rank batch the experiment uses), at powers of two up to
predict_max_factor x the largest measured world size, per link class (intra-node at most
max_gpus_per_node ranks). Steps per epoch = ceil(ceil(samples / p) / b) (DistributedSampler pads
each rank's shard to ceil(samples / p)); time = epochs * steps * step; GPU-hours = p * time / 3600.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common.settings import Settings
from ..common.stats import BOOTSTRAP_SEED
from .ddp_model import ddp_predictions
from .fit import fit_all, resample, training_rows
from .linkcheck import cross_link, link_check
from .predict import one_model
from .terms import corun_summary

def fit_performance_model(df: pd.DataFrame, allreduce: pd.DataFrame, settings: Settings) -> dict:
    """model.json: per model (of the strong experiment) and link class the fitted parameters with
    CIs, the leave-one-world-size-out validation and the predictions; per model a recommendation.
    `df` and `allreduce` are clean frames (columns.clean / clean_allreduce)."""
    num_boot = settings.bootstrap_samples
    train = training_rows(df)
    sweep = allreduce[allreduce["world_size"] > 1] if len(allreduce) else allreduce
    out = {"method": __doc__.strip().split("\n\n")[0], "bootstrap": {"samples": num_boot, "seed": BOOTSTRAP_SEED},
           "allreduce_sweep": ("rows per link class: " + ", ".join(f"{c} {n}" for c, n in
                                                                 sweep["placement_class"].value_counts().items())
                               if len(sweep) else "absent or empty: alpha, beta from the training points' exposed comm"),
           "models": {}}
    # the emulated cluster's links, whose rate is known: does the sweep give it back? (linkcheck.py)
    out["link_check"] = link_check(df, sweep)
    if train.empty:
        out["reason"] = "no ok DDP point with step times"
        return out
    out["cross_link"] = cross_link(train, sweep)
    point = fit_all(train, sweep)
    out["corun"] = corun_summary(point["corun"])
    # the ddp experiment's settings, predicted from their bytes per step and checked against them
    out["ddp_settings"] = ddp_predictions(training_rows(df, defaults_only=False), point)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = [fit_all(*resample(train, sweep, rng)) for _ in range(num_boot)]
    for model in sorted(train["model"].unique()):
        out["models"][model] = one_model(df, train, sweep, model, point, draws, settings.predict_max_factor,
                                         settings.max_gpus_per_node, settings.efficiency_threshold)
    return out
