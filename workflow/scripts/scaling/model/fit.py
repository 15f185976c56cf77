"""Fitting the performance model (model/perf_model.py describes it): the compute term per model family,
the communication term per link class (from the all-reduce sweep and the training points' exposed
communication), prediction of a step, and the leave-one-world-size-out validation and bootstrap
draws that test and bound it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..common.columns import DEFAULT_DDP_SETTING, SINGLE, model_family
from .terms import (NotFitted, bounded_linear, busy_cores, compute_design, compute_time, corun_curve, corun_factor,
                    full_rank, oversubscription, ring, ring_design, sweep_oversub)

# gloo's all-reduce is the CPU ranks' own work: time-shared like their compute (model/perf_model.py);
# benchmarks/model_loo.py turns it off to show the model without it
COMM_SHARES_CORES = True
# the co-run slowdown c(k) from the sweep (model/perf_model.py); benchmarks/model_loo.py turns it off
USE_CORUN = True
CONFIG = ["experiment", "model", "nodes", "gpus_per_node", "batch_per_rank"]


def compute_times(rows: pd.DataFrame) -> pd.Series:
    """The compute of each row's step: its no_sync step, or for a non-DDP row (training_rows takes
    them only for a family never probed) its whole step, which has no all-reduce; NaN otherwise."""
    nosync = rows["nosync_step_time_s"].where(rows["nosync_step_time_s"] > 0)
    plain = ~rows["ddp"].astype(bool)
    return nosync.where(~plain, rows["step_time_s"])


def fit_compute(rows: pd.DataFrame, curve: dict[int, float] | None = None) -> dict:
    """{'terms', 'x'} of compute(b, P) over the no_sync step times of one family's ok DDP rows (or
    its non-DDP steps where none was probed: compute_times), each divided by its oversubscription and
    its co-run slowdown."""
    rows = rows.assign(compute_s=compute_times(rows))
    rows = rows[rows["compute_s"] > 0]
    if rows.empty:
        raise NotFitted("no DDP point with a no_sync step time, nor a one-rank run without DDP in its place")
    b = rows["batch_per_rank"].to_numpy(float)
    P = rows["num_params"].to_numpy(float)
    y = (rows["compute_s"].to_numpy(float) / rows["oversub"].to_numpy(float)
         / corun_factor(curve or {}, rows["busy_cores"] if "busy_cores" in rows else np.nan))
    terms = (["c0_s", "per_sample_s"] if len(set(b)) >= 2 else ["per_sample_s"])
    if len(set(P)) >= 2:
        terms.append("per_sample_param_s")
    combos = np.unique(np.column_stack([b, P]), axis=0)
    while len(terms) > 1 and not full_rank(compute_design(combos[:, 0], combos[:, 1], terms)):
        terms.pop()  # the (b, P) pairs measured cannot separate the last term: drop it
    x, bound = bounded_linear(compute_design(b, P, terms), y, relative=True)
    return {"terms": terms, "x": x, "at_bound": bound}


def fit_sweep(ar: pd.DataFrame) -> tuple[np.ndarray, list[bool]] | None:
    """((alpha, beta), at-bound flags) of one link class from its all-reduce sweep rows (each time
    divided by its oversubscription), or None when they cannot separate the two (fewer than two sizes)."""
    ar = ar[ar["world_size"] > 1]
    if ar.empty or ar["size_bytes"].nunique() < 2:
        return None
    p, n, t = (ar[c].to_numpy(float) for c in ("world_size", "size_bytes", "time_s"))
    s = sweep_oversub(ar) if COMM_SHARES_CORES else np.ones(len(ar))
    return bounded_linear(ring_design(p, n) * s[:, None], t, relative=True)


# without a no_sync probe (an imported run), a DDP step's cost beyond compute is its step less the
# non-DDP compute: that holds whatever DDP adds, not only the all-reduce, so a cost paid per step
# whatever the ranks and the link (the source's own extra work on DDP runs, DDP's bookkeeping) gets a
# term of its own, d: exposed(p) = d + 2 (p - 1) alpha + 2 (p - 1) / p n beta for p > 1
DDP_FIXED = "ddp_fixed_s"


def fit_derived(cls: str, rows: pd.DataFrame) -> dict:
    """{'ddp_fixed_s', 'alpha_s', 'beta_s_per_byte', ...} of one link class from derived exposed costs
    (step - compute); terms the world sizes cannot separate are dropped, beta first, then alpha."""
    p, n, e = (rows[c].to_numpy(float) for c in ("world_size", "grads_bytes", "exposed_comm_s"))
    s = rows["oversub"].to_numpy(float) if "oversub" in rows and COMM_SHARES_CORES else np.ones(len(rows))
    names = [DDP_FIXED, "alpha_s", "beta_s_per_byte"]
    X = np.column_stack([np.ones_like(p), ring_design(p, n)]) * s[:, None]
    keep = list(range(len(names)))
    while len(keep) > 1 and not full_rank(np.unique(X[:, keep], axis=0)):
        keep.pop()
    x, bound = bounded_linear(X[:, keep], e, relative=False)
    values = dict.fromkeys(names, 0.0) | {names[i]: float(v) for i, v in zip(keep, x)}
    dropped = [names[i] for i in range(len(names)) if i not in keep]
    return {**values, "exposure": 1.0, "exposure_assumed": False,
            "at_bound": {names[i]: b for i, b in zip(keep, bound)}, "terms_dropped": dropped,
            "source": "step less the non-DDP compute (no no_sync probe): a per-step DDP cost d plus "
                      "effective alpha, beta" + (f"; {', '.join(dropped)} not separable at the world sizes "
                                                 "measured, taken as 0" if dropped else "")}


def fit_comm(cls: str, train: pd.DataFrame, sweep: pd.DataFrame) -> dict:
    """{'alpha_s', 'beta_s_per_byte', 'exposure', 'source', 'exposure_assumed'} of one link class."""
    rows = train[(train["placement_class"] == cls) & (train["world_size"] > 1) & train["exposed_comm_s"].notna()]
    if "exposed_derived" in rows and rows["exposed_derived"].any():
        return fit_derived(cls, rows[rows["exposed_derived"].astype(bool)])
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
    X = ring_design(p, n) * s[:, None]
    if len(np.unique(X, axis=0)) < 2 or not full_rank(np.unique(X, axis=0)):
        raise NotFitted(f"{cls}: exposed comm at one world size and one gradient size cannot separate alpha from "
                        f"beta; run the all-reduce sweep or measure two world sizes > 1")
    (alpha, beta), bound = bounded_linear(X, e, relative=False)
    return {"alpha_s": float(alpha), "beta_s_per_byte": float(beta), "exposure": 1.0, "exposure_assumed": False,
            "at_bound": {"alpha_s": bound[0], "beta_s_per_byte": bound[1]},
            "source": "exposed comm of the training points (no sweep): effective alpha, beta"}


def fit_all(train: pd.DataFrame, sweep: pd.DataFrame) -> dict:
    """{'compute': {family: fit | reason str}, 'comm': {class: fit | reason str}, 'corun': c(k)}."""
    out = {"compute": {}, "comm": {}, "corun": corun_curve(sweep) if USE_CORUN else {}}
    for fam, g in train.groupby("family"):
        try:
            out["compute"][fam] = fit_compute(g, out["corun"])
        except NotFitted as e:
            out["compute"][fam] = str(e)
    train = derive_exposed(train, out["compute"])
    classes = (set(train.loc[train["world_size"] > 1, "placement_class"]) | set(sweep["placement_class"])) - {SINGLE}
    for cls in sorted(classes):
        try:
            out["comm"][cls] = fit_comm(cls, train, sweep)
        except NotFitted as e:
            out["comm"][cls] = str(e)
    return out


def derive_exposed(train: pd.DataFrame, compute: dict) -> pd.DataFrame:
    """`train` with exposed_comm_s = step - predicted compute on the DDP rows of a family never
    probed (no no_sync step: its compute came from its non-DDP runs), marked exposed_derived."""
    if "never_probed" not in train or not train["never_probed"].any():
        return train
    train = train.copy()
    rows = train["never_probed"].astype(bool) & train["ddp"].astype(bool) & (train["world_size"] > 1)
    train["exposed_derived"] = False
    exposed, derived = train.columns.get_loc("exposed_comm_s"), train.columns.get_loc("exposed_derived")
    for i in np.flatnonzero(rows.to_numpy()):  # by position: a bootstrap draw may repeat an index label
        r = train.iloc[i]
        comp = compute.get(r["family"])
        if not isinstance(comp, dict):
            continue
        c = float(compute_time(comp, r["batch_per_rank"], r["num_params"])[0]) * float(r["oversub"])
        train.iat[i, exposed] = float(r["step_time_s"]) - c
        train.iat[i, derived] = True
    return train


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
        cost = comm["exposure"] * ring(p, n, comm["alpha_s"], comm["beta_s_per_byte"]) + comm.get(DDP_FIXED, 0.0)
        t = t + shared * cost * (np.asarray(p) > 1)
    return t


def training_rows(df: pd.DataFrame, defaults_only: bool = True) -> pd.DataFrame:
    """The ok DDP points with a synced and a no_sync step time (non-DDP points have no no_sync probe
    and no all-reduce: they are not part of this model, except as the compute of a family whose DDP
    points were never probed: _with_unprobed_baselines). With `defaults_only`, only DDP's default
    settings (ddp_setting none): a hook changes the bytes sent (fp16 halves them) and adds its own
    work, a bucket size changes the overlap; the model is fitted to DDP as the other experiments run
    it and predicts the settings from their bytes (model/ddp_model.py)."""
    ok = df[(df["status"] == "ok") & (df["step_time_s"] > 0)].copy()
    ok["family"] = [model_family(m) for m in ok["model"]]
    ok = _known_sizes(ok)
    ok = _with_unprobed_baselines(ok)
    if defaults_only and "ddp_setting" in ok:
        ok = ok[ok["ddp_setting"].isin([DEFAULT_DDP_SETTING, ""]) | ~ok["ddp"].astype(bool)]
    col = lambda c: ok[c] if c in ok else pd.Series(np.nan, index=ok.index)  # noqa: E731
    hosts = col("num_hosts").fillna(ok["nodes"]).clip(lower=1)
    ok["oversub"] = oversubscription(col("device_type"), ok["world_size"] / hosts, col("threads_per_rank"),
                                     col("host_cpus"))
    ok["busy_cores"] = busy_cores(col("device_type"), ok["world_size"] / hosts, col("threads_per_rank"),
                                  col("host_cpus"))
    return ok


def _known_sizes(ok: pd.DataFrame) -> pd.DataFrame:
    """num_params and grads_bytes where a run did not give them (an imported table without the column):
    the model's own value from another run, else 0, which drops the terms that scale with them (a
    column of zeros is not identified). A NaN would match nothing: every DDP row of a model without it
    would leave the model without a word."""
    ok = ok.copy()
    for c in ("num_params", "grads_bytes"):
        if c in ok:
            ok[c] = ok[c].fillna(ok.groupby("model")[c].transform("median")).fillna(0.0)
    return ok


def _with_unprobed_baselines(ok: pd.DataFrame) -> pd.DataFrame:
    """The DDP rows, and for a family none of whose DDP rows has a no_sync step (runs imported from
    elsewhere) its non-DDP one-rank rows too: their step is its compute. Such a family's DDP rows are
    kept only at a batch and parameter count a non-DDP run measured (elsewhere their compute, and so
    their DDP cost, is unknown). Marked never_probed."""
    ddp = ok["ddp"].astype(bool)
    probed = set(ok.loc[ddp & (ok["nosync_step_time_s"] > 0), "family"])
    never = ~ok["family"].isin(probed)
    plain = never & ~ddp & (ok["world_size"] == 1)
    known = set(zip(ok.loc[plain, "family"], ok.loc[plain, "batch_per_rank"], ok.loc[plain, "num_params"]))
    with_plain = {f for f, _, _ in known}
    measured = pd.Series([f not in with_plain or (f, b, P) in known
                          for f, b, P in zip(ok["family"], ok["batch_per_rank"], ok["num_params"])], index=ok.index)
    keep = (ddp & ~never) | plain | (ddp & never & measured)
    return ok[keep].assign(never_probed=never[keep])


def _configs(train: pd.DataFrame, model: str, cls: str) -> pd.DataFrame:
    """Mean measured step time per configuration of `model` in link class `cls` (and at one rank)."""
    return config_means(train[(train["model"] == model) & train["placement_class"].isin([cls, SINGLE])])


def config_means(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (and world size, link class) of `rows`: the mean step time over its
    repeats (`runs` of them) with what predict_step needs."""
    return rows.groupby(CONFIG + ["world_size", "placement_class"], as_index=False).agg(
        step_time_s=("step_time_s", "mean"), runs=("step_time_s", "size"), num_params=("num_params", "median"),
        grads_bytes=("grads_bytes", "median"), family=("family", "first"), oversub=("oversub", "median"),
        busy_cores=("busy_cores", "median"))


