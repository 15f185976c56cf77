"""Time to the held-out target at world sizes the study did not measure (strong and weak): steps to the
target times the performance model's step time, so a study of 1 and 2 ranks says where more ranks
stop paying.

In the strong experiment the global batch B is fixed, so DDP trains the same sequence of updates at
every world size (in exact arithmetic): the steps to the target, S = samples to target / B, do not
depend on the world size N, only the step time at per-rank batch B / N does. So

    time to target (N) = start + S x k x step_time(B / N, N)     (model.json's strong-work predictions)

S comes from the measured points (the median over the world sizes whose every repeat reached the
target; its interval spans their samples-to-target CIs), the step time with its bootstrap band from
the performance model, per link class. The training clock is not S median steps: time to target is
read off a clock that sums every step (so it runs at the mean step, and a heavy tail lifts the mean
far above the median) and the work between the step timers (probe steps' flat all-reduce, the loss
bookkeeping), and its first steps run slower than the rest. tables/heldout.clock_line fits the clock
at the held-out evaluations as start + step x rate; k = rate / the measured median step. Without
them the prediction undershot realdata's measured time to target by 22-27% at one rank (8 steps:
a 1 ms start is 20% of 5.3 ms) and 60-70% at two ranks on two cores (mean step 1.6-2x the median).
A predicted world size takes k and start from the measured world size of its class nearest below it
(a class never measured: from the measured multi-rank point with the smallest k, which predicts its
ranks soonest, so it cannot make "more ranks are slower" easier to say); that k stays what it was
is an assumption the text states. The interval multiplies the ends: [start + S_lo x k x step_lo,
start + S_hi x k x step_hi]. Beside each prediction: the class's leave-one-world-size-out error (the
performance model's held-out error), and at measured world sizes the prediction's error against the
measured time to target (small by construction where k and start came from that very point).

A fixed per-rank batch (the weak experiment's rule) changes B with N and so S: weak_steps takes S
from the critical batch's curve (tables/critical.py) anchored at the largest measured weak world size,
and the step time from the model's weak_predictions (its step at the weak per-rank batch).

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
from ..common.fmt import interval, seconds, sig
from ..common.stats import known
from .rules import guideline, ranks, rounded


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


def clock_terms(measured: pd.DataFrame) -> list[dict]:
    """Per measured row with the clock's fit (tables/heldout.clock_line): {'world_size',
    'placement_class', 'k' (clock rate / median step), 'start_s' (at least 0)}."""
    need = ("clock_step_s_mean", "clock_start_s_mean", "step_time_s_mean")
    if any(c not in measured for c in need):
        return []
    out = []
    for _, r in measured.iterrows():
        rate, start, step = (float(r[c]) for c in need)
        if known(rate) and known(start) and known(step) and step > 0 and rate > 0:
            out.append({"world_size": int(r["world_size"]), "placement_class": r["placement_class"],
                        "k": rate / step, "start_s": max(start, 0.0)})
    return out


def clock_for(terms: list[dict], world: int, cls: str) -> dict | None:
    """The clock terms a prediction at (world, cls) uses: its class's measured point nearest below
    it (else nearest above); a class never measured: the measured multi-rank point with the smallest
    k; None: no clock fit (the prediction is then S x the median step, as the model gives it)."""
    mine = [t for t in terms if t["placement_class"] == cls]
    if mine:
        below = [t for t in mine if t["world_size"] <= world]
        return max(below, key=lambda t: t["world_size"]) if below else min(mine, key=lambda t: t["world_size"])
    multi = [t for t in terms if t["world_size"] > 1]
    return min(multi, key=lambda t: t["k"]) if multi else None


def predictions(entry: dict, steps, measured: pd.DataFrame, key: str = "predictions") -> list[dict]:
    """Every predicted (world size, link class) time to target, with the clock terms it used, the
    class's held-out error and, where that configuration was measured, the error against it.
    `steps`: (S, S_lo, S_hi) at every world size (strong), or a function of the world size (weak);
    `key`: the class's predictions in model.json (predictions: the strong work; weak_predictions)."""
    terms = clock_terms(measured)
    out = []
    for cls, e in sorted(entry.get("placements", {}).items()):
        if cls not in REAL_PLACEMENTS or not e.get(key):
            continue
        loo = (e.get("validation") or {}).get("loo_mape_pct")
        for p in e[key]:
            s, s_lo, s_hi = steps(int(p["world_size"])) if callable(steps) else steps
            v, lo, hi = _band(p["step_time_s"])
            c = clock_for(terms, int(p["world_size"]), cls)
            k, t0 = (c["k"], c["start_s"]) if c else (1.0, 0.0)
            row = {"world_size": int(p["world_size"]), "placement_class": cls, "time_s": t0 + s * k * v,
                   "lo": t0 + s_lo * k * lo, "hi": t0 + s_hi * k * hi, "extrapolated": bool(p["extrapolated"]),
                   "loo_error_pct": loo, "measured_s": None, "error_pct": None, "clock_k": k if c else None,
                   "clock_start_s": t0 if c else None,
                   "clock_from": f"{ranks(c['world_size'])}, {c['placement_class']}" if c else None,
                   "steps": s}
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
            "measured_s": rounded(r["measured_s"], 6), "error_vs_measured_pct": rounded(r["error_pct"], 1),
            "clock_ratio": rounded(r["clock_k"], 3), "clock_start_s": rounded(r["clock_start_s"], 6),
            "clock_from": r["clock_from"], "steps_to_target": rounded(r["steps"], 2)}


