"""A step's cost beyond compute at a placement of N nodes x G GPUs (ranks) a node, with N and G as
separate inputs, several candidate forms, and intervals that hold the spread between the forms the
data cannot tell apart. report.holdout predicts its held-out placements with it (model/holdout.py).

Why not a line in world size p = N G: a node's G ranks share its PCIe and its NIC, a ring's bandwidth
term saturates as 2 (p - 1) / p, and a hierarchical all-reduce (reduce inside the node, all-reduce
across nodes, broadcast inside) pays each link on its own. On public tables a fixed p is often faster
over more nodes (2 x 2 slower than 4 x 1), which no function of p alone can say.

    step(N, G, b) = compute(b, P) + [p > 1] * sum_j theta_j * s * f_j(N, G),    theta_j >= 0

compute is model/fit.py's (no_sync steps, or the one-rank run without DDP); s is the ranks'
oversubscription of a CPU host's cores (1 on GPUs). The features f_j, one optional per part:
    DDP's own cost       ddp          1 (bookkeeping, hooks, the copy into buckets: any p > 1)
    inside a node        intra_ring   2 (G - 1) / G   ring bandwidth over the node's G ranks
                         intra_lin    G - 1           ring latency; ranks queueing on one PCIe root
    across nodes         inter_step   [N > 1]         a fixed cost once the NIC is used
                         inter_ring   2 (N - 1) / N   hierarchical: each node's NIC moves 2 (N - 1) / N n
                         inter_log    log2 N          a tree across nodes (NCCL's tree)
                         inter_lin    N - 1           ring latency across nodes
                         inter_shared G 2 (N - 1) / N the NIC shared by the node's G ranks, each its own ring
                         flat_ring    2 (p - 1) / p   one flat ring over every rank, bound by the slowest link
                         flat_lin     p - 1           its latency
A form is a choice per part (nothing, one feature, or a ring's bandwidth and latency together): 79
forms. Each is fitted by non-negative least squares on the relative residual (a 50 ms and a 2 s step
weigh alike) over the DDP rows, and kept only where the measured placements identify every theta
(its design over the distinct placements has full column rank).

Which form: leave one placement out. Every placement with p > 1 is dropped in turn (all its rows: every
experiment and per-rank batch measured there), the form refitted on the rest, and that placement's
mean step predicted; a form's score is the root mean square of those relative errors. A form validated on
at least half the placements is ranked; the plausible forms are those within max(1.5 x the best score,
the best + 1 point). Where the data cannot tell two forms apart (two nodes measured: the inter-node
cost at N = 2 is the same number under inter_step, inter_ring, inter_log and inter_lin, which at N = 4
give 1, 1.5, 2 and 3 times it), both are plausible, and both predictions count.

A prediction is the median over the plausible forms (past the largest node count or GPUs a node
measured, over those of them that best predicted that largest level from the levels below it, where
two levels were measured: validation by extrapolation, for an extrapolation); its 95% interval is
the envelope over all of them of
pred_f (1 -+ q_f), q_f = t(0.975, n_f) x score_f x sqrt(1 + 1 / n_f), from the n_f left-out errors
of form f (a prediction interval from leave-one-out residuals, as jackknife+ is: Barber et al. 2021),
at least t x the spread between runs of one step where repeats give it. Where no form could be
validated (fewer DDP placements than a form has terms, plus one), the interval is the spread between
the forms alone, and says so; where that spread is zero, there is no interval, and the reason says
why. Never an interval of zero width.

Refused, with the reason, rather than guessed: a placement on more than one node where no multi-node
placement was measured (the inter-node cost is unknown), more than one GPU a node where none was, more
than NODES_LIMIT times the largest node count measured, or more than GPUS_LIMIT times the largest GPUs
a node. Every prediction past what was measured (nodes, GPUs a node, world size, per-rank batch) says
so in `extrapolated`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import nnls
from scipy.stats import t as student_t

# how far past what was measured a prediction may go before it is refused: nodes to 4x the largest
# node count measured (2 -> 8), GPUs a node to 2x (4 -> 8: a node's own links are the part a study of
# one node measures best); chosen so that a study of up to 2 nodes predicts 3 to 8, with the spread
# between the forms it cannot tell apart as its interval
NODES_LIMIT = 4
GPUS_LIMIT = 2
LEVEL = 0.95
PLAUSIBLE_FACTOR, PLAUSIBLE_POINTS = 1.5, 0.01


def _features(N: np.ndarray, G: np.ndarray) -> dict[str, np.ndarray]:
    N, G = np.asarray(N, float), np.asarray(G, float)
    p, multi = N * G, (N > 1).astype(float)
    return {
        "ddp": np.ones_like(N),
        "intra_ring": 2 * (G - 1) / G, "intra_lin": G - 1,
        "inter_step": multi, "inter_ring": 2 * (N - 1) / N, "inter_log": np.log2(N), "inter_lin": N - 1,
        "inter_shared": G * 2 * (N - 1) / N,
        "flat_ring": multi * 2 * (p - 1) / p, "flat_lin": multi * (p - 1),
    }


PARTS = (
    ((), ("ddp",)),
    ((), ("intra_ring",), ("intra_lin",), ("intra_ring", "intra_lin")),
    ((), ("inter_step",), ("inter_ring",), ("inter_log",), ("inter_lin",), ("inter_shared",), ("flat_ring",),
     ("flat_lin",), ("inter_ring", "inter_lin"), ("flat_ring", "flat_lin")),
)
FORMS = [tuple(f for part in combo for f in part) for combo in itertools.product(*PARTS)]
FORMS = [f for f in FORMS if f]


def design(form: tuple[str, ...], N, G, s) -> np.ndarray:
    feats = _features(N, G)
    return np.column_stack([feats[f] for f in form]) * np.asarray(s, float)[:, None]


def identified(X: np.ndarray) -> bool:
    """Every column non-zero, and full column rank over the distinct rows (placements)."""
    U = np.unique(np.round(X, 12), axis=0)
    if len(U) < X.shape[1] or not (np.abs(X).max(axis=0) > 0).all():
        return False
    scaled = U / np.abs(U).max(axis=0)
    return np.linalg.matrix_rank(scaled, tol=1e-9) == X.shape[1]


def fit_form(X: np.ndarray, extra: np.ndarray, step: np.ndarray) -> np.ndarray:
    """theta >= 0 minimising sum(((X theta - extra) / step)^2); columns scaled for conditioning."""
    A = X / step[:, None]
    col = np.abs(A).max(axis=0)
    theta, _ = nnls(A / col, extra / step)
    return theta / col


@dataclass
class Rows:
    """One model's DDP rows (p > 1): placement, the step measured, and the compute predicted for it."""
    N: np.ndarray
    G: np.ndarray
    s: np.ndarray
    step: np.ndarray
    compute: np.ndarray
    batch: np.ndarray
    runs_spread: float | None = None  # the relative spread between runs of one step, where repeats give it
    spread_dof: int = 0

    @property
    def extra(self) -> np.ndarray:
        return self.step - self.compute

    def places(self) -> list[tuple[int, int]]:
        return sorted(set(zip(self.N.astype(int), self.G.astype(int))))

    def subset(self, mask: np.ndarray) -> Rows:
        return Rows(self.N[mask], self.G[mask], self.s[mask], self.step[mask], self.compute[mask], self.batch[mask],
                    self.runs_spread, self.spread_dof)


