"""Time to the held-out target at world sizes the study did not measure (strong scaling): steps to the
target times the performance model's step time, so a study of 1 and 2 ranks says where more ranks
stop paying.

In the strong experiment the global batch B is fixed, so DDP trains the same sequence of updates at
every world size (in exact arithmetic): the steps to the target, S = samples to target / B, do not
depend on the world size N, only the step time at per-rank batch B / N does. So

    time to target (N) = S x step_time(B / N, N)        (model.json's strong-work predictions)

S comes from the measured points (the median over the world sizes whose every repeat reached the
target; its interval spans their samples-to-target CIs), the step time with its bootstrap band from
the performance model, per link class. The interval multiplies the ends: [S_lo x step_lo, S_hi x
step_hi]. Beside each prediction: the class's leave-one-world-size-out error (the model's held-out
error), and at measured world sizes the prediction's error against the measured time to target.
On realdata the prediction undershoots the measured time to target by 19-42% (BENCHMARKS.md), not
yet explained: the error is printed beside every prediction.

A fixed per-rank batch (the weak experiment's rule) changes B with N and so S: that needs the
critical batch (tables/critical.py) and is not predicted here.

The guideline (id time-to-accuracy-predicted-strong-<model>, marked predicted):
- "advice" when the class's model is validated (a leave-one-out error exists) and every predicted
  world size beyond the measured soonest has its band's lower end above both the measured soonest's
  time and the upper end of the model's own prediction there: past it more ranks are predicted to
  make training slower;
- "inconclusive" with "measure N ranks" when a world size not measured is predicted sooner (its
  band's upper end below the measured soonest's time) or when the bands overlap, or the model is
  not validated: a prediction never replaces a measurement.
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import REAL_PLACEMENTS
from ..common.stats import known
from .rules import guideline, rounded


def steps_to_target(reached: pd.DataFrame) -> tuple[float, float, float] | None:
    """(S, S_lo, S_hi) steps to the target at the strong experiment's fixed global batch."""
    r = reached[reached["samples_to_target"].notna() & reached["global_batch"].notna()]
    if r.empty:
        return None
    b = r["global_batch"].astype(float)
    s = float((r["samples_to_target"].astype(float) / b).median())
    lo = (r["samples_to_target_ci_lo"].astype(float) / b).min() if "samples_to_target_ci_lo" in r else math.nan
    hi = (r["samples_to_target_ci_hi"].astype(float) / b).max() if "samples_to_target_ci_hi" in r else math.nan
    return s, float(lo) if known(lo) else s, float(hi) if known(hi) else s


def _band(b: dict) -> tuple[float, float, float]:
    v = float(b["value"])
    return v, float(b["lo"]) if b.get("lo") is not None else v, float(b["hi"]) if b.get("hi") is not None else v


def predictions(entry: dict, steps: tuple[float, float, float], measured: pd.DataFrame) -> list[dict]:
    """Every predicted (world size, link class) time to target, with the class's held-out error and,
    where that configuration was measured, the error against it."""
    s, s_lo, s_hi = steps
    out = []
    for cls, e in sorted(entry.get("placements", {}).items()):
        if cls not in REAL_PLACEMENTS or not e.get("predictions"):
            continue
        loo = (e.get("validation") or {}).get("loo_mape_pct")
        for p in e["predictions"]:
            v, lo, hi = _band(p["step_time_s"])
            row = {"world_size": int(p["world_size"]), "placement_class": cls, "time_s": s * v,
                   "lo": s_lo * lo, "hi": s_hi * hi, "extrapolated": bool(p["extrapolated"]),
                   "loo_error_pct": loo, "measured_s": None, "error_pct": None}
            m = measured[(measured["world_size"] == row["world_size"]) & (measured["placement_class"] == cls)]
            if len(m):
                row["measured_s"] = float(m["time_to_target_s"].iloc[0])
                row["error_pct"] = 100 * (row["time_s"] / row["measured_s"] - 1)
            out.append(row)
    return out


def _num(r: dict) -> dict:
    return {"world_size": r["world_size"], "placement_class": r["placement_class"],
            "time_to_target_s": rounded(r["time_s"], 6), "band": [rounded(r["lo"], 6), rounded(r["hi"], 6)],
            "extrapolated": r["extrapolated"], "model_loo_error_pct": rounded(r["loo_error_pct"], 1),
            "measured_s": rounded(r["measured_s"], 6), "error_vs_measured_pct": rounded(r["error_pct"], 1)}


