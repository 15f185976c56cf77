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

from ..common.columns import ddp_rows
from ..common.fmt import about, cost, error_text, interval, seconds
from ..common.stats import as_number, known, level_label
from . import operator
from .run_summary import CARDS, imported_text

# the answer table's headers that a Terms entry explains (the template links them)
TERMS = {"efficiency": "term-efficiency", "step bound": "term-bound", "model error": "term-loo",
         "verdict": "term-inconclusive"}
# a run state worth a tile on the first screen: anything but ok
NOT_OK = tuple(c for c in CARDS if c != "ok")


def where_text(world_size: int, nodes=None, per_node=None, device: str = "GPU") -> str:
    """One placement notation for the whole report, as make plan writes it: '1 GPU', '1 node x 2 CPU
    ranks', '2 nodes x 4 GPUs' (tables and guidelines use the short form '2x4')."""
    unit = "GPU" if device == "GPU" else "CPU rank"
    if int(world_size) == 1:
        return f"1 {unit}"
    if known(nodes) and known(per_node):
        n, g = int(nodes), int(per_node)
        return f"{n} node{'s' if n > 1 else ''} x {g} {unit}{'s' if g > 1 else ''}"
    return f"{int(world_size)} {unit}s"


def device_kind(provenance: dict | None) -> str:
    """'GPU' when any record ran on CUDA (provenance.json's device types), else 'CPU' (the cost is
    then rank-hours)."""
    return "GPU" if "cuda" in ((provenance or {}).get("device_types") or []) else "CPU"


def _measured_row(strong: pd.DataFrame | None, model: str, world_size: int, cls: str) -> dict | None:
    if strong is None or strong.empty:
        return None
    t = ddp_rows(strong)
    t = t[(t["model"] == model) & (t["world_size"] == world_size)]
    if cls and "placement_class" in t and (t["placement_class"] == cls).any():
        t = t[t["placement_class"] == cls]
    return t.iloc[0].to_dict() if len(t) else None


def _guideline(guidelines: list[dict], gid: str) -> dict | None:
    return next((g for g in guidelines if g.get("id") == gid), None)


def _efficiency_why(g: dict | None, device: str) -> str | None:
    """'at 2 ranks a step keeps only 8.0% [1.1%, 60%] of ideal efficiency (threshold 75%)' from the
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
    # the guideline decides at its own level (98.3% when three world sizes decide); the strong table's
    # intervals are 95%: each says its level, as the guideline's text does
    val = interval(eff[str(p)], lo, hi, 100, "%", floor=0.0, level=level_label(n.get("decision_level") or 0.95))
    if past:
        return f"{where} a step keeps only {val} of ideal efficiency (the threshold is {thr:.0%})"
    return f"efficiency stays at or above {thr:.0%} up to {p} ({val})"


def _next_step_why(strong: pd.DataFrame | None, model: str, world_size: int, device: str) -> str | None:
    """What the next measured world size spends its step on: 'there 3.4 of its 4.8 ms is exposed
    all-reduce' (the reason more ranks lose), from the strong table's means over repeats."""
    if strong is None or strong.empty:
        return None
    t = ddp_rows(strong)
    t = t[(t["model"] == model) & (t["world_size"] > world_size)].sort_values("world_size")
    if t.empty:
        return None
    r = t.iloc[0]
    step, exposed = as_number(r.get("step_time_s_mean")), as_number(r.get("exposed_comm_s_mean"))
    if not step or exposed is None or exposed <= 0:
        return None
    return (f"at {int(r['world_size'])} {'GPUs' if device == 'GPU' else 'ranks'}, {1e3 * exposed:.2g} ms of its "
            f"{1e3 * step:.2g} ms step is all-reduce not hidden behind the backward pass")


def joined(why: list[str]) -> list[str]:
    """Two reasons about the same world size read as one: 'at 2 ranks a step keeps only 8% ... : 3.4 ms
    of its 4.8 ms step is all-reduce ...'."""
    out: list[str] = []
    for w in why:
        if out and w.startswith("at ") and out[-1].startswith(w.split(",")[0]):
            out[-1] += ": " + w.split(", ", 1)[1]
        else:
            out.append(w)
    return out