@dataclass
class Form:
    form: tuple[str, ...]
    theta: np.ndarray
    errors: list[float] = field(default_factory=list)  # left-out relative errors, one per placement

    @property
    def score(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.errors)))) if self.errors else math.inf

    def extra(self, N, G, s) -> np.ndarray:
        return design(self.form, np.atleast_1d(N), np.atleast_1d(G), np.atleast_1d(s)) @ self.theta

    def q(self, runs_spread: float | None, spread_dof: int) -> float | None:
        """The half-width of this form's interval, relative to its prediction (module doc)."""
        n = len(self.errors)
        q = None
        if n:
            q = float(student_t.ppf(0.5 + LEVEL / 2, n) * self.score * math.sqrt(1 + 1 / n))
        if runs_spread:
            floor = float(student_t.ppf(0.5 + LEVEL / 2, max(spread_dof, 1)) * runs_spread)
            q = max(q or 0.0, floor)
        return q


def _fit(rows: Rows, form) -> np.ndarray | None:
    X = design(form, rows.N, rows.G, rows.s)
    return fit_form(X, rows.extra, rows.step) if identified(X) else None


def fit_forms(rows: Rows) -> list[Form]:
    """Every identified form, fitted to all rows, with its leave-one-placement-out errors."""
    places = rows.places()
    out = []
    for form in FORMS:
        theta = _fit(rows, form)
        if theta is None:
            continue
        f = Form(form, theta)
        for n, g in places:
            at = (rows.N == n) & (rows.G == g)
            reduced = _fit(rows.subset(~at), form)
            if reduced is None:
                continue
            held = rows.subset(at)
            pred = held.compute + Form(form, reduced).extra(held.N, held.G, held.s)
            f.errors.append(float(np.mean(pred / held.step - 1)))
        out.append(f)
    return out


