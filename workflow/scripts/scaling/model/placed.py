"""The placement model (model/placement.py) as model.json's engine for runs without a no_sync probe
(imported runs: their step less the run without DDP is all they say about DDP's cost, and nothing
separates the wire from the rest). Fitted once per model on all its DDP placements, it gives a
(nodes, GPUs a node) placement its step with a 95% interval and how far it extrapolates, or refuses it
with the reason; leave one placement out validates it, per placement class.

Runs that kanscale measured keep the world-size model (model/fit.py): their all-reduce sweep gives
the wire's latency and bandwidth, and their no_sync probe the step's exposed communication.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..common.columns import INTER, INTRA, SINGLE
from .placement import (Prediction, Rows, extrapolation, fit_forms, forward_error, measured_range, plausible,
                        predict, prefer_for, refusal, rows_of)
from .terms import compute_time, corun_factor


def _compute(fit: dict, fam: str, b, P, oversub=1.0, busy=math.nan) -> np.ndarray:
    comp = fit["compute"][fam]
    return (compute_time(comp, np.atleast_1d(np.asarray(b, float)), np.atleast_1d(np.asarray(P, float)))
            * np.asarray(oversub, float) * corun_factor(fit.get("corun", {}), np.atleast_1d(np.asarray(busy, float))))


def _rows(mine: pd.DataFrame, fit: dict, fam: str) -> Rows:
    ddp = mine[mine["ddp"].astype(bool) & (mine["world_size"] > 1)]
    comp = _compute(fit, fam, ddp["batch_per_rank"], ddp["num_params"], ddp["oversub"], ddp["busy_cores"])
    return rows_of(ddp, comp)


def _select(rows: Rows):
    forms = fit_forms(rows)
    return plausible(forms, len(rows.places())) if forms else ([], False)


class Placed:
    """One model's placement model, fitted on `mine` (its training rows, model/fit.py) with the compute
    of `fit` (fit_all's point fit)."""

    def __init__(self, mine: pd.DataFrame, fit: dict, fam: str, spread: tuple[float | None, int] = (None, 0)):
        self.fit, self.fam = fit, fam
        self.P = float(mine["num_params"].median())
        self.rows = _rows(mine, fit, fam)
        self.rows.runs_spread, self.rows.spread_dof = spread
        self.forms, self.validated = _select(self.rows) if len(self.rows.step) else ([], False)
        self.measured = measured_range(self.rows, mine["nodes"], mine["gpus_per_node"], mine["batch_per_rank"])
        # the measured steps: (nodes, GPUs a node, per-rank batch) -> the runs' steps (a DDP run, or the
        # one-rank run without DDP, which is the baseline the one-rank prediction stands for)
        ok = mine[mine["ddp"].astype(bool) | (mine["world_size"] == 1)]
        self.steps = {(int(n), int(g), float(b)): grp["step_time_s"].to_numpy(float) for (n, g, b), grp in
                      ok.groupby(["nodes", "gpus_per_node", "batch_per_rank"])}

    def measured_step(self, N: int, G: int, b: float) -> np.ndarray | None:
        """The measured steps at exactly this placement and per-rank batch, or None."""
        return self.steps.get((int(N), int(G), float(b)))

    def predict(self, N: int, G: int, b: float, oversub: float = 1.0, busy: float = math.nan,
                P: float | None = None) -> tuple[Prediction | None, str | None, str | None]:
        """(prediction, refusal reason, extrapolation sentence) of a step at N x G with per-rank batch b
        (`oversub`, `busy`: CPU ranks sharing a host's cores, model/terms.py; P: the parameters, else
        the model's)."""
        past = extrapolation(self.measured, N, G, b)
        c = float(_compute(self.fit, self.fam, b, self.P if P is None else P, oversub, busy)[0])
        if N * G == 1:
            return Prediction(c, None, [c, c], [], "compute only (one rank, no DDP)"), None, past
        why = refusal(self.measured, N, G) or (None if self.forms else "no form is identified by the placements measured")
        if why:
            return None, why, past
        axes = {a: forward_error(self.rows, self.forms, a, level) for a, level, top in
                (("nodes", N, self.measured.max_nodes), ("gpus", G, self.measured.max_gpus)) if level > top}
        prefer = prefer_for(self.rows, self.forms, axes)
        return predict(self.forms, self.validated, self.rows, N, G, oversub, c, axes, prefer), None, past

    def validation(self, cls: str) -> dict:
        """Leave one placement out of the whole selection (forms refitted, plausible ones chosen again)
        and predict it: the mean |error| over the placements of class `cls`."""
        out = {"method": "leave one placement out (the placement model, model/placement.py)", "per_placement": [],
               "loo_mape_pct": None}
        errors = []
        for n, g in self.rows.places():
            if (cls == INTRA) != (n == 1):
                continue
            at = (self.rows.N == n) & (self.rows.G == g)
            rest, held = self.rows.subset(~at), self.rows.subset(at)
            forms, validated = _select(rest) if len(rest.step) else ([], False)
            if not forms:
                out["per_placement"].append({"placement": f"{n}x{g}", "reason": "no form identified without it"})
                continue
            pred = np.median([held.compute + f.extra(held.N, held.G, held.s) for f in forms], axis=0)
            err = float(np.mean(100 * (pred / held.step - 1)))
            errors.append((n * g, err))
            out["per_placement"].append({"placement": f"{n}x{g}", "world_size": n * g, "error_pct": err})
        if errors:
            out["loo_mape_pct"] = float(np.mean([abs(e) for _, e in errors]))
            out["world_sizes_validated"] = sorted({p for p, _ in errors})
        else:
            out["reason"] = f"no {cls} placement could be left out and predicted"
        return out


def placement_of(cls: str, p: int, max_gpn: int, measured_gpn: int) -> tuple[int, int] | None:
    """The placement a prediction of p ranks of class `cls` means: one node (intra-node), or nodes
    filled to the GPUs a node measured across nodes (inter-node); None where p does not divide."""
    if cls == SINGLE:
        return (1, 1) if p == 1 else None
    if cls == INTRA:
        return (1, p) if p <= max_gpn else None
    if cls == INTER:
        g = max(1, min(measured_gpn, max_gpn, p // 2))
        return (p // g, g) if p % g == 0 and p // g > 1 else None
    return None
