"""Feynman equations as regression tasks (data.kind feynman).

Source: the Feynman Symbolic Regression Database of S.-M. Udrescu and M. Tegmark, "AI Feynman: a
physics-inspired method for symbolic regression", Science Advances 6 (2020) eaay2631, table
FeynmanEquations.csv (https://space.mit.edu/home/tegmark/aifeynman.html): each equation's formula and
the uniform range of each input. These are equations of the Feynman table of Z. Liu et al., "KAN:
Kolmogorov-Arnold Networks" (2024), which benchmarks KANs on them; the KAN paper rewrites some of them
in fewer, dimensionless variables, here they stay in the database's own variables and ranges.

Inputs are drawn uniformly in their ranges with numpy's PCG64 seeded by the point's seed (the
standardisation to the model's grid is kan/data/datasets.py's). No torch here: the plan checks the input
width against EQUATIONS without it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Equation(NamedTuple):
    """One database row: its inputs (name, low, high) and its formula over them (numpy arrays)."""

    inputs: tuple[tuple[str, float, float], ...]
    formula: str  # the database's own spelling, for the record and the docs
    fn: object    # callable(*columns) -> array


def _eq(inputs: str, lo: float, hi: float, formula: str, fn, ranges: dict | None = None) -> Equation:
    ranges = ranges or {}
    return Equation(tuple((n, *ranges.get(n, (lo, hi))) for n in inputs.split()), formula, fn)


# name -> Equation; every range is the database's
EQUATIONS: dict[str, Equation] = {
    "I.6.2": _eq("sigma theta", 1, 3, "exp(-(theta/sigma)**2/2)/(sqrt(2*pi)*sigma)",
                 lambda s, t: np.exp(-((t / s) ** 2) / 2) / (np.sqrt(2 * np.pi) * s)),
    "I.6.2b": _eq("sigma theta theta1", 1, 3, "exp(-((theta-theta1)/sigma)**2/2)/(sqrt(2*pi)*sigma)",
                  lambda s, t, t1: np.exp(-(((t - t1) / s) ** 2) / 2) / (np.sqrt(2 * np.pi) * s)),
    "I.12.11": _eq("q Ef B v theta", 1, 5, "q*(Ef+B*v*sin(theta))",
                   lambda q, e, b, v, t: q * (e + b * v * np.sin(t))),
    "I.13.12": _eq("m1 m2 r1 r2 G", 1, 5, "G*m1*m2*(1/r2-1/r1)",
                   lambda m1, m2, r1, r2, g: g * m1 * m2 * (1 / r2 - 1 / r1)),
    "I.16.6": _eq("c v u", 1, 5, "(u+v)/(1+u*v/c**2)", lambda c, v, u: (u + v) / (1 + u * v / c**2)),
    "I.18.4": _eq("m1 m2 r1 r2", 1, 5, "(m1*r1+m2*r2)/(m1+m2)",
                  lambda m1, m2, r1, r2: (m1 * r1 + m2 * r2) / (m1 + m2)),
    "I.26.2": _eq("n theta2", 1, 5, "arcsin(n*sin(theta2))", lambda n, t: np.arcsin(n * np.sin(t)),
                  ranges={"n": (0, 1)}),
    "I.27.6": _eq("d1 d2 n", 1, 5, "1/(1/d1+n/d2)", lambda d1, d2, n: 1 / (1 / d1 + n / d2)),
    "I.29.16": _eq("x1 x2 theta1 theta2", 1, 5, "sqrt(x1**2+x2**2-2*x1*x2*cos(theta1-theta2))",
                   lambda x1, x2, t1, t2: np.sqrt(x1**2 + x2**2 - 2 * x1 * x2 * np.cos(t1 - t2))),
    "I.30.3": _eq("Int_0 theta n", 1, 5, "Int_0*sin(n*theta/2)**2/sin(theta/2)**2",
                  lambda i0, t, n: i0 * np.sin(n * t / 2) ** 2 / np.sin(t / 2) ** 2),
    "I.37.4": _eq("I1 I2 delta", 1, 5, "I1+I2+2*sqrt(I1*I2)*cos(delta)",
                  lambda i1, i2, d: i1 + i2 + 2 * np.sqrt(i1 * i2) * np.cos(d)),
    "II.2.42": _eq("kappa T1 T2 A d", 1, 5, "kappa*(T2-T1)*A/d", lambda k, t1, t2, a, d: k * (t2 - t1) * a / d),
    "III.17.37": _eq("beta alpha theta", 1, 5, "beta*(1+alpha*cos(theta))",
                     lambda b, a, t: b * (1 + a * np.cos(t))),
}


def num_inputs(name: str) -> int:
    return len(EQUATIONS[name].inputs)


def evaluate(name: str, x: np.ndarray) -> np.ndarray:
    """The equation's value at every row of x (n, num_inputs) -> (n,)."""
    return EQUATIONS[name].fn(*(x[:, i] for i in range(x.shape[1])))


def sample(name: str, num_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x (num_samples, num_inputs) uniform in the database's ranges; y (num_samples,) exact."""
    eq = EQUATIONS[name]
    rng = np.random.default_rng(seed)
    lo = np.array([r[1] for r in eq.inputs])
    hi = np.array([r[2] for r in eq.inputs])
    x = lo + (hi - lo) * rng.random((num_samples, len(eq.inputs)))
    return x, evaluate(name, x)