def _without_ddp(strong: pd.DataFrame | None, model: str, world_size: int) -> str | None:
    """On one rank DDP only costs: where the plain model (no DDP) is faster beyond its interval, say so."""
    if strong is None or strong.empty or world_size != 1 or "speedup_vs_nonddp" not in strong:
        return None
    t = ddp_rows(strong)
    t = t[(t["model"] == model) & (t["world_size"] == 1)]
    if t.empty:
        return None
    r = t.iloc[0]
    v, hi = as_number(r.get("speedup_vs_nonddp")), as_number(r.get("speedup_vs_nonddp_ci_hi"))
    if v is None or hi is None or hi >= 1:
        return None
    return f"on one rank leave DDP out: the plain model runs {1 / v:.2g}× as fast"


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
        # the anatomy probe ran in the strong experiment's DDP points: at one rank that is the DDP step,
        # not the plain step the answer's time may come from
        where = "on 1 rank under DDP" if int(world_size) == 1 else _on(world_size)
        if known(part):
            return f"{where} its step is {bound}-bound: {part:.2g} ms of {n['step_ms']:.2g} ms is {what}"
    return f"{_on(world_size)} its step is {bound}-bound"


def _on(world_size: int) -> str:
    return "on 1 rank" if int(world_size) == 1 else f"at {int(world_size)} ranks"


def _crossover(cross: dict | None, batch_now) -> str | None:
    """'a second rank pays off above ~520 samples per rank (now 128)' where the crossover is known."""
    if not cross:
        return None
    if cross.get("source") == "model":
        b = cross["per_rank_batch"]
        if b < 1:
            return "nothing in the per-rank batch: by the model a second rank pays off at any batch"
        beyond = "; the model's prediction, beyond the batches measured" if known(batch_now) and b > batch_now else ""
        now = f" (now {int(batch_now)}{beyond})" if known(batch_now) else ""
        return f"a second rank pays off above about {about(b)} samples per rank{now}"
    if cross.get("pays_off_from") is not None:
        now = f" (now {int(batch_now)})" if known(batch_now) else ""
        return f"2 ranks beat 1 from {cross['pays_off_from']} samples per rank (measured){now}"
    return None


def _placement_parts(placement: str | None) -> tuple[int | None, int | None]:
    """'2x4' (the guidelines' short form) -> (2, 4); (None, None) when it is not that."""
    try:
        n, g = str(placement).split(" ")[0].split("x")
        return int(n), int(g)
    except ValueError:
        return None, None


def to_target(g: dict | None, device: str) -> dict | None:
    """The measured time-to-target verdict of one model (decide/accuracy.py) in the answer's words:
    where it reaches the target soonest, in how long, and how much longer the other world sizes take."""
    if not g or g.get("status") == "not_enough_data" or not (g.get("numbers") or {}).get("soonest"):
        return None
    n = g["numbers"]
    s = n["soonest"]
    lo, hi = (s.get("ci") or [None, None])
    where = where_text(s["world_size"], *_placement_parts(s.get("placement")), device)
    others = [f"{where_text(o['world_size'], *_placement_parts(o.get('placement')), device)} take "
              f"{interval(o['ratio'], *(o.get('ci') or [None, None]), 1, '×', floor=0.0)} as long"
              for o in n.get("others") or [] if o.get("ratio") is not None]
    return {"where": where, "world_size": int(s["world_size"]),
            "time": seconds(s["time_to_target_s"], lo, hi), "time_s": s["time_to_target_s"], "target": n["target"],
            "others": others,
            "status": g["status"], "settle": g.get("settle")}


def _sooner_why(rec: dict, ws: int, device: str) -> str | None:
    """Why the target comes sooner at `ws` ranks although the model puts the configured work faster
    elsewhere: both numbers, and, at a fixed per-rank batch, the global batch that grows with the ranks."""
    fast, here = rec.get("fastest") or {}, rec.get("cheapest") or {}
    work = rec.get("work") or {}
    if not fast or int(here.get("world_size", -1)) != ws or not work:
        return None
    tf, th = fast.get("time_s") or {}, here.get("time_s") or {}
    text = (f"per step more ranks still pay: {where_text(int(fast['world_size']), device=device)} would finish the "
            f"configured {work['samples']:,} samples × {work['epochs']} epochs in "
            f"{seconds(tf.get('value'))} against {seconds(th.get('value'))} here (predicted from the median step; "
            f"time outside the steps not counted)")
    if work.get("batch_rule") == "fixed per-rank batch":
        text += (", but at a fixed batch per rank the global batch grows with the ranks: each epoch takes fewer "
                 "optimizer steps at the same rate, and the target takes more epochs")
    return text


