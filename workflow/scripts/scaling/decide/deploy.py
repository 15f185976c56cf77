"""The deployment guideline: where to run the configured strong-scaling work, from the performance
model's predictions, advice only where the model's held-out error is within report.model_max_mape_pct."""

from __future__ import annotations

from ..common.columns import REAL_PLACEMENTS, SINGLE
from ..common.fmt import cost, seconds
from .rules import guideline, ranks


def recommendation(model_json: dict | None, max_mape_pct: float) -> list[dict]:
    """Per model: where to run the configured strong-scaling work, from the performance model."""
    rule = (f"performance model (model.json): least predicted time with predicted efficiency ≥ the threshold, and "
            f"lowest cost (hours of the devices the ranks ran on), over the real link classes; advice only when the model's leave-one-world-size-"
            f"out MAPE (leave one placement out, for the placement model of imported runs) is known and ≤ "
            f"{max_mape_pct:g}% for every link class it compares, and, for a pick past what was measured, its "
            f"efficiency interval (the placement model's) clears the threshold")
    models = (model_json or {}).get("models") or {}
    if not models:
        reason = (model_json or {}).get("reason", "no performance model was fitted")
        return [guideline("deploy", "deploy", "not_enough_data", f"a performance model ({reason}).", rule, {})]
    out = []
    for model, m in sorted(models.items()):
        if m.get("work") is None:
            continue  # not in the strong experiment: no configured work to place
        rec = m.get("recommendation")
        gid = f"deploy-{model}"
        if not rec or rec.get("reason") or "cheapest" not in rec:
            why = (rec or {}).get("reason") or m.get("reason") or "no prediction"
            out.append(guideline(gid, "deploy", "not_enough_data", f"{model}: a validated prediction ({why}).", rule, {}))
            continue
        w = rec["work"]
        batch = (f"global batch {w['global_batch']}" if w["batch_rule"] == "fixed global batch"
                 else f"per-rank batch {w['batch_per_rank']}")
        work = f"{w['samples']:,} samples × {w['epochs']} epoch{'s' if w['epochs'] != 1 else ''}, {batch}"

        def pick(c):
            t = c["time_s"]
            extra = ", extrapolated" if c["extrapolated"] else ""
            where = f" ({c['placement']})" if c.get("placement") else f", {c['placement_class']}"
            return (f"{ranks(c['world_size'])}{where}: {seconds(t['value'], t['lo'], t['hi'])}, "
                    f"{cost(c['gpu_hours'], m.get('device'))}, efficiency {c['efficiency']['value']:.0%}{extra} (model error: "
                    f"{c['validation']})")

        fastest, cheapest = rec.get("fastest"), rec["cheapest"]
        nums = {"work": w, "efficiency_threshold": rec["efficiency_threshold"],
                "fastest": {k: fastest[k] for k in ("world_size", "placement_class", "gpu_hours")} if fastest else None,
                "cheapest": {k: cheapest[k] for k in ("world_size", "placement_class", "gpu_hours")}}
        text = (f"{model}, {work}: fastest with predicted efficiency ≥ {rec['efficiency_threshold']:.0%}: "
                f"{pick(fastest) if fastest else 'none'}; lowest cost: {pick(cheapest)}.")
        if rec.get("not_considered"):
            text += " Not considered: " + "; ".join(rec["not_considered"]) + "."
        # every class the choice compared, not only the winners': an untested prediction for 8 ranks
        # decides "1 rank is fastest" as much as the 1-rank prediction does
        vals = {cls: e["validation"] for cls, e in m["placements"].items()
                if e.get("predictions") and cls in REAL_PLACEMENTS and not e["validation"].get("measured")}
        bad = [(cls, v) for cls, v in vals.items() if v.get("loo_mape_pct") is None or v["loo_mape_pct"] > max_mape_pct]
        if bad:
            settle = "; ".join(f"{cls}: " + _settle(cls, v, max_mape_pct) for cls, v in bad)
            out.append(guideline(gid, "deploy", "inconclusive", text, rule, nums, settle))
            continue
        # past what was measured, the placement model's prediction interval is all there is: where it
        # straddles the threshold, it cannot say the pick clears it (inside, the left-out error gates it)
        eff = (fastest or {}).get("efficiency") or {}
        thr = rec["efficiency_threshold"]
        if fastest and fastest.get("extrapolation") and eff.get("lo") is not None and eff["lo"] < thr:
            settle = (f"{ranks(fastest['world_size'])} ({fastest.get('placement', fastest['placement_class'])}): "
                      f"predicted efficiency {eff['value']:.0%} [{eff['lo']:.0%}, {min(eff['hi'], 1.0):.0%}] "
                      f"straddles {thr:.0%} ({fastest['extrapolation']}): measure that placement")
            out.append(guideline(gid, "deploy", "inconclusive", text, rule, nums, settle))
            continue
        out.append(guideline(gid, "deploy", "advice", text, rule, nums))
    if not out:
        out.append(guideline("deploy", "deploy", "not_enough_data", "strong-scaling points: the recommendation "
                             "places the configured strong-scaling work.", rule, {}))
    return out