def plausible(forms: list[Form], num_places: int) -> tuple[list[Form], bool]:
    """(the plausible forms, whether they were validated): see the module doc."""
    validated = [f for f in forms if len(f.errors) >= max(1, math.ceil(num_places / 2))]
    if not validated:
        return forms, False
    best = min(f.score for f in validated)
    cut = max(PLAUSIBLE_FACTOR * best, best + PLAUSIBLE_POINTS)
    return [f for f in validated if f.score <= cut], True


@dataclass
class Measured:
    """What was measured, for the extrapolation statement and the refusals."""
    max_nodes: int
    max_gpus: int
    max_world: int
    batch: tuple[float, float]
    multi_node: bool  # a placement with N > 1 measured (DDP)
    multi_gpu: bool  # a placement with G > 1 measured (DDP)


def measured_range(rows: Rows, all_nodes, all_gpus, all_batch) -> Measured:
    return Measured(int(max(all_nodes)), int(max(all_gpus)), int(max(np.asarray(all_nodes) * np.asarray(all_gpus))),
                    (float(min(all_batch)), float(max(all_batch))), bool((rows.N > 1).any()),
                    bool((rows.G > 1).any()))


def _num(x: float) -> str:
    return f"{x:g}"


def extrapolation(m: Measured, N: int, G: int, b: float) -> str | None:
    """A sentence saying past what the placement goes, or None inside what was measured."""
    parts = []
    if N > m.max_nodes:
        parts.append(f"{N} nodes, past the {m.max_nodes} measured")
    if G > m.max_gpus:
        parts.append(f"{G} GPUs a node, past the {m.max_gpus} measured")
    if N * G > m.max_world:
        parts.append(f"{N * G} ranks, past the {m.max_world} measured")
    lo, hi = m.batch
    if not lo <= b <= hi:
        parts.append(f"batch {_num(b)} per rank, outside the {_num(lo)} to {_num(hi)} measured")
    return ("extrapolates: " + "; ".join(parts)) if parts else None


def refusal(m: Measured, N: int, G: int) -> str | None:
    if N > 1 and not m.multi_node:
        return "no placement on more than one node was measured: the inter-node cost is unknown"
    if G > 1 and not m.multi_gpu:
        return "no placement with more than one GPU a node was measured: the cost of sharing a node is unknown"
    if m.max_nodes > 1 and N > NODES_LIMIT * m.max_nodes:
        return (f"{N} nodes is more than {NODES_LIMIT}x the {m.max_nodes} measured (placement.NODES_LIMIT): "
                f"measure a larger placement first")
    if G > GPUS_LIMIT * m.max_gpus:
        return (f"{G} GPUs a node is more than {GPUS_LIMIT}x the {m.max_gpus} measured (placement.GPUS_LIMIT): "
                f"measure a fuller node first")
    return None


# the features of each axis of a placement: what a prediction past the measured nodes (or GPUs a node)
# extrapolates
AXIS_FEATURES = {"nodes": ("inter_step", "inter_ring", "inter_log", "inter_lin", "inter_shared", "flat_ring",
                           "flat_lin"),
                 "gpus": ("intra_ring", "intra_lin")}


