"""Measurements and checks of a model, each recorded by name: beside the training loop, except the
last, which the plan runs before any point.

    anatomy.py        what bounds a step: fixed cost, cost per sample, the operators it dispatches
    kernel_choice.py  which B-spline kernels a point's steps run (Triton only where it wins), and why
    corun.py          how much slower a CPU rank computes while the other ranks of its node do too
    allreduce.py      the `allreduce` experiment: all_reduce timed over a sweep of sizes
    readiness.py      is a model ready for DDP and for CUDA graphs: checks on the real process group
    capture.py        can a training step be captured as one CUDA graph (on meta or the device)
    capture_watch.py  what the capture check watches: every aten call, in a dispatch mode
    factory_check.py  the plan's check of a user's factory, in a child process with a time limit
"""
