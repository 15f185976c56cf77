"""Summary statistics over repeats: mean, median, std and a Student-t confidence interval, 95% unless
a caller asks for another level (the guidelines' deciding intervals: 1 - alpha / looks, see
decide/sequential.py).

The two-sided 97.5% quantiles of Student's t for small degrees of freedom are tabulated
(values from any t-table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2) and fall back to the normal 1.96;
other levels come from scipy's t distribution.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# every bootstrap (the law fits, the performance model) draws from this seed: the same data give the
# same interval
BOOTSTRAP_SEED = 0
# t_{0.975, df}: the half-width of a two-sided 95% interval is t * s / sqrt(n), df = n - 1
T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}


def known(x) -> bool:
    """A value we have: not None, not NaN (a CSV's empty cell reads back as NaN)."""
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def as_number(v) -> float | None:
    """v as a float; None when it is no number or NaN (a CSV cell, a JSON null, a missing key)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom (conservative between rows)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df in T975:
        return T975[df]
    larger = [k for k in T975 if k > df]
    # between tabulated rows use the smaller df's (larger) quantile: the interval errs wide
    smaller = max(k for k in T975 if k < df)
    return T975[smaller] if larger else 1.960


def t_quantile(level: float, df: int) -> float:
    """The two-sided `level` quantile of Student's t (t_{(1 + level) / 2, df}): the 95% table above, else
    scipy (exact)."""
    if not 0 < level < 1:
        raise ValueError(f"a confidence level is in (0, 1), got {level}")
    if abs(level - 0.95) < 1e-12:
        return t975(df)
    # scipy only here, for levels other than 95%: what the Snakefile imports when it loads
    # (report/compare.py reads this module) stays without it
    from scipy.stats import t

    return float(t.ppf((1 + level) / 2, df))


def level_label(level: float) -> str:
    """'95%', '98.3%': a level as the report prints it."""
    pct = 100 * level
    return f"{pct:.0f}%" if abs(pct - round(pct)) < 0.05 else f"{pct:.1f}%"


def summarize(values: Iterable[float], level: float = 0.95) -> dict:
    """n, mean, median, std (sample, ddof=1) and the `level` CI [lo, hi] of the mean over repeats.
    With one value the spread is unknown: std and the CI are NaN (shown as '-'), never zero."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    n = len(xs)
    nan = float("nan")
    if n == 0:
        return {"n": 0, "mean": nan, "median": nan, "std": nan, "ci_lo": nan, "ci_hi": nan}
    mean = sum(xs) / n
    s = sorted(xs)
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    if n == 1:
        return {"n": 1, "mean": mean, "median": median, "std": nan, "ci_lo": nan, "ci_hi": nan}
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(level, n - 1) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "median": median, "std": std, "ci_lo": mean - half, "ci_hi": mean + half}


def ratio_ci(num: Iterable[float], den: Iterable[float], level: float = 0.95) -> dict:
    """mean(num) / mean(den) with a `level` (default 95%) CI from the delta method on the log scale: the
    ratio's relative variance is the sum of the two means' relative variances, var(log R) ~ var(R)/R^2 =
    s_a^2/(n_a m_a^2) + s_b^2/(n_b m_b^2), the half-width is h = t_{(1+level)/2, min(n_a, n_b) - 1} * sd(log R)
    (the smaller sample sets the degrees of freedom: the interval errs wide), and the CI is
    [R e^-h, R e^h]. On the log scale a ratio of two positive quantities (a speedup, an efficiency)
    never gets a negative bound: a symmetric R +- t sd(R) would (-57% efficiency from two noisy
    repeats is no efficiency). A side with one value has no spread: the CI is then NaN, since an
    interval that ignored it would look narrower than the data allow."""
    return ratio_of(summarize(num), summarize(den), level)


def ratio_of(a: dict, b: dict, level: float = 0.95) -> dict:
    """ratio_ci from two summaries ({n, mean, std}, as summarize gives or a table's row keeps them):
    a guideline that compares two configurations' rows has their statistics, not their repeats."""
    nan = float("nan")
    if a["n"] == 0 or b["n"] == 0 or not b["mean"]:
        return {"ratio": nan, "ci_lo": nan, "ci_hi": nan, "n_num": a["n"], "n_den": b["n"]}
    r = a["mean"] / b["mean"]
    out = {"ratio": r, "ci_lo": nan, "ci_hi": nan, "n_num": a["n"], "n_den": b["n"]}
    if a["n"] < 2 or b["n"] < 2 or not a["mean"]:
        return out
    rel_var = a["std"] ** 2 / (a["n"] * a["mean"] ** 2) + b["std"] ** 2 / (b["n"] * b["mean"] ** 2)
    t = t_quantile(level, min(a["n"], b["n"]) - 1)
    if r > 0:
        h = t * math.sqrt(rel_var)
        out.update(ci_lo=r * math.exp(-h), ci_hi=r * math.exp(h))
    else:  # a signed ratio (not a ratio of positive quantities): the linear interval
        half = t * abs(r) * math.sqrt(rel_var)
        out.update(ci_lo=r - half, ci_hi=r + half)
    return out


def linear_fit(x: Iterable[float], y: Iterable[float]) -> dict:
    """Ordinary least squares y = intercept + slope * x, with the slope's 95% CI (Student t, n - 2
    degrees of freedom; NaN with two points, where the line passes through both and says nothing
    about its own error), R^2 and the residual standard error."""
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    n = len(xs)
    nan = float("nan")
    if n < 2:
        raise ValueError(f"a line needs two or more points, got {n}")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((a - mx) ** 2 for a in xs)
    if sxx == 0:
        raise ValueError("a line needs two or more distinct x values")
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    sse = sum((b - intercept - slope * a) ** 2 for a, b in zip(xs, ys))
    sst = sum((b - my) ** 2 for b in ys)
    out = {"slope": slope, "intercept": intercept, "n": n, "r2": 1 - sse / sst if sst else nan,
           "residual_se": nan, "slope_ci_lo": nan, "slope_ci_hi": nan}
    if n > 2:
        se = math.sqrt(sse / (n - 2))
        half = t975(n - 2) * se / math.sqrt(sxx)
        out.update(residual_se=se, slope_ci_lo=slope - half, slope_ci_hi=slope + half)
    return out