def model_answers(tables: dict, guidelines: list[dict], device: str) -> list[dict]:
    """One entry per model the performance model placed: the sentence's parts and the table's row.
    With a held-out target, where to run is where the model reached it soonest (measured), else
    where the performance model puts the configured work."""
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
        soon = (to_target(_guideline(guidelines, f"time-to-accuracy-strong-{model}"), device)
                or to_target(_guideline(guidelines, f"time-to-accuracy-weak-{model}"), device))
        ws, cls = int(pick["world_size"]), pick.get("placement_class")
        if soon:
            ws = soon["world_size"]
        row = _measured_row(strong, model, ws, cls if not soon else None) or {}
        where = soon["where"] if soon else where_text(ws, row.get("nodes"), row.get("gpus_per_node"), device)
        if pick.get("extrapolated") and not soon:
            where += " (beyond what was measured)"
        work = rec.get("work") or {}
        t = pick.get("time_s") or {}
        step = pick.get("step_time_s") or {}
        eff = pick.get("efficiency") or {}
        sp = pick.get("speedup") or {}
        mape = worst_error(m)
        why = [w for w in (_efficiency_why(_guideline(guidelines, f"strong-efficiency-{model}"), device),
                           _next_step_why(strong, model, ws, device),
                           _without_ddp(strong, model, ws),
                           _bound_why(_guideline(guidelines, f"step-bound-{model}"), ws)) if w]
        if soon and ws != int(pick["world_size"]):
            # the step-speed reasons point to more ranks; say why the target still comes sooner here
            why = [w for w in (_sooner_why(rec, ws, device), _without_ddp(strong, model, ws)) if w]
        why = joined(why)
        batch = work.get("global_batch") if work.get("batch_rule") == "fixed global batch" else work.get("batch_per_rank")
        # the crossover says when a second rank beats one: what would change an answer of one rank
        change = _crossover(cross.get(model), batch) if ws == 1 else None
        verdict = soon or {"status": deploy["status"], "settle": plain_settle(deploy.get("settle"))}
        if soon:
            claim = (f"it reaches {soon['target']} soonest there, in {soon['time']} of training"
                     + (f"; {', '.join(soon['others'])}" if soon["others"] else ""))
        else:
            claim = (f"{'from its measured step' if pick.get('measured') else 'predicted'} "
                     f"{seconds(t.get('value'), t.get('lo'), t.get('hi'))} for "
                     f"{work['samples']:,} samples × {work['epochs']} epoch{'s' if work['epochs'] != 1 else ''}, "
                     f"{seconds(step.get('value'), step.get('lo'), step.get('hi'))} a step")
        same = not soon or ws == int(pick["world_size"])
        out.append({
            "model": model, "status": verdict["status"], "settle": verdict["settle"], "where": where,
            "target": soon["target"] if soon else None,
            "claim": claim, "why": why, "change": change,
            "row": {"model": model, "where": where,
                    "speedup": (interval(sp.get("value"), sp.get("lo"), sp.get("hi"), 1, "×") if same else "–")
                    if ws > 1 else "1× (baseline)",
                    "efficiency": (interval(eff.get("value"), eff.get("lo"), eff.get("hi"), 100, "%", floor=0.0)
                                   if same else "–") if ws > 1 else "100% (baseline)",
                    "time": (f"{soon['time']} to {soon['target']} (measured)" if soon
                             else seconds(t.get("value"), t.get("lo"), t.get("hi")) + " for the work "
                             + ("(its measured step)" if pick.get("measured") else "(predicted)")),
                    # measured to the target: its cost is that time on its ranks, not the model's configured work
                    "cost": (cost(ws * soon["time_s"] / 3600, device) + " to the target" if soon
                             else cost(pick.get("gpu_hours"), device)),
                    "bound": _bound_word(_guideline(guidelines, f"step-bound-{model}"), ws),
                    # a time to the target was measured: the model did not decide this row, so its
                    # error is no gate here (shown in the performance-model section)
                    "error": "– (measured)" if soon else error_text(mape),
                    "verdict": "advice" if verdict["status"] == "advice" else "inconclusive"},
        })
    return out


