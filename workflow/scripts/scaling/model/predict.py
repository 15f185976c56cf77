"""What the fitted performance model predicts (model/perf_model.py describes it): the configured
strong-scaling work of each model at powers of two per link class, with bootstrap bands, and the
recommendation drawn from those predictions (fastest with predicted efficiency >= the threshold,
fewest GPU-hours).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from ..common.columns import INTER, INTRA, REAL_PLACEMENTS, SIMULATED, SINGLE, is_emulated, model_family
from .fit import DDP_FIXED, predict_step, validate
from .holdout import run_to_run
from .placed import Placed, placement_of
from .terms import NotFitted, busy_cores, corun_factor, oversubscription


def work(df: pd.DataFrame, model: str, experiment: str = "strong") -> dict | None:
    """The configured work of `model` in the strong (or weak) experiment: samples, epochs and the batch
    rule, read from its DDP points (the ok ones when there are any: a planned point's row echoes its
    config too)."""
    s = df[(df["experiment"] == experiment) & (df["model"] == model) & df["ddp"].astype(bool)]
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


def one_model(df, train, sweep, model, point, draws, factor, max_gpn, threshold) -> dict:
    fam = model_family(model)
    mine = train[train["model"] == model]
    P, n = float(mine["num_params"].median()), float(mine["grads_bytes"].median())
    # the cost's unit (GPU-hours or rank-hours) follows where this model's ranks ran
    cuda = "device_type" in mine and (mine["device_type"] == "cuda").any()
    res: dict = {"family": fam, "num_params": P, "grads_bytes": n, "work": work(df, model), "placements": {},
                 "device": "GPU" if cuda else "CPU"}
    comp = point["compute"].get(fam)
    if not isinstance(comp, dict):
        res["reason"] = comp
        return res
    ok_draws = [d for d in draws if isinstance(d["compute"].get(fam), dict) and d["compute"][fam]["terms"] == comp["terms"]]
    res["compute"] = {"terms": comp["terms"], "params": {
        t: _param(t, comp["x"][i], [d["compute"][fam]["x"][i] for d in ok_draws], comp["at_bound"][i])
        for i, t in enumerate(comp["terms"])}}
    weak = work(df, model, "weak")
    if weak is not None and weak["batch_rule"] != "fixed per-rank batch":
        weak = None
    if res["work"] is None and weak is not None:
        res["work"] = _weak_as_work(df, model, weak)
    w = res["work"]
    if w is None:
        res["reason"] = "no strong- or weak-scaling point of this model: no configured work to predict"
        return res
    if weak is not None:
        res["weak_work"] = weak
    max_p = int(mine["world_size"].max())
    # runs without a no_sync probe (imported): the placement model predicts them (model/placed.py)
    placed = None
    if "never_probed" in mine and mine["never_probed"].any():
        spread = run_to_run(mine)
        placed = Placed(mine, point, fam, spread[:2])
        res["engine"] = (f"placement model (model/placement.py): nodes and GPUs a node apart, {len(placed.forms)} "
                         f"plausible form{'s' if len(placed.forms) != 1 else ''} of the cost beyond compute, "
                         f"validated by leaving one placement out; the ring terms below are the world-size model's, "
                         f"kept for comparison")
        res["plausible_forms"] = [" + ".join(f.form) for f in placed.forms]
    # kanscale's own runs keep the world-size model; past what was measured, the placement model (nodes
    # and GPUs a node apart, the spread between the forms the data cannot tell apart) bounds it too
    # the GPUs a node of the measured multi-node placements: how an inter-node prediction fills its nodes
    gpn = int(mine.loc[mine["nodes"] > 1, "gpus_per_node"].max()) if (mine["nodes"] > 1).any() else 1
    own = None
    if placed is None and ((mine["ddp"].astype(bool)) & (mine["world_size"] > 1)).any():
        own = Placed(mine, point, fam, run_to_run(mine)[:2])
        own = own if own.forms else None
    classes = [SINGLE] + sorted(c for c in point["comm"])
    measured = mine.groupby("placement_class")["world_size"].max().to_dict()
    for cls in classes:
        entry: dict = {}
        comm = point["comm"].get(cls) if cls != SINGLE else None
        if cls != SINGLE:
            if not isinstance(comm, dict) and placed is None:
                res["placements"][cls] = {"reason": comm}
                continue
        if cls != SINGLE and isinstance(comm, dict):
            cd = [d["comm"][cls] for d in draws if isinstance(d["comm"].get(cls), dict)]
            entry["comm"] = {k: _param(k, comm[k], [d[k] for d in cd], comm["at_bound"].get(k, False))
                             for k in ("alpha_s", "beta_s_per_byte", "exposure")}
            if DDP_FIXED in comm:  # no no_sync probe: DDP's per-step cost beyond the all-reduce (model/fit.py)
                entry["comm"][DDP_FIXED] = _param(DDP_FIXED, comm[DDP_FIXED], [d.get(DDP_FIXED, 0.0) for d in cd],
                                                  comm["at_bound"].get(DDP_FIXED, False))
            entry["comm"].update(source=comm["source"], exposure_assumed=comm["exposure_assumed"])
            if comm["exposure_assumed"]:
                entry["comm"]["exposure"]["note"] = f"assumed 1 (no overlap): no {cls} training point measured"
        if placed is not None and cls != SINGLE:
            entry["validation"] = placed.validation(cls)
            entry["predictions"], refused = _placed_predictions(placed, cls, w, max_p, factor, max_gpn, gpn)
            if weak is not None:
                entry["weak_predictions"] = _placed_predictions(placed, cls, weak, max_p, factor, max_gpn, gpn)[0]
            if refused:
                entry["refused"] = refused
            res["placements"][cls] = entry
            continue
        entry["validation"] = validate(train, sweep, model, cls)
        plain = _plain_steps(df[df["model"] == model], w) if cls == SINGLE else None
        if plain is not None:
            # the one-rank step is the run without DDP itself (the single-rank class is compute alone): its
            # measurement, not the model's compute, and no left-out error gates it
            entry["validation"] = {"method": "measured: the one-rank run without DDP at this per-rank batch",
                                   "measured": True, "loo_mape_pct": None}
        entry["predictions"] = _predictions(point, draws, fam, cls, w, P, n, max_p, factor, max_gpn,
                                            measured.get(cls, 0), _sharing(mine, cls))
        if plain is not None:
            _as_measured(entry["predictions"][0], plain, w)
        if weak is not None:  # the weak experiment's step at its per-rank batch (decide/totarget.py)
            entry["weak_predictions"] = _predictions(point, draws, fam, cls, weak, P, n, max_p, factor, max_gpn,
                                                     measured.get(cls, 0), _sharing(mine, cls))
        if own is not None and cls in (INTRA, INTER):
            for key, wk in (("predictions", w), ("weak_predictions", weak)):
                if key in entry:
                    _past_measured(entry[key], own, cls, wk, P, max_gpn, gpn, _sharing(mine, cls), res["device"])
        _name_placements(entry, cls, max_gpn, gpn)
        res["placements"][cls] = entry
    res["recommendation"] = recommend(res, threshold)
    return res


def _plain_steps(runs: pd.DataFrame, w: dict) -> np.ndarray | None:
    """The steps of a model's ok one-rank runs without DDP at the work's per-rank batch, or None."""
    plain = runs[(runs["status"] == "ok") & ~runs["ddp"].astype(bool) & (runs["world_size"] == 1)
                 & (runs["batch_per_rank"] == _batch(w, 1)) & (runs["step_time_s"] > 0)]
    steps = plain["step_time_s"].dropna().to_numpy(float)
    return steps if len(steps) else None


def _as_measured(row: dict, steps: np.ndarray, w: dict) -> None:
    """The one-rank row as measured: its runs' mean step and 95% interval, the time and rate from it."""
    step, lo, hi = _measured_band(steps)
    b = _batch(w, 1)
    band = lambda f: {"value": f(step), "lo": None if lo is None else min(f(lo), f(hi)),  # noqa: E731
                      "hi": None if hi is None else max(f(lo), f(hi))}
    row.update(step_time_s=band(lambda x: x), samples_per_s=band(lambda x: b / x),
               time_s=band(lambda x: float(_total_time(w, 1, x))), gpu_hours=float(_total_time(w, 1, step)) / 3600,
               measured=True, interval_from=f"measured: the mean of {len(steps)} run{'s' if len(steps) != 1 else ''} "
                                            f"without DDP at 1 rank")


