"""The report's first screen: the answer to what the study asked, for a person deciding a deployment.

One sentence per model of the strong experiment (where to run it, what it takes there, why in the
terms of the data, what would change the answer, and whether that is advice or inconclusive with
what settles it), the time-to-target verdicts first where a held-out target is set, then one answer
table (one row per model) and the runs on one line. Everything here is read from the guidelines,
the performance model (model.json) and the strong table; nothing is computed that a section below
does not show in full.
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.stats import as_number
from . import operator
from .summary import CARDS

# a run state worth a tile on the first screen: anything but ok
NOT_OK = tuple(c for c in CARDS if c != "ok")


def known(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _decimals(lo: float, hi: float, scale: float) -> int:
    """Decimal places that keep the first significant digit of the interval's width (at least 0): a
    number is printed to the precision its interval supports, no further (width 0.085 s: 2 places)."""
    width = abs(hi - lo) * scale
    if width <= 0:
        return 2
    return max(0, -math.floor(math.log10(width)))


def interval(value, lo=None, hi=None, scale: float = 1.0, unit: str = "", floor: float | None = None) -> str:
    """'8% [1%, 60%]' style: value and interval rounded alike to what the interval supports; a lower
    end below `floor` (a quantity that cannot be negative) is shown as the floor itself."""
    if not known(value):
        return "–"
    if known(lo) and known(hi):
        if floor is not None:
            lo = max(lo, floor)
        nd = _decimals(lo, hi, scale)
        f = (lambda x: f"{x * scale:,.{nd}f}")
        if unit == "%":  # '8% [1%, 60%]': a percentage reads with its sign on each number
            return f"{f(value)}% [{f(lo)}%, {f(hi)}%]"
        return f"{f(value)} [{f(lo)}, {f(hi)}]{unit}"
    return f"{value * scale:,.3g}{unit}"


def seconds(value, lo=None, hi=None) -> str:
    """A duration in the unit that reads best (ms below a second, s below an hour, h above)."""
    if not known(value):
        return "–"
    if value < 1:
        return interval(value, lo, hi, 1e3, " ms", floor=0.0)
    if value < 3600:
        return interval(value, lo, hi, 1.0, " s", floor=0.0)
    return interval(value, lo, hi, 1 / 3600, " h", floor=0.0)


def where_text(world_size: int, nodes=None, per_node=None, device: str = "GPU") -> str:
    """One placement notation for the whole report: '1 rank', '1 node × 2 GPUs', '2 nodes × 4 GPUs'."""
    unit = "GPU" if device == "GPU" else "CPU rank"
    if int(world_size) == 1:
        return f"1 {unit}"
    if known(nodes) and known(per_node):
        n, g = int(nodes), int(per_node)
        return f"{n} node{'s' if n > 1 else ''} × {g} {unit}{'s' if g > 1 else ''}"
    return f"{int(world_size)} {unit}s"


def _device(points: pd.DataFrame | None) -> str:
    """'GPU' when any measured point ran on CUDA, else 'CPU' (the cost is then rank-hours)."""
    if points is not None and "device_type" in points and (points["device_type"].astype(str) == "cuda").any():
        return "GPU"
    return "CPU"


def cost_text(hours, device: str) -> str:
    """GPU-hours on GPUs, rank-hours on CPUs; a cost under 0.01 h in seconds, where it reads."""
    if not known(hours):
        return "–"
    unit = "GPU" if device == "GPU" else "rank"
    if hours < 0.01:
        return f"{hours * 3600:.2g} {unit}-seconds"
    return f"{hours:.2g} {unit}-hours"


def _measured_row(strong: pd.DataFrame | None, model: str, world_size: int, cls: str) -> dict | None:
    if strong is None or strong.empty:
        return None
    t = strong[(strong["model"] == model) & (strong["world_size"] == world_size)]
    if "ddp" in t:
        t = t[t["ddp"].astype(str) != "False"]
    if cls and "placement_class" in t and (t["placement_class"] == cls).any():
        t = t[t["placement_class"] == cls]
    return t.iloc[0].to_dict() if len(t) else None


def _guideline(guidelines: list[dict], gid: str) -> dict | None:
    return next((g for g in guidelines if g.get("id") == gid), None)


def _efficiency_why(g: dict | None, device: str) -> str | None:
    """'at 1 node × 2 CPU ranks it keeps 8% [1%, 60%] of ideal (threshold 75%)' from the
    strong-efficiency guideline: the first world size past the one chosen, or the largest kept."""
    if not g:
        return None
    n = g.get("numbers") or {}
    eff, ci = n.get("efficiency_by_world_size") or {}, n.get("efficiency_ci_by_world_size") or {}
    chosen, thr = n.get("chosen_world_size"), n.get("threshold")
    if not eff or chosen is None or thr is None:
        return None
    sizes = sorted(int(p) for p in eff)
    past = [p for p in sizes if p > int(chosen)]
    p = past[0] if past else int(chosen)
    lo, hi = (ci.get(str(p)) or [None, None])
    where = f"at {p} {'GPUs' if device == 'GPU' else 'ranks'}"
    val = interval(eff[str(p)], lo, hi, 100, "%", floor=0.0)
    if past:
        return f"{where} a step keeps only {val} of ideal efficiency (the threshold is {thr:.0%})"
    return f"efficiency stays at or above {thr:.0%} up to {p} ({val})"


def _bound_why(g: dict | None, world_size: int) -> str | None:
    """What bounds a step at the chosen world size, from the step-bound guideline."""
    if not g:
        return None
    n = g.get("numbers") or {}
    by = n.get("bound_by_world_size") or {}
    bound = by.get(str(world_size)) or n.get("bound")
    if not bound or bound == "undecided":
        return None
    if int(n.get("world_size", 0)) == int(world_size) and known(n.get("step_ms")):
        part = {"dispatch": n.get("dispatch_ms"), "compute": n.get("compute_ms"),
                "communication": n.get("communication_ms")}.get(bound)
        what = {"dispatch": "fixed cost (dispatch, launches, Python)", "compute": "per-sample compute",
                "communication": "exposed all-reduce"}[bound]
        if known(part):
            return f"its step is {bound}-bound: {part:.2g} ms of {n['step_ms']:.2g} ms is {what}"
    return f"its step is {bound}-bound there"


def _crossover(cross: dict | None, batch_now) -> str | None:
    """'a second rank pays off above ~520 samples per rank (now 128)' where the crossover is known."""
    if not cross:
        return None
    now = f" (now {int(batch_now)})" if known(batch_now) else ""
    if cross.get("source") == "model":
        b = cross["per_rank_batch"]
        if b < 1:
            return "nothing in the per-rank batch: by the model a second rank pays off at any batch"
        return f"a second rank pays off above about {float(f'{b:.2g}'):,.0f} samples per rank{now}"
    if cross.get("pays_off_from") is not None:
        return f"2 ranks beat 1 from {cross['pays_off_from']} samples per rank (measured){now}"
    return None


def model_answers(tables: dict, guidelines: list[dict], device: str) -> list[dict]:
    """One entry per model the performance model placed: the sentence's parts and the table's row."""
    model_json = tables.get("model") or {}
    strong = tables.get("strong")
    cross = operator.crossovers(strong, model_json)
    out = []
    for model, m in sorted((model_json.get("models") or {}).items()):
        rec = m.get("recommendation") or {}
        pick = rec.get("fastest") or rec.get("cheapest")
        deploy = _guideline(guidelines, f"deploy-{model}")
        if not pick or deploy is None:
            continue
        ws, cls = int(pick["world_size"]), pick.get("placement_class")
        row = _measured_row(strong, model, ws, cls) or {}
        where = where_text(ws, row.get("nodes"), row.get("gpus_per_node"), device)
        if pick.get("extrapolated"):
            where += " (beyond what was measured)"
        work = rec.get("work") or {}
        t = pick.get("time_s") or {}
        step = pick.get("step_time_s") or {}
        time_to_target = row.get("time_to_target_s")
        eff = pick.get("efficiency") or {}
        sp = pick.get("speedup") or {}
        mape = worst_error(m)
        why = [w for w in (_efficiency_why(_guideline(guidelines, f"strong-efficiency-{model}"), device),
                           _bound_why(_guideline(guidelines, f"step-bound-{model}"), ws)) if w]
        batch = work.get("global_batch") if work.get("batch_rule") == "fixed global batch" else work.get("batch_per_rank")
        # the crossover says when a second rank beats one: what would change an answer of one rank
        change = _crossover(cross.get(model), batch) if ws == 1 else None
        out.append({
            "model": model, "status": deploy["status"], "settle": plain_settle(deploy.get("settle")), "where": where,
            "predicted": (f"{seconds(t.get('value'), t.get('lo'), t.get('hi'))} for "
                          f"{work['samples']:,} samples × {work['epochs']} epoch{'s' if work['epochs'] != 1 else ''}, "
                          f"{seconds(step.get('value'), step.get('lo'), step.get('hi'))} a step"),
            "why": why, "change": change,
            "row": {"model": model, "where": where,
                    "speedup": interval(sp.get("value"), sp.get("lo"), sp.get("hi"), 1, "×") if ws > 1 else "1× (baseline)",
                    "efficiency": interval(eff.get("value"), eff.get("lo"), eff.get("hi"), 100, "%", floor=0.0) if ws > 1 else "100% (baseline)",
                    "time": (seconds(time_to_target, row.get("time_to_target_s_ci_lo"), row.get("time_to_target_s_ci_hi"))
                             + " to target (measured)" if known(time_to_target)
                             else seconds(t.get("value"), t.get("lo"), t.get("hi")) + " (predicted)"),
                    "cost": cost_text(pick.get("gpu_hours"), device),
                    "bound": _bound_word(_guideline(guidelines, f"step-bound-{model}"), ws),
                    "error": f"{mape:.0f}%" if mape is not None else "not validated",
                    "verdict": "advice" if deploy["status"] == "advice" else "inconclusive"},
        })
    return out


def worst_error(m: dict) -> float | None:
    """The model's largest leave-one-out error over its placement classes: the deploy rule needs every
    class it compares within the limit, so the largest is the one that decides."""
    errs = [as_number(((e or {}).get("validation") or {}).get("loo_mape_pct"))
            for e in (m.get("placements") or {}).values()]
    errs = [e for e in errs if e is not None]
    return max(errs) if errs else None


def plain_settle(text: str | None) -> str | None:
    """The deploy rule's settle in the answer's words (its own words stay in its section)."""
    if not text:
        return text
    for old, new in (("LOO MAPE", "model error"), ("intra-node:", "within one node:"),
                     ("inter-node:", "across nodes:"), (" > 25%", " (advice needs ≤ 25%)")):
        text = text.replace(old, new)
    return text


def _bound_word(g: dict | None, world_size: int) -> str:
    if not g:
        return "not probed"
    n = g.get("numbers") or {}
    return (n.get("bound_by_world_size") or {}).get(str(world_size)) or n.get("bound") or "undecided"


def sentence(a: dict) -> str:
    """The model's answer in one plain sentence (the status is shown beside it)."""
    text = f"{a['model']}: run on {a['where']}, predicted {a['predicted']}."
    if a["why"]:
        text += " Why: " + "; ".join(a["why"]) + "."
    if a["change"]:
        text += " What would change it: " + a["change"] + "."
    return text