def comparison(guidelines: list[dict], device: str) -> dict | None:
    """The KAN against its baseline to the target (strong, else weak): one sentence, or None."""
    for exp in ("strong", "weak"):
        g = next((g for g in guidelines if g.get("id", "").startswith(f"time-to-accuracy-{exp}-")
                  and "-vs-" in g["id"] and g.get("status") != "not_enough_data"), None)
        if g is None or g["numbers"].get("ratio_kan_over_mlp") is None:
            continue
        n = g["numbers"]
        kan, mlp = g["id"][len(f"time-to-accuracy-{exp}-"):].split("-vs-")
        ratio = interval(n["ratio_kan_over_mlp"], *(n.get("ci") or [None, None]), 1, "×", floor=0.0)
        at = (lambda side: where_text(n[side]["world_size"], device=device))
        return {"status": g["status"], "settle": g.get("settle"),
                "text": f"To {n['target']}, {kan} takes {ratio} as long as {mlp}, each at its soonest world size "
                        f"({at('kan')}, {at('mlp')}) and its own tuned rate ({exp} scaling, measured)."}
    return None


def worst_error(m: dict) -> float | None:
    """The model's largest leave-one-out error over its placement classes: the deploy rule needs every
    class it compares within the limit, so the largest is the one that decides."""
    errs = [as_number(((e or {}).get("validation") or {}).get("loo_mape_pct"))
            for e in (m.get("placements") or {}).values() if not ((e or {}).get("validation") or {}).get("measured")]
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
    text = f"{a['model']}: run on {a['where']}: {a['claim']}."
    if a["why"]:
        text += " Why: " + "; ".join(a["why"]) + "."
    if a["change"]:
        text += " What would change it: " + a["change"] + "."
    return text


IMPORTED_REPEATS = (" (the runs were imported: measure those repeats on your cluster, or import them with a "
                    "repeat column, docs/import.md)")


def imported_settle(text: str | None) -> str | None:
    """What settles a guideline, for runs that were imported: nothing here can be run again, so a call
    for more repeats says where they come from (render.py applies it to every guideline, before the
    answer quotes them; once, however often it is applied)."""
    if not text or "more repeat" not in text or IMPORTED_REPEATS in text:
        return text
    return text + IMPORTED_REPEATS


def runs_line(status: dict, device: str | None = None) -> dict:
    """'43 of 43 runs ok, 0.046 rank-hours spent', the states that need a tile (failed, missing,
    running, ...) and how many ran contended (more busy ranks than cores, or beside another point:
    their times may be inflated). Spent: world size x each job's wall time, start-up included, over
    every job that ran (a failed one too)."""
    contended = len(status.get("contended") or [])
    spent = status.get("spent_hours")
    return {"text": f"{status['ok']} of {status['planned']} runs ok"
                    + (f", {cost(spent, device)} spent (world size × each job's wall time)" if spent else ""),
            "tiles": [c for c in NOT_OK if status.get(c)],
            "contended": contended}


def answer_context(tables: dict, guidelines: list[dict], status: dict, provenance: dict | None = None) -> dict:
    """What the #answer section shows: verdicts, per-model sentences, the answer table, the runs."""
    device = device_kind(provenance)
    answers = model_answers(tables, guidelines, device)
    versus = comparison(guidelines, device)
    items = [versus] if versus else []
    items += [{"status": a["status"], "text": sentence(a), "settle": a["settle"]} for a in answers]
    # a DDP overhead that is not communication changes what to do about it: said here, not only in its section
    items += [{"status": g["status"], "text": g["text"], "settle": None} for g in guidelines
              if g["id"].startswith("overhead-not-comm-") and g["status"] == "advice"]
    if not items:
        items = [{"status": "not_enough_data", "settle": None,
                  "text": "No answer yet: the study has no strong-scaling points the performance model could "
                          "place (add experiments.strong, or wait for its points to finish)."}]
    # the target a row's "where to run" is chosen by, when any is (the table's pointer says so)
    targets = sorted({a["target"] for a in answers if a.get("target")})
    return {"items": items, "runs": runs_line(status, device), "terms": TERMS, "targets": targets,
            "by_target": {a["model"]: a["target"] for a in answers if a.get("target")},
            "imported": imported_text(provenance),
            "headers": ["model", "where to run", "speedup", "efficiency", "time there", "cost",
                        "step bound", "model error", "verdict"],
            "rows": [a["row"] for a in answers]}