def _settle(cls: str, v: dict, max_mape_pct: float) -> str:
    """What would validate one placement class. The single-rank class has one world size: leaving it out
    predicts the one-rank runs from the compute the larger world sizes imply, and no further world
    size of its own exists to measure."""
    if v.get("loo_mape_pct") is None:
        return f"{v.get('reason', 'not validated')} — measure three or more world sizes there"
    head = f"LOO MAPE {v['loo_mape_pct']:.1f}% > {max_mape_pct:g}%"
    if cls == SINGLE:
        return (f"{head}: the compute the DDP runs imply does not carry to one rank (ranks sharing a host's cores, "
                f"or DDP's own cost); more repeats will not settle it: measure where each rank has cores of its own")
    return f"{head}: more repeats or world sizes"


def held_out(holdout: dict | None, max_error_pct: float) -> list[dict]:
    """Per model in holdout.json (report.holdout): the points held out, predicted beside measured;
    advice (the model extrapolated to them) when every error is within report.model_max_mape_pct."""
    out = []
    rule = (f"report.holdout: the placement model fitted without the held-out placements predicts their "
            f"steps (model/holdout.py, model/placement.py); advice when every |error| ≤ {max_error_pct:g}% "
            f"(report.model_max_mape_pct)")
    for model, rows in sorted((holdout or {}).items()):
        done = [r for r in rows if r.get("predicted_step_s") is not None]
        if not done:
            why = "; ".join(sorted({r.get("reason", "") for r in rows}))
            out.append(guideline(f"holdout-{model}", "deploy", "not_enough_data",
                                 f"{model}: a prediction of the held-out points ({why}).", rule,
                                 {"held_out": _shown(rows)}))
            continue
        parts = []
        for r in done:
            lo, hi = r["interval"] or (None, None)
            band = f" [{lo * 1e3:.1f}, {hi * 1e3:.1f}]" if lo is not None else ""
            inside = "" if lo is None else (", inside it" if lo <= r["measured_step_s"] <= hi else ", outside it")
            past = f", {r['extrapolated']}" if r.get("extrapolated") else ""
            parts.append(f"{r['experiment']} at {r['world_size']} ranks ({r['nodes']}x{r['gpus_per_node']}): "
                         f"{r['predicted_step_s'] * 1e3:.1f} ms{band} predicted, {r['measured_step_s'] * 1e3:.1f} ms "
                         f"measured{inside} ({r['error_pct']:+.1f}%{past})")
        places = sorted({(r["nodes"], r["gpus_per_node"]) for r in rows})
        worst = max(abs(r["error_pct"]) for r in done)
        refused = [f"{r['nodes']}x{r['gpus_per_node']}: {r['reason']}" for r in rows if r.get("predicted_step_s") is None]
        text = (f"{model}: fitted without {', '.join(f'{n}x{g}' for n, g in places)}, the performance model "
                f"predicts their step: " + "; ".join(parts) + f". Interval: {done[0]['interval_from']}."
                + (f" Not predicted: {'; '.join(refused)}." if refused else ""))
        status = "advice" if worst <= max_error_pct else "inconclusive"
        settle = None if status == "advice" else (f"the model misses a held-out point by {worst:.0f}%: measure the "
                                                  f"world sizes between, or a term the model lacks is at work")
        out.append(guideline(f"holdout-{model}", "deploy", status, text, rule, {"held_out": _shown(rows)}, settle))
    return out


# what the guideline's table shows of a holdout.json row: the interval's method is in its text, and the
# plausible forms (up to 79 names) are counted, not listed (holdout.json keeps them)
SHOWN = ("experiment", "nodes", "gpus_per_node", "world_size", "measured_step_s", "predicted_step_s", "interval",
         "error_pct", "extrapolated", "reason")


def _shown(rows: list[dict]) -> list[dict]:
    return [{**{k: r.get(k) for k in SHOWN}, "plausible_forms": len(r.get("forms") or [])} for r in rows]
