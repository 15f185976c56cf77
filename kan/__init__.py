"""kanscale's KAN and its trainer (`python -m kan.train`): the model and the training loop at the top,
everything else in four subpackages.

The model
    layers.py        KANLinear: the B-spline (and RBF, Chebyshev) KAN layer, a pure nn.Module
    models.py        KAN, the MLP baselines, build_model (a built-in name or your own factory)
The trainer
    train.py         the entry point: a point's flags -> process group -> loop -> one JSON record
    loop.py          the measured training loop of one rank
    rank_summary.py  rank 0 folds every rank's measurements into the record's figures
    distributed.py   the process group and a rank's device
    ddp_wrap.py      the model under DDP with the point's DDP settings (hooks, buckets, static graph)
    graphs.py        training.cuda_graphs: the step captured once and replayed
    lr.py            the rate a point trains at (scaling with the batch, warm-up)
    env.py           the only reader of the process environment (rank layout, Slurm, flags)
    progress.py      rank 0's progress lines
    metrics.py       step-time summaries, peak memory, provenance
    startup.py       the one-time costs, each by name (timing.startup_s)
Subpackages
    contract/        what a point is, torch-free: Point and its sections, field metadata, the command
                     line, the record's writer and reader, users' model factories
    data/            a point's data as tensors: synthetic, Feynman equations, users' tables; sharding
    kernels/         the B-spline layer's kernels: eager PyTorch, numba (CPU), Triton (CUDA), a switch
    probes/          measurements beside the loop: step anatomy, kernel choice, co-run slowdown,
                     all-reduce sweep, DDP readiness, capture check, a user factory's plan-time check

The workflow's warm-start server, which forks trainers, lives with the launcher
(workflow/scripts/launch/warm_server.py). Modules inside kan/ import each other relatively, so the
package also loads under another name (workflow/scripts/pykan_train.py loads it as `kanscale`).
The model classes are loaded on first use (PEP 562), so that `kan.contract` and `kan.env` import
without torch: the launcher and the workflow use them in processes that must start fast.
"""

__all__ = ["KAN", "KANLinear", "MLP", "build_model"]


def __getattr__(name: str):
    if name == "KANLinear":
        from .layers import KANLinear

        return KANLinear
    if name in ("KAN", "MLP", "build_model"):
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module 'kan' has no attribute {name!r}")
