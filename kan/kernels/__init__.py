"""The B-spline KAN layer's kernels (kan/layers.py picks one per call).

    eager_bspline.py   pure PyTorch: every order, device and dtype (the reference)
    numba_bspline.py   fused CPU kernels for the cubic spline, one pass per direction (optional)
    triton_bspline.py  fused CUDA kernels for the cubic spline (optional; TRITON_INTERPRET=1 on a CPU)
    switch.py          an on/off switch for an optional path (tests and A/B benchmarks)
"""