def _where(r: dict) -> str:
    return f"{r['world_size']} rank{'s' if r['world_size'] > 1 else ''} ({r['placement_class']})"


def predicted_guideline(exp: str, model: str, reached: pd.DataFrame, best, model_json: dict | None) -> dict | None:
    """The predicted-time-to-target guideline of one model (None: nothing to predict from)."""
    if exp != "strong" or best is None or not model_json:
        return None
    entry = (model_json.get("models") or {}).get(model)
    if not entry or (entry.get("work") or {}).get("batch_rule") != "fixed global batch":
        return None
    steps = steps_to_target(reached)
    if steps is None:
        return None
    rows = predictions(entry, steps, reached)
    if not rows:
        return None
    gid = f"time-to-accuracy-predicted-{exp}-{model}"
    rule = ("predicted, not measured: steps to the target at the fixed global batch (measured) x the performance "
            "model's step time at each world size; advice when the model is validated and every world size past "
            "the measured soonest is predicted slower than it (band above its measured time and above the "
            "model's own prediction there)")
    t_best = float(best["time_to_target_s"])
    soonest = min(rows, key=lambda r: r["time_s"])
    beyond = [r for r in rows if r["world_size"] > int(best["world_size"])]
    s, s_lo, s_hi = steps
    nums = {"steps_to_target": [rounded(s, 2), rounded(s_lo, 2), rounded(s_hi, 2)],
            "measured_soonest": {"world_size": int(best["world_size"]), "time_to_target_s": rounded(t_best, 6)},
            "predicted_soonest": _num(soonest), "predictions": [_num(r) for r in rows]}
    checked = [r for r in rows if r["error_pct"] is not None]
    err = ("; against the measured world sizes the prediction is off by "
           + ", ".join(f"{r['error_pct']:+.0f}% at {_where(r)}" for r in checked)) if checked else ""
    loos = [r["loo_error_pct"] for r in beyond if r["loo_error_pct"] is not None]
    head = (f"{exp}, {model}: predicted (steps to the target {s:.0f} [{s_lo:.0f}, {s_hi:.0f}] at global batch "
            f"{int(reached['global_batch'].dropna().iloc[0])} x the model's step time), not measured")
    sooner = [r for r in beyond if r["hi"] < t_best and r["extrapolated"]]
    unvalidated = [r for r in beyond if r["loo_error_pct"] is None]
    if not beyond:
        text = f"{head}: nothing past {int(best['world_size'])} ranks to predict{err}."
        return guideline(gid, "time-to-accuracy", "not_enough_data", text, rule, nums)
    if sooner:
        r = min(sooner, key=lambda x: x["time_s"])
        text = (f"{head}: {_where(r)} would reach it in {r['time_s']:.4g} s [{r['lo']:.4g}, {r['hi']:.4g}], sooner "
                f"than the measured soonest {int(best['world_size'])} rank(s) ({t_best:.4g} s){err}.")
        return guideline(gid, "time-to-accuracy", "inconclusive", text, rule, nums,
                         f"measure {_where(r)}: a prediction does not replace a measurement", [])
    # slower than the measured soonest and than the model's own prediction there: a bias of the model
    # (its error against the measured points) shifts both predictions alike and cannot make the advice
    own = [r["hi"] for r in rows if r["world_size"] == int(best["world_size"])]
    bar = max([t_best, *own])
    slower = all(r["lo"] > bar for r in beyond)
    nearest = min(beyond, key=lambda r: (r["world_size"], r["time_s"]))
    tail = (f"at {_where(nearest)} {nearest['time_s']:.4g} s [{nearest['lo']:.4g}, {nearest['hi']:.4g}] against "
            f"{t_best:.4g} s measured at {int(best['world_size'])} rank(s)")
    if slower and not unvalidated:
        text = (f"{head}: past {int(best['world_size'])} rank(s) more ranks make training to this target slower, "
                f"{tail} (model's held-out error up to {max(loos):.0f}%){err}.")
        return guideline(gid, "time-to-accuracy", "advice", text, rule, nums)
    why = ("the model's communication term for " + ", ".join(sorted({r["placement_class"] for r in unvalidated}))
           + " is not validated (one world size of that class)") if unvalidated else "the bands overlap"
    text = f"{head}: {tail}; {why}{err}."
    return guideline(gid, "time-to-accuracy", "inconclusive", text, rule, nums,
                     f"measure {_where(nearest)}" + (" and a second world size of each class" if unvalidated else ""),
                     [])