def _measured_band(steps: np.ndarray) -> tuple[float, float | None, float | None]:
    """The mean step of a placement's runs and its 95% interval (Student's t; none from one run)."""
    mean = float(np.mean(steps))
    if len(steps) < 2:
        return mean, None, None
    half = float(student_t.ppf(0.975, len(steps) - 1) * np.std(steps, ddof=1) / np.sqrt(len(steps)))
    return mean, mean - half, mean + half


def _weak_as_work(df: pd.DataFrame, model: str, weak: dict) -> dict:
    """A study with weak scaling only: the work to place is the largest weak run's (its samples, at the
    weak per-rank batch). At a fixed total and per-rank batch, time = samples / (p b) x step, so the
    fastest placement is the one of most samples per second, and speedup / p = step(1) / step(p), the
    weak-scaling efficiency."""
    s = df[(df["experiment"] == "weak") & (df["model"] == model) & (df["status"] == "ok")]
    return {**weak, "samples": int(s["samples"].max()) if len(s) else weak["samples"],
            "from": "weak: the largest weak run's samples at its per-rank batch"}


def _placed_predictions(placed: Placed, cls, w, max_p, factor, max_gpn, gpn) -> tuple[list[dict], list[dict]]:
    """_predictions' rows from the placement model, and the placements it refused (with the reason)."""
    seen = placed.measured_step(1, 1, _batch(w, 1))
    one = float(np.mean(seen)) if seen is not None else placed.predict(1, 1, _batch(w, 1))[0].step_s
    base = float(_total_time(w, 1, one))
    rows, refused = [], []
    for p in grid(max_p, factor, cls, w, max_gpn):
        where = placement_of(cls, p, max_gpn, gpn)
        if where is None:
            continue
        N, G = where
        b = _batch(w, p)
        seen = placed.measured_step(N, G, b)
        if seen is not None:  # measured here: the measurement, not the model, with its runs' interval
            step, lo, hi = _measured_band(seen)
            past, how = None, f"measured: the mean of {len(seen)} run{'s' if len(seen) != 1 else ''} at {N}x{G}"
        else:
            pred, why, past = placed.predict(N, G, b)
            if pred is None:
                refused.append({"world_size": p, "placement": f"{N}x{G}", "reason": why})
                continue
            step, (lo, hi), how = pred.step_s, pred.interval or (None, None), pred.interval_from or pred.reason
        band = lambda f: {"value": f(step), "lo": None if lo is None else min(f(lo), f(hi)),  # noqa: E731
                          "hi": None if hi is None else max(f(lo), f(hi))}
        total = lambda x: float(_total_time(w, p, x))  # noqa: E731
        rows.append({
            "world_size": p, "placement_class": cls, "placement": f"{N}x{G}", "batch_per_rank": b,
            "step_time_s": band(lambda x: x), "samples_per_s": band(lambda x: b * p / x), "time_s": band(total),
            "speedup": band(lambda x: base / total(x)), "efficiency": band(lambda x: base / total(x) / p),
            "gpu_hours": p * total(step) / 3600, "extrapolated": past is not None, "extrapolation": past,
            "measured": seen is not None, "interval_from": how, "oversubscription": 1.0, "corun_slowdown": 1.0,
        })
    return rows, refused


