"""The terms of the performance model (model/perf_model.py describes the model): the ring all-reduce,
the bounded linear least squares every term is fitted with, the compute design, and how ranks share
a host's cores (time-sharing s and the co-run slowdown c(k)). No fitting policy here: model/fit.py
decides what to fit from which rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares


class NotFitted(Exception):
    """The data do not determine a term; the message says what is missing."""


def ring(p, n, alpha, beta):
    p = np.asarray(p, float)
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * np.asarray(n, float) * beta


def bounded_linear(X: np.ndarray, y: np.ndarray, relative: bool) -> tuple[np.ndarray, list[bool]]:
    """x >= 0 minimising sum((X x / y - 1)^2) (relative) or sum((X x - y)^2), by
    scipy.optimize.least_squares; and which x sit at the bound 0. The problem is solved in scaled
    units, z_j = x_j * max|X_j| / mean|y| (each term's largest contribution in units of a typical y),
    so that "at the bound" means the same for a 20 us latency and a 1e-10 s/byte inverse bandwidth:
    z_j < 1e-6, a term worth less than a millionth of a typical measurement."""
    col = np.maximum(np.abs(X).max(axis=0), 1e-300)
    ys = float(np.mean(np.abs(y))) or 1.0
    Xn = X / col * ys
    if relative:
        fun = lambda z: Xn @ z / y - 1  # noqa: E731
    else:
        fun = lambda z: (Xn @ z - y) / ys  # noqa: E731
    z0 = np.linalg.lstsq(Xn, y, rcond=None)[0].clip(min=1e-3)
    z = least_squares(fun, z0, bounds=(0, np.inf), method="trf").x
    return z * ys / col, [bool(v < 1e-6) for v in z]


def full_rank(cols: np.ndarray) -> bool:
    scaled = cols / np.maximum(np.abs(cols).max(axis=0), 1e-300)
    return np.linalg.matrix_rank(scaled, tol=1e-9) == cols.shape[1]


def compute_design(b, P, terms) -> np.ndarray:
    cols = {"c0_s": np.ones_like(b), "per_sample_s": b, "per_sample_param_s": b * P}
    return np.column_stack([cols[t] for t in terms])


def compute_time(fit: dict, b, P) -> np.ndarray:
    b, P = np.asarray(b, float), np.asarray(P, float)
    return compute_design(np.atleast_1d(b), np.atleast_1d(P), fit["terms"]) @ fit["x"]


def ring_design(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.column_stack([2 * (p - 1), 2 * (p - 1) / p * n])


def oversubscription(device, ranks_per_host, threads, cores) -> np.ndarray:
    """s >= 1: how many times over the ranks' threads share a host's cores (1 on GPUs, or unknown)."""
    ranks, threads, cores = (np.asarray(x, float) for x in (ranks_per_host, threads, cores))
    s = np.where(np.isfinite(cores) & (cores > 0), ranks * np.nan_to_num(threads, nan=1.0) / cores, 1.0)
    return np.where(np.asarray(device, object) == "cpu", np.maximum(s, 1.0), 1.0)


def busy_cores(device, ranks_per_host, threads, cores) -> np.ndarray:
    """k = min(ranks x threads, cores) on CPU hosts of known core count, else NaN (no co-run factor)."""
    ranks, threads, cores = (np.asarray(x, float) for x in (ranks_per_host, threads, cores))
    k = np.minimum(ranks * np.nan_to_num(threads, nan=1.0), cores)
    return np.where((np.asarray(device, object) == "cpu") & np.isfinite(cores) & (cores > 0), k, np.nan)


def sweep_hosts(ar: pd.DataFrame) -> tuple:
    """(device, ranks per host, threads per rank, cores) of each sweep row; NaN where its file
    predates the host facts."""
    col = lambda c: ar[c] if c in ar else pd.Series(np.nan, index=ar.index)  # noqa: E731
    hosts = col("num_hosts").fillna(ar["nodes"]).clip(lower=1)
    return col("device_type"), ar["world_size"] / hosts, col("threads_per_rank"), col("host_cpus")


def sweep_oversub(ar: pd.DataFrame) -> np.ndarray:
    """The oversubscription of each sweep row (1 where its file predates the host facts)."""
    return oversubscription(*sweep_hosts(ar))


def corun_curve(sweep: pd.DataFrame) -> dict[int, float]:
    """busy cores k -> c(k), the co-run slowdown without its time-sharing: per sweep point (a point's
    rows repeat its value once per size) slowdown / s, the mean per k (the model predicts mean step
    times, and on the 2-core VM the slowdown is bimodal, 1.0 or 1.65 at 2 ranks); c(1) = 1, and
    c(k) >= 1: ranks running together are never faster than alone, a mean below 1 is noise."""
    if "corun_slowdown" not in sweep or "host_cpus" not in sweep:
        return {}
    pts = sweep[sweep["corun_slowdown"].notna() & (sweep["corun_slowdown"] > 0) & sweep["host_cpus"].notna()]
    pts = pts.drop_duplicates("point_id") if "point_id" in pts else pts
    if pts.empty:
        return {}
    per_point = pd.Series(pts["corun_slowdown"].to_numpy(float) / sweep_oversub(pts))
    c = per_point.groupby(busy_cores(*sweep_hosts(pts))).mean()
    return {1: 1.0, **{int(b): max(float(v), 1.0) for b, v in c.items() if np.isfinite(b) and b > 1}}


def corun_factor(curve: dict[int, float], busy) -> np.ndarray:
    """c(k) at each busy-core count (1 where k is unknown or nothing was measured)."""
    busy = np.atleast_1d(np.asarray(busy, float))
    if len(curve) < 2:
        return np.ones_like(busy)
    ks = sorted(curve)
    c = np.interp(busy, ks, [curve[k] for k in ks])  # held at the ends: c(k > max k) = c(max k)
    return np.where(np.isfinite(busy), c, 1.0)


def corun_summary(curve: dict[int, float]) -> dict:
    """model.json's account of c(k): the measured values, or why compute carries none."""
    measured = {str(k): round(v, 4) for k, v in sorted(curve.items()) if k > 1}
    if not measured:
        return {"curve": {}, "text": "not measured (GPU ranks, or no all-reduce sweep of CPU ranks): c = 1, "
                                     "ranks slow each other only by time-sharing cores"}
    return {"curve": measured, "text": "co-run slowdown from the all-reduce sweep's points (kan/probes/corun.py): " + ", ".join(
        f"c({k}) = {v:.2f}" for k, v in measured.items()) + " with k busy cores (time-sharing divided out)"}