def _left(e: NotFitted) -> str:
    """What holding a world size out left the fit without: 'no other intra-node communication data'."""
    text = str(e)
    return text.replace("no ", "no other ", 1) if text.startswith("no ") else f"the fit unable to predict it ({text})"


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
            # the data had it; holding p out removed it: say so ("no intra-node communication data"
            # read as if none was measured, while p = 2 itself was)
            out["per_world_size"].append({"world_size": p, "reason": f"held out, p = {p} leaves {_left(e)}"})
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
    # a row drawn twice is two rows: a fresh index, so that no label names two of them
    draw = train.loc[idx].reset_index(drop=True)
    if "launcher" in draw and (draw["launcher"] == "imported").any():
        draw = _epoch_draw(draw.copy(), rng)
    parts = []
    for _, g in sweep.groupby(["placement_class", "nodes", "gpus_per_node"], sort=False):
        reps = g["rep"].unique()
        for k, rep in enumerate(rng.choice(reps, size=len(reps), replace=True)):
            parts.append(g[g["rep"] == rep].assign(rep=k))
    return draw, (pd.concat(parts) if parts else sweep)


def _epoch_draw(draw: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """An imported run is one repeat: its step time is the median of its epochs' mean steps, and only
    their spread says how well that median is known. Each imported row's step is drawn around it,
    normal with sd = 1.2533 sigma / sqrt(n) (the median's standard error), sigma = (p90 - p10) / 2.563
    (the 10-90% width of a normal) and n = epochs - 1 (import_records.py leaves epoch 0 out)."""
    rows = draw["launcher"] == "imported"
    width = (draw["step_time_p90_s"] - draw["step_time_p10_s"]).where(rows).fillna(0.0).clip(lower=0.0)
    n = (draw["epochs"].where(rows).fillna(2) - 1).clip(lower=1)
    sd = 1.2533 * width / 2.563 / np.sqrt(n)
    draw["step_time_s"] = draw["step_time_s"] + rng.standard_normal(len(draw)) * sd.to_numpy(float)
    return draw
