"""Scaling laws fitted within their domains: Amdahl and the Universal Scalability Law to strong-scaling
speedup, Gustafson and the USL to weak-scaling scaled speedup.

    Amdahl      S(p) = 1 / (f + (1 - f) / p)              f in [0, 1]   (serial fraction)
    Gustafson   S(p) = p - a (p - 1)                      a in [0, 1]   (serial fraction of the scaled run)
    USL         S(p) = p / (1 + s (p - 1) + k p (p - 1))  s, k >= 0     (contention, coherency)

Amdahl and Gustafson cannot describe a speedup that falls as p grows; the USL can (k > 0 puts a
peak at p* = sqrt((1 - s) / k)). Each law is fitted by bounded least squares
(scipy.optimize.least_squares, method "trf") with one residual per ok repeat: the repeat's throughput
over the mean throughput of the baseline (the smallest DDP world size of the experiment, normally one
rank) minus the law at p / p_base. Parameter 95% CIs are the 2.5 and 97.5 percentiles of a bootstrap
that resamples repeats within each world size (baseline included, so its spread counts) and refits;
the seed is fixed, so the same data give the same interval.

A fit needs 3 or more distinct world sizes (the baseline counts): with two, a one-parameter law
passes through both and a two-parameter law is exact, so the fit would say nothing about the law.
Non-DDP points never enter: they have no gradient all-reduce, so they are not a world size of the
DDP curve. Each placement class is its own curve, with the baseline as its p = 1 point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ..common.columns import SINGLE
from ..common.fmt import interval
from ..common.stats import BOOTSTRAP_SEED

MIN_WORLD_SIZES = 3
BOUND_TOL = 1e-6


@dataclass(frozen=True)
class Law:
    name: str
    formula: str
    params: tuple[str, ...]  # JSON keys
    symbols: tuple[str, ...]  # as printed
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    start: tuple[float, ...]  # strictly inside the bounds, as "trf" requires

    def __call__(self, p: np.ndarray, x: np.ndarray) -> np.ndarray:
        if self.name == "amdahl":
            return 1.0 / (x[0] + (1.0 - x[0]) / p)
        if self.name == "gustafson":
            return p - x[0] * (p - 1.0)
        return p / (1.0 + x[0] * (p - 1.0) + x[1] * p * (p - 1.0))


AMDAHL = Law("amdahl", "S = 1 / (f + (1 − f) / p)", ("f",), ("f",), (0.0,), (1.0,), (0.1,))
GUSTAFSON = Law("gustafson", "S = p − a (p − 1)", ("a",), ("a",), (0.0,), (1.0,), (0.1,))
USL = Law("usl", "S = p / (1 + σ (p − 1) + κ p (p − 1))", ("sigma", "kappa"), ("σ", "κ"), (0.0, 0.0),
          (math.inf, math.inf), (0.05, 0.001))
LAWS_BY_EXPERIMENT = {"strong": (AMDAHL, USL), "weak": (GUSTAFSON, USL)}


def not_enough(num_world_sizes: int) -> str:
    return f"not enough world sizes to fit (have {num_world_sizes}, need {MIN_WORLD_SIZES})"


def fit_law(law: Law, p, speedup) -> np.ndarray:
    """Bounded least-squares parameters of `law` over the (p, speedup) pairs."""
    p, s = np.asarray(p, float), np.asarray(speedup, float)
    res = least_squares(lambda x: law(p, x) - s, np.array(law.start), bounds=(law.lower, law.upper), method="trf")
    return res.x


def at_bound(law: Law, i: int, value: float) -> str | None:
    """'σ at its lower bound 0' when the fit stopped at a bound (the data push past it)."""
    for bound, side in ((law.lower[i], "lower"), (law.upper[i], "upper")):
        if math.isfinite(bound) and abs(value - bound) <= BOUND_TOL * max(1.0, abs(bound)):
            return f"{law.symbols[i]} at its {side} bound {bound:g}"
    return None


def throughput_curves(df: pd.DataFrame, experiment: str, model: str) -> dict[str, dict[int, np.ndarray]]:
    """{placement class: {world size: throughputs of the ok repeats}} for the DDP points of one
    experiment and model; every class's curve starts at the baseline (the smallest DDP world size)."""
    sub = df[(df["experiment"] == experiment) & (df["model"] == model) & (df["status"] == "ok")
             & df["ddp"].astype(bool) & df["samples_per_s"].notna()]
    if sub.empty:
        return {}
    base_p = int(sub["world_size"].min())
    base = sub[sub["world_size"] == base_p]["samples_per_s"].to_numpy(float)
    classes = sorted(set(sub.loc[sub["world_size"] > base_p, "placement_class"]))
    out = {}
    for cls in classes or [SINGLE]:
        cur = {base_p: base}
        for p, g in sub[(sub["placement_class"] == cls) & (sub["world_size"] > base_p)].groupby("world_size"):
            cur[int(p)] = g["samples_per_s"].to_numpy(float)
        out[cls] = cur
    return out