def _axis(rows: Rows, axis: str) -> np.ndarray:
    return rows.N if axis == "nodes" else rows.G


def forward_error(rows: Rows, forms: list[Form], axis: str, target: int) -> float | None:
    """How wrong the plausible forms were when they last extrapolated along `axis`: each refitted on the
    placements below the largest level of the axis measured, the placements at that level predicted;
    the largest |relative error|, scaled by how much farther the target lies, in doublings:
    log2(target / top) / log2(top / the level below). None where no plausible form can be refitted
    below the top (one level of the axis measured): then its growth is not measured at all."""
    levels = sorted({int(x) for x in _axis(rows, axis)})
    if len(levels) < 2 or levels[-2] < 2:  # below the top, the axis's own cost must have been measured
        return None
    top, below = levels[-1], levels[-2]
    lower, at_top = rows.subset(_axis(rows, axis) < top), rows.subset(_axis(rows, axis) == top)
    preds = []
    for f in forms:
        theta = _fit(lower, f.form)
        if theta is not None:
            preds.append(at_top.compute + Form(f.form, theta).extra(at_top.N, at_top.G, at_top.s))
    if not preds:
        return None
    # the model as it predicts: the median over the forms refitted below, its worst placement at the top
    worst = float(np.max(np.abs(np.log(np.median(preds, axis=0) / at_top.step))))
    return worst * math.log2(target / top) / math.log2(top / below)


def forward_choice(rows: Rows, forms: list[Form], axis: str) -> list[bool] | None:
    """Which forms extrapolated best along `axis` the last time they could: each refitted below the
    largest level measured and scored on that level (RMS relative error), kept within the plausible
    rule's margin of the best. A prediction past that level takes its median from these (validation
    by extrapolation, for an extrapolation); None where no form can be refitted below the top."""
    levels = sorted({int(x) for x in _axis(rows, axis)})
    if len(levels) < 2 or levels[-2] < 2:
        return None
    top = levels[-1]
    lower, at_top = rows.subset(_axis(rows, axis) < top), rows.subset(_axis(rows, axis) == top)
    scores = []
    for f in forms:
        theta = _fit(lower, f.form)
        pred = None if theta is None else at_top.compute + Form(f.form, theta).extra(at_top.N, at_top.G, at_top.s)
        scores.append(math.inf if pred is None else float(np.sqrt(np.mean((pred / at_top.step - 1) ** 2))))
    best = min(scores)
    if not math.isfinite(best):
        return None
    cut = max(PLAUSIBLE_FACTOR * best, best + PLAUSIBLE_POINTS)
    return [x <= cut for x in scores]


def prefer_for(rows: Rows, forms: list[Form], axes) -> list[bool] | None:
    """forward_choice over every axis a target extrapolates along: the forms best on all of them (on
    any, where none is best on all); None where no axis could be checked."""
    masks = [m for m in (forward_choice(rows, forms, a) for a in axes) if m is not None]
    if not masks:
        return None
    both = [all(x) for x in zip(*masks)]
    return both if any(both) else [any(x) for x in zip(*masks)]


@dataclass
class Prediction:
    step_s: float
    interval: list[float] | None
    forms_interval: list[float]  # the plausible forms' own predictions: the model-form spread
    forms: list[str]
    interval_from: str
    reason: str | None = None  # why there is no interval


def _name(form: tuple[str, ...]) -> str:
    return " + ".join(form)


