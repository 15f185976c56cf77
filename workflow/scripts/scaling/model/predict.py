"""What the fitted performance model predicts (model/perf_model.py describes it): the configured
strong-scaling work of each model at powers of two per link class, with bootstrap bands, and the
recommendation drawn from those predictions (fastest with predicted efficiency >= the threshold,
fewest GPU-hours).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..common.columns import INTER, INTRA, REAL_PLACEMENTS, SIMULATED, SINGLE, is_emulated, model_family
from .fit import DDP_FIXED, predict_step, validate
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
    weak = work(df, model, "weak")
    if weak is not None and weak["batch_rule"] == "fixed per-rank batch":
        res["weak_work"] = weak
    else:
        weak = None
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
            if DDP_FIXED in comm:  # no no_sync probe: DDP's per-step cost beyond the all-reduce (model/fit.py)
                entry["comm"][DDP_FIXED] = _param(DDP_FIXED, comm[DDP_FIXED], [d.get(DDP_FIXED, 0.0) for d in cd],
                                                  comm["at_bound"].get(DDP_FIXED, False))
            entry["comm"].update(source=comm["source"], exposure_assumed=comm["exposure_assumed"])
            if comm["exposure_assumed"]:
                entry["comm"]["exposure"]["note"] = f"assumed 1 (no overlap): no {cls} training point measured"
        entry["validation"] = validate(train, sweep, model, cls)
        entry["predictions"] = _predictions(point, draws, fam, cls, w, P, n, max_p, factor, max_gpn,
                                            measured.get(cls, 0), _sharing(mine, cls))
        if weak is not None:  # the weak experiment's step at its per-rank batch (decide/totarget.py)
            entry["weak_predictions"] = _predictions(point, draws, fam, cls, weak, P, n, max_p, factor, max_gpn,
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
