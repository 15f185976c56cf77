"""Each implementation's rate from the study's one-rank lr sweep (training.lr: tuned): the
candidates' ok repeats judged on held-out data, the best one chosen, and why.

    fixed target (report.target.value)   the rate whose repeats all reach it, soonest in mean training
                                          time; none reaching it in every repeat: the best final metric
    otherwise (from_reference, none)      the best mean final held-out metric (report.target.metric,
                                          else val_loss); with from_reference the reference is then the
                                          tuned one-rank point, which trains at this rate

Ties (equal means: a small held-out split gives few distinct accuracies) go to the better second
criterion (the final val_loss where the metric is accuracy, else the sooner time), then to the smaller
rate (the safer one once larger global batches scale it up). A choice at either end of the candidates
says so: the best rate may lie beyond the list. Results/<study>/lr_tuning.json:
{model: {chosen, metric, criterion, candidates: [{lr, final_metric, final_val_loss, time_to_target_s,
reached, repeats, failed}], why, tuning_key}}, model = the sweep's model by its display name (every
table's, scaling/tables/tidy.py model_label); tuning_key = kan.contract.point.Point.tuning_key (implementation,
and data where not the default), what a tuned point of any width looks its rate up by.
"""

from __future__ import annotations

import math
import statistics

from .heldout import reaches


def sweep_run(rec: dict, key: str, model: str) -> dict:
    """One sweep record as (tuning key, model's display name, lr, ok, its held-out curve)."""
    curve = (rec.get("validation") or {}).get("curve") or []
    return {"key": key, "model": model, "lr": float(rec["point"]["train"]["lr"]),
            "ok": rec.get("status") == "ok" and bool(curve), "curve": curve, "reason": rec.get("reason")}


def _better(metric: str) -> int:
    """+1 where larger is better (accuracy), -1 where smaller is (loss)."""
    return 1 if metric == "val_accuracy" else -1


def _mean(values: list[float]) -> float:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(values) if values else math.nan


def _time_to(curve: list[dict], metric: str, value: float) -> float | None:
    for entry in sorted(curve, key=lambda e: e["step"]):
        v = entry.get(metric)
        if v is not None and reaches(float(v), value, metric):
            return float(entry["train_time_s"])
    return None


def candidate_summary(runs: list[dict], lr: float, metric: str, value: float | None) -> dict:
    """One candidate's ok repeats: mean final metric (and val_loss), mean time to a fixed target when
    every ok repeat reached it, how many reached it, ok and failed repeats."""
    ok = [r for r in runs if r["ok"]]
    times = [_time_to(r["curve"], metric, value) for r in ok] if value is not None else []
    reached = sum(t is not None for t in times)
    return {"lr": lr, "final_metric": _mean([r["curve"][-1].get(metric) for r in ok]),
            "final_val_loss": _mean([r["curve"][-1].get("val_loss") for r in ok]),
            "time_to_target_s": _mean(times) if ok and value is not None and reached == len(ok) else None,
            "reached": reached if value is not None else None, "repeats": len(ok), "failed": len(runs) - len(ok)}


def choose(runs: list[dict], candidates: list[float], target: dict | None) -> dict:
    """{model: choice} over the sweep's runs (sweep_run), for the study's candidates and report.target;
    each choice keeps the tuning key its runs share."""
    metric = (target or {}).get("metric") or "val_loss"
    value = (target or {}).get("value")
    out = {}
    for model in sorted({r["model"] for r in runs}):
        mine = [r for r in runs if r["model"] == model]
        keys = {r["key"] for r in mine}
        assert len(keys) == 1, f"{model}: one model's sweep points under tuning keys {sorted(keys)}"
        cands = [candidate_summary([r for r in mine if r["lr"] == lr], lr, metric, value) for lr in sorted(candidates)]
        out[model] = {**_pick(cands, metric, value), "tuning_key": keys.pop()}
    return out


def _pick(cands: list[dict], metric: str, value: float | None) -> dict:
    sign = _better(metric)
    have = [c for c in cands if c["repeats"] and not math.isnan(c["final_metric"])]
    base = {"metric": metric, "candidates": cands}
    if not have:
        failed = sum(c["failed"] for c in cands)
        return {**base, "chosen": None, "criterion": None,
                "why": f"no candidate has an ok sweep point with a held-out curve ({failed} failed): no rate to train with"}
    fast = [c for c in have if c["time_to_target_s"] is not None]

    def by_metric(c):  # smaller sorts first: the better final metric, then val_loss, then the smaller rate
        return (-sign * c["final_metric"], c["final_val_loss"] if metric != "val_loss" else 0.0, c["lr"])

    if value is not None and fast:
        best = min(fast, key=lambda c: (c["time_to_target_s"], *by_metric(c)))
        criterion = "time_to_target"
        why = (f"reaches {metric} {value:g} soonest: {best['time_to_target_s']:.3g} s of training (mean of "
               f"{best['repeats']} repeats)")
        others = sorted((c for c in fast if c is not best), key=lambda c: c["time_to_target_s"])
        if others:
            why += f"; next lr {others[0]['lr']:g} at {others[0]['time_to_target_s']:.3g} s"
        missed = [c for c in have if c["time_to_target_s"] is None]
        if missed:
            rates = ", ".join(f"{c['lr']:g}" for c in missed)
            why += f"; {rates} did not reach it in every repeat"
    else:
        best = min(have, key=by_metric)
        criterion = "final_metric"
        lead = (f"no rate reached {metric} {value:g} in every repeat, so the best final value: " if value is not None
                else "")
        why = f"{lead}best final {metric} {best['final_metric']:.4g} (mean of {best['repeats']} repeats)"
        others = sorted((c for c in have if c is not best), key=by_metric)
        if others:
            tie = " (a tie, broken by " + ("val_loss" if metric != "val_loss" else "the smaller rate") + ")" \
                if others[0]["final_metric"] == best["final_metric"] else ""
            why += f"; next lr {others[0]['lr']:g} at {others[0]['final_metric']:.4g}{tie}"
    lrs = [c["lr"] for c in cands]
    if len(lrs) > 1 and best["lr"] == max(lrs):
        why += "; the best rate is the largest tried: extend lr_candidates upward"
    elif len(lrs) > 1 and best["lr"] == min(lrs):
        why += "; the best rate is the smallest tried: extend lr_candidates downward"
    return {**base, "chosen": best["lr"], "criterion": criterion, "why": why}