def _where(r: dict) -> str:
    return f"{r['world_size']} rank{'s' if r['world_size'] > 1 else ''} ({r['placement_class']})"


def weak_steps(reached: pd.DataFrame, crit: dict | None):
    """The weak experiment's steps to the target at N ranks (global batch B = N x b): the McCandlish
    curve E(B) = E_min (1 + B / B_crit) with B_crit from the batch experiment (critical_batch.json) and
    its level anchored at the largest measured weak world size, whose samples to target E_a at B_a are
    this experiment's own (the batch experiment's target may differ: only the curve's shape is
    borrowed). E(B) = E_a (1 + B / B_crit) / (1 + B_a / B_crit); S = E(B) / B. The band takes E_a's CI
    and both ends of B_crit's interval (an unbounded upper end is the limit of no growth: E flat).
    Returns (steps(N), text) or a reason string."""
    if not crit:
        return "no critical batch (add experiments.batch: steps to the target change with the global batch)"
    if crit.get("status") != "ok" or not crit.get("b_crit") or not crit.get("ci"):
        return f"the critical batch is {crit.get('status')}: {crit.get('why', '')}"
    r = reached[reached["samples_to_target"].notna() & reached["batch_per_rank"].notna()]
    if r.empty:
        return "no measured weak world size reached the target"
    a = r.loc[r["world_size"].astype(int).idxmax()]
    b, w_a = float(a["batch_per_rank"]), int(a["world_size"])
    b_a = b * w_a
    e = float(a["samples_to_target"])
    e_lo = float(a["samples_to_target_ci_lo"]) if known(a.get("samples_to_target_ci_lo")) else e
    e_hi = float(a["samples_to_target_ci_hi"]) if known(a.get("samples_to_target_ci_hi")) else e
    bc, (lo, hi) = float(crit["b_crit"]), crit["ci"]

    def f(B: float, x: float | None) -> float:
        return 1.0 if x is None or not math.isfinite(x) else (1 + B / max(x, 1e-12)) / (1 + b_a / max(x, 1e-12))

    def steps(n: int) -> tuple[float, float, float]:
        B = b * n
        ends = (f(B, lo), f(B, hi))
        return e * f(B, bc) / B, e_lo * min(ends) / B, e_hi * max(ends) / B

    band = f"[{sig(lo)}, {sig(hi)}]" if hi is not None else f"[{sig(lo)}, unbounded]"
    text = (f"steps to the target at N x {sig(b)} samples from the critical batch's curve (B_crit {sig(bc)} {band}), "
            f"anchored at {ranks(w_a)}: {e:.0f} samples at global batch {b_a:.0f}")
    return steps, text


def predicted_guideline(exp: str, model: str, reached: pd.DataFrame, best, model_json: dict | None,
                        critical: dict | None = None) -> dict | None:
    """The predicted-time-to-target guideline of one model (None: nothing to predict from). Strong:
    the fixed global batch's measured steps; weak: the critical batch's steps (weak_steps)."""
    if best is None or not model_json or exp not in ("strong", "weak"):
        return None
    entry = (model_json.get("models") or {}).get(model)
    if not entry:
        return None
    gid = f"time-to-accuracy-predicted-{exp}-{model}"
    if exp == "weak":
        if not entry.get("weak_work"):
            return None
        got = weak_steps(reached, (critical or {}).get(model) if critical is not None else None)
        rule = ("predicted, not measured: steps to the target at N x the per-rank batch from the critical batch "
                "(E(B) = E_min (1 + B / B_crit), anchored at the largest measured world size) x the performance "
                "model's step time at the weak per-rank batch x the training clock's measured ratio to the median "
                "step, plus its start; advice as for the strong prediction")
        if isinstance(got, str):
            text = f"{exp}, {model}: no time to the target predicted past the measured world sizes: {got}."
            return guideline(gid, "time-to-accuracy", "not_enough_data", text, rule, {})
        steps, how_steps = got
        rows = predictions(entry, steps, reached, "weak_predictions")
        nums_steps = {"steps_source": how_steps}
    else:
        if (entry.get("work") or {}).get("batch_rule") != "fixed global batch":
            return None
        fixed = steps_to_target(reached)
        if fixed is None:
            return None
        steps, s_lo, s_hi = fixed
        how_steps = (f"steps to the target {interval(steps, s_lo, s_hi)} at global batch "
                     f"{int(reached['global_batch'].dropna().iloc[0])}")
        rows = predictions(entry, fixed, reached)
        nums_steps = {"steps_to_target": [rounded(steps, 2), rounded(s_lo, 2), rounded(s_hi, 2)]}
        rule = ("predicted, not measured: steps to the target at the fixed global batch (measured) x the performance "
                "model's step time at each world size x the training clock's measured ratio to the median step, plus "
                "the clock's slower start (tables/heldout.clock_line); advice when the model is validated and every "
                "world size past the measured soonest is predicted slower than it (band above its measured time and "
                "above the model's own prediction there)")
    if not rows:
        return None
    return _decide(gid, exp, model, rows, best, rule, how_steps, nums_steps)


