"""The performance model checked against a network whose truth is known: the emulated cluster's
links (launch/netemu.py), whose rate the study sets.

Link check, per emulated link class: the all-reduce sweep over that link, fitted as the model fits
every sweep (model/fit.py fit_sweep: t = 2 (p - 1) alpha + 2 (p - 1) / p * n * beta), must give back the
configured rate. A 2-rank ring all-reduce of n bytes sends n / 2 bytes per rank in each of its two
phases, n bytes per rank in all, both directions at once, and every node's egress is limited to R
bit/s: t = 2 alpha + n * 8 / R, so the recovered rate is 8 / beta bit/s (for any p the bus bandwidth
1 / beta is the per-node link rate in bytes/s). Pass: |recovered / configured - 1| <= TOLERANCE_PCT.
alpha is shown beside the link's round-trip time as the launcher's TCP ping-pong measured it (alpha
is one message's latency, so about half an RTT plus the library's own cost): compared, not gated on.

Across links: the model fitted at one rate predicts the training points at another. For a held-out
class B and a fitting class A: compute from every point not in B; alpha and beta from B's sweep (the
only thing a user would measure on a new link: a quick all-reduce sweep); exposure (how much of the
all-reduce a step does not hide) from A's training points. Error per configuration of B = 100 *
(predicted / measured mean step time - 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common.columns import is_emulated, link_rate
from ..common.fmt import plural
from .fit import CONFIG, fit_comm, fit_compute, fit_sweep, predict_step
from .terms import NotFitted

TOLERANCE_PCT = 15.0


def _median(df: pd.DataFrame, col: str) -> float | None:
    if col not in df or not df[col].notna().any():
        return None
    return float(df[col].median())


def link_check(df: pd.DataFrame, sweep: pd.DataFrame) -> list[dict]:
    """One entry per emulated link class that has a sweep (or points): configured vs recovered rate."""
    classes = sorted({c for c in pd.concat([df["placement_class"], sweep["placement_class"]]) if is_emulated(c)},
                     key=link_rate)
    out = []
    for cls in classes:
        here = df[df["placement_class"] == cls]
        entry = {"placement_class": cls, "configured_rate_mbit": link_rate(cls),
                 "probe_tcp_rate_mbit": _median(here, "link_tcp_mbit"), "rtt_us": _median(here, "link_rtt_us"),
                 "recovered_rate_mbit": None, "error_pct": None, "alpha_us": None, "pass": None,
                 "tolerance_pct": TOLERANCE_PCT}
        rows = sweep[sweep["placement_class"] == cls]
        fitted = fit_sweep(rows)
        if fitted is None:
            entry["reason"] = "no all-reduce sweep of two or more sizes over this link: run experiments.allreduce"
            out.append(entry)
            continue
        (alpha, beta), _ = fitted
        if beta <= 0:
            entry["reason"] = "the sweep's fitted beta is 0 (the times do not grow with the size): no rate to recover"
            out.append(entry)
            continue
        recovered = 8 / beta / 1e6
        err = 100 * (recovered / entry["configured_rate_mbit"] - 1)
        entry.update({"recovered_rate_mbit": recovered, "error_pct": err, "alpha_us": alpha * 1e6,
                      "pass": bool(abs(err) <= TOLERANCE_PCT),
                      "sizes_bytes": sorted(int(x) for x in rows["size_bytes"].unique()),
                      "num_runs": int(rows["rep"].nunique()) if "rep" in rows else None})
        out.append(entry)
    return out


def cross_link(train: pd.DataFrame, sweep: pd.DataFrame) -> list[dict]:
    """Held-out predictions of each emulated class's training points from a model fitted at another
    rate (see the module docstring). `train` is fit.training_rows(...)."""
    classes = sorted({c for c in train["placement_class"] if is_emulated(c)}, key=link_rate)
    out = []
    for held in classes:
        for fit_at in (c for c in classes if c != held):
            entry = {"held_out": held, "fitted_at": fit_at, "points": []}
            ab = fit_sweep(sweep[sweep["placement_class"] == held])
            if ab is None:
                entry["reason"] = f"no all-reduce sweep over the {link_rate(held):g} Mbit/s link"
                out.append(entry)
                continue
            (alpha, beta), _ = ab
            rest = train[train["placement_class"] != held]
            try:
                # exposure: fit_at's training points with fit_at's own sweep; then B's alpha, beta
                exposure = fit_comm(fit_at, train, sweep)["exposure"]
                fit = {"compute": {}, "comm": {held: {"alpha_s": alpha, "beta_s_per_byte": beta,
                                                      "exposure": exposure}}}
                for fam, g in rest.groupby("family"):
                    fit["compute"][fam] = fit_compute(g)
            except NotFitted as e:
                entry["reason"] = str(e)
                out.append(entry)
                continue
            entry.update(alpha_us=alpha * 1e6, recovered_rate_mbit=8 / beta / 1e6 if beta > 0 else None,
                         exposure=exposure)
            rows = train[train["placement_class"] == held]
            for key, g in rows.groupby(CONFIG):
                r = dict(zip(CONFIG, key))
                p = int(g["world_size"].iloc[0])
                try:
                    pred = float(predict_step(fit, g["family"].iloc[0], held, p, r["batch_per_rank"],
                                              g["num_params"].median(), g["grads_bytes"].median(),
                                              g["oversub"].median(), g["busy_cores"].median())[0])
                except NotFitted as e:
                    entry["points"].append({**_plain(r), "reason": str(e)})
                    continue
                measured = float(g["step_time_s"].mean())
                entry["points"].append({**_plain(r), "world_size": p, "measured_step_s": measured,
                                        "predicted_step_s": pred, "error_pct": 100 * (pred / measured - 1),
                                        "n_ok": int(len(g))})
            errs = [abs(x["error_pct"]) for x in entry["points"] if "error_pct" in x]
            entry["mape_pct"] = float(np.mean(errs)) if errs else None
            out.append(entry)
    return out


def _plain(d: dict) -> dict:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in d.items()}


def _f(v, fmt: str) -> str:
    return "–" if v is None else fmt.format(v)


def report_context(model_json: dict | None) -> dict | None:
    """The report's "model vs known link" block: one row per link, then the cross-link errors; None
    when the study ran no emulated link."""
    checks = (model_json or {}).get("link_check") or []
    if not checks:
        return None
    rows = []
    for c in checks:
        verdict = ("pass" if c["pass"] else "fail") if c.get("pass") is not None else "not checked"
        rows.append({"verdict": verdict, "cells": [
            c["placement_class"], _f(c["configured_rate_mbit"], "{:g}"), _f(c.get("recovered_rate_mbit"), "{:.1f}"),
            _f(c.get("error_pct"), "{:+.1f}%"), _f(c.get("probe_tcp_rate_mbit"), "{:.1f}"),
            _f(c.get("alpha_us"), "{:.0f}"), _f(c.get("rtt_us"), "{:.0f}")], "reason": c.get("reason")})
    cross = []
    for e in (model_json or {}).get("cross_link") or []:
        head = f"{link_rate(e['held_out']):g} Mbit/s predicted from a model fitted at {link_rate(e['fitted_at']):g} Mbit/s"
        if e.get("reason"):
            cross.append({"head": head, "text": f"not predicted: {e['reason']}", "points": []})
            continue
        pts = [[p["experiment"], p["model"], f"{p['nodes']}x{p['gpus_per_node']}", _f(p.get("measured_step_s"), "{:.4f}"),
                _f(p.get("predicted_step_s"), "{:.4f}"), _f(p.get("error_pct"), "{:+.1f}%")] for p in e["points"]
               if "error_pct" in p]
        cross.append({"head": head, "text": f"MAPE {_f(e.get('mape_pct'), '{:.1f}')}% over {plural(len(pts), 'configuration')} "
                                            f"(exposure {e['exposure']:.2f} from {link_rate(e['fitted_at']):g} Mbit/s; "
                                            f"α {e['alpha_us']:.0f} µs, β from the held-out link's sweep)",
                      "points": pts})
    return {"tolerance_pct": TOLERANCE_PCT, "rows": rows, "cross": cross,
            "passed": sum(r["verdict"] == "pass" for r in rows), "total": len(rows)}