def _name_placements(entry: dict, cls: str, max_gpn: int, gpn: int) -> None:
    """Each prediction names its placement ("1x4", "2x2"), as the tables and the deploy guideline
    write it, where its class and world size fix one. In place."""
    for r in entry.get("predictions", []) + entry.get("weak_predictions", []):
        where = placement_of(cls, int(r["world_size"]), max_gpn, gpn)
        if where is not None and "placement" not in r:
            r["placement"] = f"{where[0]}x{where[1]}"


def _past_measured(rows: list[dict], own: Placed, cls: str, w: dict, P: float, max_gpn: int, gpn: int, share,
                   device: str = "GPU") -> None:
    """Widen each prediction past what was measured to the envelope of its bootstrap band (the
    world-size model's parameters only) and the placement model's 95% interval at the same placement
    (the forms the data allow, and their left-out error), and say how far it extrapolates; a placement
    the placement model refuses keeps its band and the refusal. In place."""
    for r in rows:
        p = int(r["world_size"])
        where = placement_of(cls, p, max_gpn, gpn)
        if not r.get("extrapolated") or where is None:
            continue
        N, G = where
        pred, why, past = own.predict(N, G, _batch(w, p), *share(p), P)
        # the placement model speaks of GPUs; CPU ranks are ranks
        past, why = ((x if device == "GPU" or not x else x.replace("GPUs a node", "ranks a node")) for x in (past, why))
        r.update(placement=f"{N}x{G}", extrapolation=past or f"extrapolates: {p} ranks, past the measured")
        if pred is None or pred.interval is None:
            r["interval_from"] = f"bootstrap band of the world-size model only: {why or pred.reason}"
            continue
        base = r["time_s"]["value"] * r["speedup"]["value"]  # the one-rank time the speedups divide
        b = _batch(w, p)
        own_lo, own_hi = r["step_time_s"]["lo"], r["step_time_s"]["hi"]
        lo = pred.interval[0] if own_lo is None else min(pred.interval[0], own_lo)
        hi = pred.interval[1] if own_hi is None else max(pred.interval[1], own_hi)
        t_lo, t_hi = float(_total_time(w, p, lo)), float(_total_time(w, p, hi))
        for key, a, z in (("step_time_s", lo, hi), ("time_s", t_lo, t_hi), ("samples_per_s", b * p / hi, b * p / lo),
                          ("speedup", base / t_hi, base / t_lo), ("efficiency", base / t_hi / p, base / t_lo / p)):
            r[key] = {**r[key], "lo": min(a, r[key]["lo"] if r[key]["lo"] is not None else a),
                      "hi": max(z, r[key]["hi"] if r[key]["hi"] is not None else z)}
        r["interval_from"] = ("the world-size model's bootstrap band widened to the placement model's "
                              f"{pred.interval_from}")


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
    if v.get("measured"):
        return v["method"]
    if v.get("loo_mape_pct") is not None:
        how = "leave one placement out:" if "placement" in v.get("method", "") else "LOO MAPE"
        return f"{how} {v['loo_mape_pct']:.1f}% over p = {', '.join(map(str, v['world_sizes_validated']))}"
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
        out["reason"] = "no link class with a fitted model"
        return out
    ok = [c for c in cands if c["efficiency"]["value"] >= threshold]
    fastest = min(ok, key=lambda c: (c["time_s"]["value"], c["world_size"])) if ok else None
    cheapest = min(cands, key=lambda c: (c["gpu_hours"], c["world_size"]))
    out["fastest"], out["cheapest"] = fastest, cheapest
    return out