def _decide(gid: str, exp: str, model: str, rows: list[dict], best, rule: str, how_steps: str,
            nums_steps: dict) -> dict:
    t_best = float(best["time_to_target_s"])
    soonest = min(rows, key=lambda r: r["time_s"])
    # the world sizes past the measured soonest that were not measured: where one was, its measured time
    # decides (the measured guideline says so), not the model's prediction of it
    beyond = [r for r in rows if r["world_size"] > int(best["world_size"]) and r["measured_s"] is None]
    nums = {**nums_steps,
            "measured_soonest": {"world_size": int(best["world_size"]), "time_to_target_s": rounded(t_best, 6)},
            "predicted_soonest": _num(soonest), "predictions": [_num(r) for r in rows]}
    checked = [r for r in rows if r["error_pct"] is not None]
    err = ("; against the measured world sizes the prediction is off by "
           + ", ".join(f"{r['error_pct']:+.0f}% at {_where(r)}" for r in checked)) if checked else ""
    loos = [r["loo_error_pct"] for r in beyond if r["loo_error_pct"] is not None]
    clock = sorted({(r["clock_from"], r["clock_k"], r["clock_start_s"]) for r in rows if r["clock_from"]})
    how = ("; the clock ran " + ", ".join(f"{k:.2f}x the median step with a {sig(1e3 * t0)} ms start at {w}"
                                          for w, k, t0 in clock)
           + " (assumed the same at the world sizes predicted from it)") if clock else ""
    head = f"{exp}, {model}: predicted ({how_steps} x the model's step time{how}), not measured"
    sooner = [r for r in beyond if r["hi"] < t_best and r["extrapolated"]]
    unvalidated = [r for r in beyond if r["loo_error_pct"] is None]
    if not beyond:  # every world size it would predict was measured: the measured guideline answers
        return None
    if sooner:
        r = min(sooner, key=lambda x: x["time_s"])
        text = (f"{head}: {_where(r)} would reach it in {seconds(r['time_s'], r['lo'], r['hi'])}, sooner "
                f"than the measured soonest {ranks(best['world_size'])} ({seconds(t_best)}){err}.")
        return guideline(gid, "time-to-accuracy", "inconclusive", text, rule, nums,
                         f"measure {_where(r)}: a prediction does not replace a measurement", [])
    # slower than the measured soonest and than the model's own prediction there: a bias of the model
    # (its error against the measured points) shifts both predictions alike and cannot make the advice
    own = [r["hi"] for r in rows if r["world_size"] == int(best["world_size"])]
    bar = max([t_best, *own])
    slower = all(r["lo"] > bar for r in beyond)
    nearest = min(beyond, key=lambda r: (r["world_size"], r["time_s"]))
    tail = (f"at {_where(nearest)} {seconds(nearest['time_s'], nearest['lo'], nearest['hi'])} against "
            f"{seconds(t_best)} measured at {ranks(best['world_size'])}")
    if slower and not unvalidated:
        text = (f"{head}: past {ranks(best['world_size'])} more ranks make training to this target slower, "
                f"{tail} (model's held-out error up to {max(loos):.0f}%){err}.")
        return guideline(gid, "time-to-accuracy", "advice", text, rule, nums)
    why = ("the model's communication term for " + ", ".join(sorted({r["placement_class"] for r in unvalidated}))
           + " is not validated (one world size of that class)") if unvalidated else "the bands overlap"
    text = f"{head}: {tail}; {why}{err}."
    # a world size already measured needs no measuring: what settles it then is a validated class
    todo = [] if nearest["measured_s"] is not None else [f"measure {_where(nearest)}"]
    if unvalidated:
        todo.append("measure a second world size of " + ", ".join(sorted({r["placement_class"] for r in unvalidated})))
    return guideline(gid, "time-to-accuracy", "inconclusive", text, rule, nums,
                     "; ".join(todo) or "more repeats of the world sizes whose bands overlap", [])
