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
point measures it (kan/corun.py: a fixed KAN kernel's rate alone vs with every rank at once), and
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

import math

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from .columns import INTER, INTRA, REAL_PLACEMENTS, SIMULATED, SINGLE, is_emulated, model_family

SEED = 0
# gloo's all-reduce is the CPU ranks' own work: time-shared like their compute (see the docstring);
# benchmarks/model_loo.py turns it off to show the model without it
COMM_SHARES_CORES = True
# the co-run slowdown c(k) from the sweep (see the docstring); benchmarks/model_loo.py turns it off
USE_CORUN = True
COMPUTE_TERMS = ("c0_s", "per_sample_s", "per_sample_param_s")
CONFIG = ["experiment", "model", "nodes", "gpus_per_node", "batch_per_rank"]


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


def _full_rank(cols: np.ndarray) -> bool:
    scaled = cols / np.maximum(np.abs(cols).max(axis=0), 1e-300)
    return np.linalg.matrix_rank(scaled, tol=1e-9) == cols.shape[1]


def _compute_design(b, P, terms) -> np.ndarray:
    cols = {"c0_s": np.ones_like(b), "per_sample_s": b, "per_sample_param_s": b * P}
    return np.column_stack([cols[t] for t in terms])


def oversubscription(device, ranks_per_host, threads, cores) -> np.ndarray:
    """s >= 1: how many times over the ranks' threads share a host's cores (1 on GPUs, or unknown)."""
    ranks, threads, cores = (np.asarray(x, float) for x in (ranks_per_host, threads, cores))
    s = np.where(np.isfinite(cores) & (cores > 0), ranks * np.nan_to_num(threads, nan=1.0) / cores, 1.0)
    return np.where(np.asarray(device, object) == "cpu", np.maximum(s, 1.0), 1.0)


def corun_curve(sweep: pd.DataFrame) -> dict[int, float]:
    """busy cores k -> c(k), the co-run slowdown without its time-sharing: per sweep point (a point's
    rows repeat its value once per size) slowdown / s, the mean per k (the model predicts mean step
    times, and on the 2-core VM the slowdown is bimodal, 1.0 or 1.65 at 2 ranks); c(1) = 1, and
    c(k) >= 1: ranks running together are never faster than alone, a mean below 1 is noise."""
    if not USE_CORUN or "corun_slowdown" not in sweep or "host_cpus" not in sweep:
        return {}
    pts = sweep[sweep["corun_slowdown"].notna() & (sweep["corun_slowdown"] > 0) & sweep["host_cpus"].notna()]
    pts = pts.drop_duplicates("point_id") if "point_id" in pts else pts
    if pts.empty:
        return {}
    per_point = pd.Series(pts["corun_slowdown"].to_numpy(float) / sweep_oversub(pts))
    c = per_point.groupby(busy_cores(*_sweep_hosts(pts))).mean()
    return {1: 1.0, **{int(b): max(float(v), 1.0) for b, v in c.items() if np.isfinite(b) and b > 1}}


def busy_cores(device, ranks_per_host, threads, cores) -> np.ndarray:
    """k = min(ranks x threads, cores) on CPU hosts of known core count, else NaN (no co-run factor)."""
    ranks, threads, cores = (np.asarray(x, float) for x in (ranks_per_host, threads, cores))
    k = np.minimum(ranks * np.nan_to_num(threads, nan=1.0), cores)
    return np.where((np.asarray(device, object) == "cpu") & np.isfinite(cores) & (cores > 0), k, np.nan)


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
    return {"curve": measured, "text": "co-run slowdown from the all-reduce sweep's points (kan/corun.py): " + ", ".join(
        f"c({k}) = {v:.2f}" for k, v in measured.items()) + " with k busy cores (time-sharing divided out)"}


def fit_compute(rows: pd.DataFrame, curve: dict[int, float] | None = None) -> dict:
    """{'terms', 'x'} of compute(b, P) over the no_sync step times of one family's ok DDP rows (each
    divided by its oversubscription and its co-run slowdown)."""
    rows = rows[rows["nosync_step_time_s"] > 0]
    if rows.empty:
        raise NotFitted("no DDP point with a no_sync step time")
    b = rows["batch_per_rank"].to_numpy(float)
    P = rows["num_params"].to_numpy(float)
    y = (rows["nosync_step_time_s"].to_numpy(float) / rows["oversub"].to_numpy(float)
         / corun_factor(curve or {}, rows["busy_cores"] if "busy_cores" in rows else np.nan))
    terms = (["c0_s", "per_sample_s"] if len(set(b)) >= 2 else ["per_sample_s"])
    if len(set(P)) >= 2:
        terms.append("per_sample_param_s")
    combos = np.unique(np.column_stack([b, P]), axis=0)
    while len(terms) > 1 and not _full_rank(_compute_design(combos[:, 0], combos[:, 1], terms)):
        terms.pop()  # the (b, P) pairs measured cannot separate the last term: drop it
    x, bound = bounded_linear(_compute_design(b, P, terms), y, relative=True)
    return {"terms": terms, "x": x, "at_bound": bound}


def compute_time(fit: dict, b, P) -> np.ndarray:
    b, P = np.asarray(b, float), np.asarray(P, float)
    return _compute_design(np.atleast_1d(b), np.atleast_1d(P), fit["terms"]) @ fit["x"]


def _ring_design(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.column_stack([2 * (p - 1), 2 * (p - 1) / p * n])


def _sweep_hosts(ar: pd.DataFrame) -> tuple:
    """(device, ranks per host, threads per rank, cores) of each sweep row; NaN where its file
    predates the host facts."""
    col = lambda c: ar[c] if c in ar else pd.Series(np.nan, index=ar.index)  # noqa: E731
    hosts = col("num_hosts").fillna(ar["nodes"]).clip(lower=1)
    return col("device_type"), ar["world_size"] / hosts, col("threads_per_rank"), col("host_cpus")


def sweep_oversub(ar: pd.DataFrame) -> np.ndarray:
    """The oversubscription of each sweep row (1 where its file predates the host facts)."""
    return oversubscription(*_sweep_hosts(ar))


def fit_sweep(ar: pd.DataFrame) -> tuple[np.ndarray, list[bool]] | None:
    """((alpha, beta), at-bound flags) of one link class from its all-reduce sweep rows (each time
    divided by its oversubscription), or None when they cannot separate the two (fewer than two sizes)."""
    ar = ar[ar["world_size"] > 1]
    if ar.empty or ar["size_bytes"].nunique() < 2:
        return None
    p, n, t = (ar[c].to_numpy(float) for c in ("world_size", "size_bytes", "time_s"))
    s = sweep_oversub(ar) if COMM_SHARES_CORES else np.ones(len(ar))
    return bounded_linear(_ring_design(p, n) * s[:, None], t, relative=True)


def fit_comm(cls: str, train: pd.DataFrame, sweep: pd.DataFrame) -> dict:
    """{'alpha_s', 'beta_s_per_byte', 'exposure', 'source', 'exposure_assumed'} of one link class."""
    rows = train[(train["placement_class"] == cls) & (train["world_size"] > 1) & train["exposed_comm_s"].notna()]
    p, n, e = (rows[c].to_numpy(float) for c in ("world_size", "grads_bytes", "exposed_comm_s"))
    s = rows["oversub"].to_numpy(float) if "oversub" in rows and COMM_SHARES_CORES else np.ones(len(rows))
    swept = fit_sweep(sweep[sweep["placement_class"] == cls])
    if swept is not None:
        (alpha, beta), bound = swept
        out = {"alpha_s": float(alpha), "beta_s_per_byte": float(beta), "source": "allreduce sweep",
               "at_bound": {"alpha_s": bound[0], "beta_s_per_byte": bound[1]}}
        if rows.empty:
            return {**out, "exposure": 1.0, "exposure_assumed": True}
        (eta,), eta_bound = bounded_linear((s * ring(p, n, alpha, beta))[:, None], e, relative=False)
        out["at_bound"]["exposure"] = eta_bound[0]
        return {**out, "exposure": float(eta), "exposure_assumed": False,
                "source": "allreduce sweep; exposure from the training points"}
    if rows.empty:
        raise NotFitted(f"no {cls} all-reduce sweep and no {cls} training point with world size > 1")
    X = _ring_design(p, n) * s[:, None]
    if len(np.unique(X, axis=0)) < 2 or not _full_rank(np.unique(X, axis=0)):
        raise NotFitted(f"{cls}: exposed comm at one world size and one gradient size cannot separate alpha from "
                        f"beta; run the all-reduce sweep or measure two world sizes > 1")
    (alpha, beta), bound = bounded_linear(X, e, relative=False)
    return {"alpha_s": float(alpha), "beta_s_per_byte": float(beta), "exposure": 1.0, "exposure_assumed": False,
            "at_bound": {"alpha_s": bound[0], "beta_s_per_byte": bound[1]},
            "source": "exposed comm of the training points (no sweep): effective alpha, beta"}


def fit_all(train: pd.DataFrame, sweep: pd.DataFrame) -> dict:
    """{'compute': {family: fit | reason str}, 'comm': {class: fit | reason str}, 'corun': c(k)}."""
    out = {"compute": {}, "comm": {}, "corun": corun_curve(sweep)}
    for fam, g in train.groupby("family"):
        try:
            out["compute"][fam] = fit_compute(g, out["corun"])
        except NotFitted as e:
            out["compute"][fam] = str(e)
    classes = (set(train.loc[train["world_size"] > 1, "placement_class"]) | set(sweep["placement_class"])) - {SINGLE}
    for cls in sorted(classes):
        try:
            out["comm"][cls] = fit_comm(cls, train, sweep)
        except NotFitted as e:
            out["comm"][cls] = str(e)
    return out


def predict_step(fit: dict, family: str, cls: str, p, b, P, n, oversub=1.0, busy=math.nan) -> np.ndarray:
    """Step time(s); raises NotFitted naming the term that is missing."""
    comp = fit["compute"].get(family)
    if not isinstance(comp, dict):
        raise NotFitted(comp or f"no compute term for {family}")
    t = compute_time(comp, b, P) * np.asarray(oversub, float) * corun_factor(fit.get("corun", {}), busy)
    if np.max(np.atleast_1d(p)) > 1:
        comm = fit["comm"].get(cls)
        if not isinstance(comm, dict):
            raise NotFitted(comm or f"no {cls} communication data")
        shared = np.asarray(oversub, float) if COMM_SHARES_CORES else 1.0
        t = t + shared * comm["exposure"] * ring(p, n, comm["alpha_s"], comm["beta_s_per_byte"]) * (np.asarray(p) > 1)
    return t


def training_rows(df: pd.DataFrame, defaults_only: bool = True) -> pd.DataFrame:
    """The ok DDP points with a synced and a no_sync step time (non-DDP points have no no_sync probe
    and no all-reduce: they are not part of this model). With `defaults_only`, only DDP's default
    settings (ddp_setting none): a hook changes the bytes sent (fp16 halves them) and adds its own
    work, a bucket size changes the overlap; the model is fitted to DDP as the other experiments run
    it and predicts the settings from their bytes (ddp_model.py)."""
    ok = df[(df["status"] == "ok") & df["ddp"].astype(bool) & (df["step_time_s"] > 0)].copy()
    if defaults_only and "ddp_setting" in ok:
        ok = ok[ok["ddp_setting"].isin(["none", ""])]
    ok["family"] = [model_family(m) for m in ok["model"]]
    col = lambda c: ok[c] if c in ok else pd.Series(np.nan, index=ok.index)  # noqa: E731
    hosts = col("num_hosts").fillna(ok["nodes"]).clip(lower=1)
    ok["oversub"] = oversubscription(col("device_type"), ok["world_size"] / hosts, col("threads_per_rank"),
                                     col("host_cpus"))
    ok["busy_cores"] = busy_cores(col("device_type"), ok["world_size"] / hosts, col("threads_per_rank"),
                                  col("host_cpus"))
    return ok


def _configs(train: pd.DataFrame, model: str, cls: str) -> pd.DataFrame:
    """Mean measured step time per configuration of `model` in link class `cls` (and at one rank)."""
    sub = train[(train["model"] == model) & train["placement_class"].isin([cls, SINGLE])]
    return sub.groupby(CONFIG + ["world_size", "placement_class"], as_index=False).agg(
        step_time_s=("step_time_s", "mean"), num_params=("num_params", "median"), grads_bytes=("grads_bytes", "median"),
        family=("family", "first"), oversub=("oversub", "median"), busy_cores=("busy_cores", "median"))


def validate(train: pd.DataFrame, sweep: pd.DataFrame, model: str, cls: str) -> dict:
    """Leave-one-world-size-out errors of `model` in `cls`: per world size, and the MAPE."""
    conf = _configs(train, model, cls)
    sizes = sorted(int(p) for p in conf["world_size"].unique())
    out = {"method": "leave one world size out", "world_sizes": sizes, "per_world_size": [], "loo_mape_pct": None}
    if not sizes or (cls != SINGLE and len(sizes) < 2):
        out["reason"] = f"only world size {sizes[0] if sizes else '-'} measured: nothing left to fit when it is held out"
        return out
    errors = []
    for p in sizes:
        fit = fit_all(train[train["world_size"] != p], sweep[sweep["world_size"] != p])
        held = conf[conf["world_size"] == p]
        try:
            pred = np.concatenate([predict_step(fit, r.family, r.placement_class, p, r.batch_per_rank, r.num_params,
                                                r.grads_bytes, r.oversub, r.busy_cores) for r in held.itertuples()])
        except NotFitted as e:
            out["per_world_size"].append({"world_size": p, "reason": f"without p = {p}: {e}"})
            continue
        err = 100 * (pred - held["step_time_s"].to_numpy()) / held["step_time_s"].to_numpy()
        errors += [(p, float(x)) for x in err]
        out["per_world_size"].append({"world_size": p, "error_pct": float(np.mean(err)),
                                      "abs_error_pct": float(np.mean(np.abs(err))), "num_points": int(len(err))})
    # at one rank only the compute term is at stake; elsewhere a MAPE must include a p > 1
    if errors and (cls == SINGLE or any(p > 1 for p, _ in errors)):
        out["loo_mape_pct"] = float(np.mean([abs(x) for _, x in errors]))
        out["world_sizes_validated"] = sorted({p for p, _ in errors})
    else:
        why = "; ".join(e["reason"] for e in out["per_world_size"] if "reason" in e)
        out["reason"] = (why if cls == SINGLE else "no world size above 1 could be held out and predicted, so the "
                         f"communication term is untested: {why}")
    return out


def resample(train: pd.DataFrame, sweep: pd.DataFrame, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One bootstrap draw: repeats resampled with replacement within each configuration."""
    idx = []
    for _, g in train.groupby(CONFIG + ["ddp"], sort=False):
        idx.extend(rng.choice(g.index.to_numpy(), size=len(g), replace=True))
    parts = []
    for _, g in sweep.groupby(["placement_class", "nodes", "gpus_per_node"], sort=False):
        reps = g["rep"].unique()
        for k, rep in enumerate(rng.choice(reps, size=len(reps), replace=True)):
            parts.append(g[g["rep"] == rep].assign(rep=k))
    return train.loc[idx], (pd.concat(parts) if parts else sweep)


def work(df: pd.DataFrame, model: str) -> dict | None:
    """The configured strong-scaling work of `model`: samples, epochs and the batch rule, read from
    its DDP points (the ok ones when there are any: a planned point's row echoes its config too)."""
    s = df[(df["experiment"] == "strong") & (df["model"] == model) & df["ddp"].astype(bool)]
    if (s["status"] == "ok").any():
        s = s[s["status"] == "ok"]
    if s.empty:
        return None
    g = s["global_batch"].dropna().unique()
    b = s["batch_per_rank"].dropna().unique()
    out = {"samples": int(s["samples"].iloc[0]), "epochs": int(s["epochs"].iloc[0])}
    if len(g) == 1 and len(b) > 1:
        out.update(batch_rule="fixed global batch", global_batch=int(g[0]))
    else:
        out.update(batch_rule="fixed per-rank batch", batch_per_rank=int(b[0]))
    return out


def _batch(w: dict, p: int) -> float:
    return w["global_batch"] / p if w["batch_rule"] == "fixed global batch" else float(w["batch_per_rank"])


def _total_time(w: dict, p: int, step) -> np.ndarray:
    b = _batch(w, p)
    steps = math.ceil(math.ceil(w["samples"] / p) / b)
    return w["epochs"] * steps * np.asarray(step, float)


def grid(max_measured: int, factor: float, cls: str, w: dict, max_gpus_per_node: int) -> list[int]:
    top = int(factor * max_measured)
    ps = [2 ** k for k in range(0, int(math.log2(max(top, 1))) + 1)]
    if cls == INTRA:
        ps = [p for p in ps if p <= max_gpus_per_node]
    if cls in (INTER, SIMULATED) or is_emulated(cls):
        ps = [p for p in ps if p >= 2]
    if cls == SINGLE:
        ps = [1]
    if w["batch_rule"] == "fixed global batch":
        ps = [p for p in ps if w["global_batch"] / p >= 1]
    return ps


def _param(name: str, value: float, draws: list[float], bound: bool) -> dict:
    out = {"value": float(value), "ci_lo": None, "ci_hi": None, "at_bound": f"{name} at its lower bound 0" if bound else None}
    if len(draws) >= 2:
        out["ci_lo"], out["ci_hi"] = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    return out


def _band(point: float, draws: list[float]) -> dict:
    out = {"value": float(point), "lo": None, "hi": None}
    if len(draws) >= 2:
        out["lo"], out["hi"] = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    return out


def build_model(df: pd.DataFrame, allreduce: pd.DataFrame, thresholds: dict) -> dict:
    """model.json: per model (of the strong experiment) and link class the fitted parameters with
    CIs, the leave-one-world-size-out validation and the predictions; per model a recommendation.
    `df` and `allreduce` are clean frames (columns.clean / clean_allreduce)."""
    num_boot = int(thresholds.get("bootstrap_samples", 500))
    factor = float(thresholds.get("predict_max_factor", 8))
    max_gpn = int(thresholds.get("max_gpus_per_node", 8))
    train = training_rows(df)
    sweep = allreduce[allreduce["world_size"] > 1] if len(allreduce) else allreduce
    out = {"method": __doc__.strip().split("\n\n")[0], "bootstrap": {"samples": num_boot, "seed": SEED},
           "allreduce_sweep": ("rows per link class: " + ", ".join(f"{c} {n}" for c, n in
                                                                 sweep["placement_class"].value_counts().items())
                               if len(sweep) else "absent or empty: alpha, beta from the training points' exposed comm"),
           "models": {}}
    from .linkcheck import cross_link, link_check

    # the emulated cluster's links, whose rate is known: does the sweep give it back? (linkcheck.py)
    out["link_check"] = link_check(df, sweep)
    if train.empty:
        out["reason"] = "no ok DDP point with step times"
        return out
    out["cross_link"] = cross_link(train, sweep)
    point = fit_all(train, sweep)
    out["corun"] = corun_summary(point["corun"])
    from .ddp_model import ddp_predictions

    # the ddp experiment's settings, predicted from their bytes per step and checked against them
    out["ddp_settings"] = ddp_predictions(training_rows(df, defaults_only=False), point)
    rng = np.random.default_rng(SEED)
    draws = [fit_all(*resample(train, sweep, rng)) for _ in range(num_boot)]
    for model in sorted(train["model"].unique()):
        out["models"][model] = _one_model(df, train, sweep, model, point, draws, factor, max_gpn,
                                          float(thresholds.get("efficiency_threshold", 0.75)))
    return out


def _one_model(df, train, sweep, model, point, draws, factor, max_gpn, threshold) -> dict:
    fam = model_family(model)
    mine = train[train["model"] == model]
    P, n = float(mine["num_params"].median()), float(mine["grads_bytes"].median())
    res: dict = {"family": fam, "num_params": P, "grads_bytes": n, "work": work(df, model), "placements": {}}
    comp = point["compute"].get(fam)
    if not isinstance(comp, dict):
        res["reason"] = comp
        return res
    ok_draws = [d for d in draws if isinstance(d["compute"].get(fam), dict) and d["compute"][fam]["terms"] == comp["terms"]]
    res["compute"] = {"terms": comp["terms"], "params": {
        t: _param(t, comp["x"][i], [d["compute"][fam]["x"][i] for d in ok_draws], comp["at_bound"][i])
        for i, t in enumerate(comp["terms"])}}
    w = res["work"]
    if w is None:
        res["reason"] = "no strong-scaling point of this model: no configured work to predict"
        return res
    max_p = int(mine["world_size"].max())
    classes = [SINGLE] + sorted(c for c in point["comm"])
    measured = mine.groupby("placement_class")["world_size"].max().to_dict()
    for cls in classes:
        entry: dict = {}
        comm = point["comm"].get(cls) if cls != SINGLE else None
        if cls != SINGLE:
            if not isinstance(comm, dict):
                res["placements"][cls] = {"reason": comm}
                continue
            cd = [d["comm"][cls] for d in draws if isinstance(d["comm"].get(cls), dict)]
            entry["comm"] = {k: _param(k, comm[k], [d[k] for d in cd], comm["at_bound"].get(k, False))
                             for k in ("alpha_s", "beta_s_per_byte", "exposure")}
            entry["comm"].update(source=comm["source"], exposure_assumed=comm["exposure_assumed"])
            if comm["exposure_assumed"]:
                entry["comm"]["exposure"]["note"] = f"assumed 1 (no overlap): no {cls} training point measured"
        entry["validation"] = validate(train, sweep, model, cls)
        entry["predictions"] = _predictions(point, draws, fam, cls, w, P, n, max_p, factor, max_gpn,
                                            measured.get(cls, 0), _sharing(mine, cls))
        res["placements"][cls] = entry
    res["recommendation"] = recommend(res, threshold)
    return res


def _sharing(mine: pd.DataFrame, cls: str):
    """p -> (oversubscription, busy cores) a prediction at p ranks of class `cls` assumes, on the hosts
    this model was measured on: 1 rank per host (single-rank), all p on one host (intra-node, or a
    simulated inter-node placement), or the measured ranks per node (inter-node)."""
    def col(c, default):
        return float(mine[c].median()) if c in mine and mine[c].notna().any() else default

    device = mine["device_type"].mode().iloc[0] if "device_type" in mine and mine["device_type"].notna().any() else None
    cores, threads = col("host_cpus", math.nan), col("threads_per_rank", 1.0)
    per_node = col("gpus_per_node", 1.0) if cls == INTER or is_emulated(cls) else None

    def share(p: int) -> tuple[float, float]:
        ranks = 1 if cls == SINGLE else (min(per_node, p) if per_node else p)
        return (float(oversubscription([device], [ranks], [threads], [cores])[0]),
                float(busy_cores([device], [ranks], [threads], [cores])[0]))
    return share


def _predictions(point, draws, fam, cls, w, P, n, max_p, factor, max_gpn, measured_max, share) -> list[dict]:
    def totals(fit, p):
        step = predict_step(fit, fam, cls, p, _batch(w, p), P, n, *share(p))[0]
        return step, float(_total_time(w, p, step))

    base_point = totals(point, 1)[1]
    base_draws = []
    for d in draws:
        try:
            base_draws.append(totals(d, 1)[1])
        except NotFitted:
            base_draws.append(math.nan)
    rows = []
    for p in grid(max_p, factor, cls, w, max_gpn):
        step, total = totals(point, p)
        ds = []
        for d, b0 in zip(draws, base_draws):
            try:
                ds.append((*totals(d, p), b0))
            except NotFitted:
                continue
        ds = [x for x in ds if not math.isnan(x[2])]
        b = _batch(w, p)
        speed = base_point / total
        rows.append({
            "world_size": p, "placement_class": cls, "batch_per_rank": b,
            "step_time_s": _band(step, [x[0] for x in ds]),
            "samples_per_s": _band(b * p / step, [b * p / x[0] for x in ds]),
            "time_s": _band(total, [x[1] for x in ds]),
            "speedup": _band(speed, [x[2] / x[1] for x in ds]),
            "efficiency": _band(speed / p, [x[2] / x[1] / p for x in ds]),
            "gpu_hours": p * total / 3600,
            "extrapolated": p > max(measured_max, 1),
            "oversubscription": share(p)[0],
            "corun_slowdown": float(corun_factor(point.get("corun", {}), share(p)[1])[0]),
        })
    return rows


def _validation_text(v: dict) -> str:
    if v.get("loo_mape_pct") is not None:
        return f"LOO MAPE {v['loo_mape_pct']:.1f}% over p = {', '.join(map(str, v['world_sizes_validated']))}"
    return f"not validated: {v.get('reason', 'unknown')}"


def recommend(res: dict, threshold: float) -> dict:
    """The fastest (world size, placement) with predicted efficiency >= threshold, and the one with
    the fewest GPU-hours, over the real placement classes (never a simulated inter-node one)."""
    cands = []
    for cls, entry in res["placements"].items():
        if cls not in REAL_PLACEMENTS or "predictions" not in entry:
            continue
        for r in entry["predictions"]:
            cands.append({**r, "validation": _validation_text(entry["validation"]),
                          "loo_mape_pct": entry["validation"].get("loo_mape_pct")})
    out = {"efficiency_threshold": threshold, "work": res["work"]}
    skipped = [c for c in res["placements"] if c not in REAL_PLACEMENTS]
    if skipped:
        out["not_considered"] = [f"{c}: its ranks shared one host" + (
            ", joined by an emulated link: advice about that link, not a real network" if is_emulated(c)
            else ", so it says nothing about a real network") for c in skipped]
    if not cands:
        out["reason"] = "no placement class with a fitted model"
        return out
    ok = [c for c in cands if c["efficiency"]["value"] >= threshold]
    fastest = min(ok, key=lambda c: (c["time_s"]["value"], c["world_size"])) if ok else None
    cheapest = min(cands, key=lambda c: (c["gpu_hours"], c["world_size"]))
    out["fastest"], out["cheapest"] = fastest, cheapest
    return out