def predict(forms: list[Form], validated: bool, rows: Rows, N: int, G: int, s: float, compute: float,
            past: dict[str, float | None] | None = None, prefer: list[bool] | None = None) -> Prediction:
    """The median over the plausible forms, and its interval (module doc). `past`: per axis the target
    extrapolates along ("nodes", "gpus"), forward_error's widening, or None where the axis's growth
    was never measured: then the interval reaches down to the step without that axis's cost.
    `prefer`: the forms the median is taken over (forward_choice), where any; the interval still holds
    every plausible form."""
    past = past or {}
    preds = np.array([compute + float(f.extra(N, G, s)[0]) for f in forms])
    chosen = preds[np.asarray(prefer, bool)] if prefer is not None and any(prefer) else preds
    center = float(np.median(chosen))
    spread = [float(preds.min()), float(preds.max())]
    widen = sum(v for v in past.values() if v)
    unknown = [a for a, v in past.items() if v is None]
    floor = preds.copy()
    for a in unknown:  # the axis's part may be anything from none to what the steepest form says
        floor = np.minimum(floor, [compute + float(f.extra(N, G, s)[0]) - _part(f, N, G, s, AXIS_FEATURES[a])
                                   for f in forms])
    qs = [f.q(rows.runs_spread, rows.spread_dof) for f in forms] if validated else [None] * len(forms)
    # relative half-widths apply as factors, lo = x / (1 + q), hi = x (1 + q): a step is positive, and an
    # error of +q and one of -q / (1 + q) are as likely on a log scale (steps are ratios of rates)
    grow = math.exp(widen)
    if validated and all(q is not None for q in qs):
        lo = min(p / (1 + q) for p, q in zip(floor, qs)) / grow
        hi = max(p * (1 + q) for p, q in zip(preds, qs)) * grow
        n = min(len(f.errors) for f in forms)
        how = (f"{LEVEL:.0%} interval: the envelope over {len(forms)} plausible form{'s' if len(forms) > 1 else ''} "
               f"of each one's leave-one-placement-out error ({n}+ placements left out), Student's t")
    elif rows.runs_spread:
        q = float(student_t.ppf(0.5 + LEVEL / 2, max(rows.spread_dof, 1)) * rows.runs_spread)
        lo, hi = float(floor.min()) / (1 + q) / grow, spread[1] * (1 + q) * grow
        how = ("the spread between the forms the data allow, widened by the spread between runs of one step; "
               "too few placements to leave one out, so the model's own error is not in it")
    elif spread[1] > float(floor.min()) * (1 + 1e-9) or widen > 0:
        lo, hi = float(floor.min()) / grow, spread[1] * grow
        how = ("the spread between the forms the data allow alone: too few placements to leave one out, and no "
               "step ran twice, so neither the model's error nor the run-to-run spread is in it")
    else:
        return Prediction(center, None, spread, [_name(f.form) for f in forms], "",
                          reason="no interval: every form the data allow predicts the same step, too few placements "
                                 "were measured to leave one out, and no step ran twice; measure one more placement "
                                 "or a repeat")
    if widen:
        how += (f"; widened {grow:.2f}x each way for the extrapolation: the model's error when it last extrapolated "
                f"as far (the largest level measured predicted from those below, scaled to the distance in doublings)")
    if unknown:
        how += ("; reaching down to the step without the " + " and ".join(
            "inter-node cost" if a == "nodes" else "cost of sharing a node" for a in unknown)
                + ", whose growth past the one level measured is unknown")
    # never below compute alone, less the spread between runs of one step where repeats give it: DDP
    # adds to a step, it does not take away
    noise = rows.runs_spread or 0.0
    if lo < compute / (1 + noise):
        lo = compute / (1 + noise)
        how += "; not below the compute alone (the step without DDP), less one step's noise"
    return Prediction(center, [float(lo), float(hi)], spread, [_name(f.form) for f in forms], how)


def _part(f: Form, N, G, s, names) -> float:
    feats = {k: v for k, v in zip(f.form, f.theta)}
    X = _features(np.atleast_1d(float(N)), np.atleast_1d(float(G)))
    return float(sum(feats[k] * X[k][0] * s for k in names if k in feats))


def rows_of(train: pd.DataFrame, compute: np.ndarray) -> Rows:
    """Rows from model/fit.py's training rows of one model (DDP, p > 1) and their predicted compute."""
    return Rows(train["nodes"].to_numpy(float), train["gpus_per_node"].to_numpy(float),
                train["oversub"].to_numpy(float), train["step_time_s"].to_numpy(float), np.asarray(compute, float),
                train["batch_per_rank"].to_numpy(float))