def _pairs(curve: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(p / p_base, repeat throughput / baseline mean) for every repeat."""
    base_p = min(curve)
    base = float(np.mean(curve[base_p]))
    ps = np.concatenate([np.full(len(v), p / base_p) for p, v in sorted(curve.items())])
    ss = np.concatenate([v / base for _, v in sorted(curve.items())])
    return ps, ss


def fit_curve(law: Law, curve: dict[int, np.ndarray], num_boot: int, seed: int = BOOTSTRAP_SEED) -> dict:
    """One law on one curve: parameters with bootstrap CIs, at-bound notes, or why it cannot be fitted."""
    sizes = sorted(curve)
    out = {"law": law.name, "formula": law.formula, "world_sizes": sizes, "baseline_world_size": sizes[0]}
    if len(sizes) < MIN_WORLD_SIZES:
        return {**out, "status": "not_enough_data", "reason": not_enough(len(sizes))}
    ps, ss = _pairs(curve)
    x = fit_law(law, ps, ss)
    resid = law(ps, x) - ss
    params = {}
    for i, (key, sym) in enumerate(zip(law.params, law.symbols)):
        params[key] = {"symbol": sym, "value": float(x[i]), "ci_lo": None, "ci_hi": None,
                       "at_bound": at_bound(law, i, float(x[i]))}
    out.update(status="fit", num_residuals=int(len(ss)), rmse=float(np.sqrt(np.mean(resid ** 2))), params=params)
    thin = [p for p in sizes if len(curve[p]) < 2]
    if thin:
        out["ci_reason"] = (f"no CI: world size{'s' if len(thin) > 1 else ''} {', '.join(map(str, thin))} "
                            f"{'have' if len(thin) > 1 else 'has'} one ok repeat, so there is no "
                            f"spread to resample")
    else:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(num_boot):
            resampled = {p: rng.choice(v, size=len(v), replace=True) for p, v in curve.items()}
            draws.append(fit_law(law, *_pairs(resampled)))
        draws = np.array(draws)
        for i, key in enumerate(law.params):
            lo, hi = np.percentile(draws[:, i], [2.5, 97.5])
            params[key]["ci_lo"], params[key]["ci_hi"] = float(lo), float(hi)
        out["bootstrap"] = {"samples": num_boot, "seed": seed, "resampled": "repeats within each world size"}
    if law is USL and params["kappa"]["value"] > 0 and params["sigma"]["value"] < 1:
        # dS/dp = 0 at p* = sqrt((1 - s) / k): beyond it the USL speedup falls
        out["peak_world_size_rel"] = math.sqrt((1 - params["sigma"]["value"]) / params["kappa"]["value"])
    return out


def fits(df: pd.DataFrame, num_boot: int = 500) -> dict:
    """{'method': ..., 'strong': {model: {placement: {law: fit}}}, 'weak': {...}} over clean measurements."""
    out: dict = {"method": {"min_world_sizes": MIN_WORLD_SIZES, "bootstrap_samples": num_boot, "seed": BOOTSTRAP_SEED,
                            "residuals": "one per ok repeat: repeat throughput / baseline mean − law(p / p_base)",
                            "excluded": "non-DDP points (no all-reduce) and every status other than ok"}}
    for experiment, laws in LAWS_BY_EXPERIMENT.items():
        sub = df[df["experiment"] == experiment]
        per_model = {}
        for model in sorted(sub["model"].dropna().unique()):
            curves = throughput_curves(df, experiment, model)
            if curves:
                per_model[model] = {cls: {law.name: fit_curve(law, c, num_boot) for law in laws}
                                    for cls, c in curves.items()}
        out[experiment] = per_model
    return out


def fit_text(fit: dict) -> str:
    """One line for the report: 'σ = 0.041 [0.020, 0.060], κ at its lower bound 0' or the reason."""
    if fit.get("status") != "fit":
        return fit.get("reason", "not fitted")
    parts = []
    for prm in fit["params"].values():
        if prm["at_bound"]:
            parts.append(prm["at_bound"])
            continue
        txt = f"{prm['symbol']} = {interval(prm['value'], prm['ci_lo'], prm['ci_hi'])}"
        parts.append(txt)
    return ", ".join(parts)