def placement_text(provenance: dict | None) -> str:
    """'1 host (x), Intel Xeon ..., backend gloo': where the numbers come from, in one line."""
    prov = provenance or {}
    hosts = prov.get("hostnames") or []
    devices = prov.get("device_names") or prov.get("device_types") or []
    parts = [f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else None,
             ", ".join(map(str, devices[:2])) if devices else None,
             "backend " + ", ".join(map(str, prov.get("backends") or [])) if prov.get("backends") else None]
    return "; ".join(p for p in parts if p) or "an unrecorded machine"


def runs_line(status: dict) -> dict:
    """'43 of 43 runs ok' and the states that need a tile (failed, missing, running, ...)."""
    return {"text": f"{status['ok']} of {status['planned']} runs ok",
            "tiles": [c for c in NOT_OK if status.get(c)]}


def answer_context(tables: dict, guidelines: list[dict], status: dict) -> dict:
    """What the #answer section shows: verdicts, per-model sentences, the answer table, the runs."""
    device = _device(tables.get("points"))
    accuracy = [g for g in guidelines if g.get("topic") == "time-to-accuracy" and g.get("status") != "not_enough_data"]
    answers = model_answers(tables, guidelines, device)
    items = [{"status": g["status"], "text": g["text"].replace("Inconclusive: ", ""), "settle": g.get("settle")}
             for g in accuracy]
    items += [{"status": a["status"], "text": sentence(a), "settle": a["settle"]} for a in answers]
    if not items:
        items = [{"status": "not_enough_data", "settle": None,
                  "text": "No answer yet: the study has no strong-scaling points the performance model could "
                          "place (add experiments.strong, or wait for its points to finish)."}]
    return {"items": items, "runs": runs_line(status), "device": device,
            "headers": ["model", "where to run", "speedup", "efficiency", "time there", "cost",
                        "step bound", "model error", "verdict"],
            "rows": [a["row"] for a in answers]}

