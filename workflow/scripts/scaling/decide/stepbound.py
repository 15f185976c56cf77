"""What bounds a step, as a guideline per implementation (the anatomy table, scaling/tables/anatomy_table.py):
at the smallest world size of the strong experiment (its DDP baseline: what one rank's step is made
of), is the step dispatch-, compute- or communication-bound, and what follows for adding ranks.
Advice only when every ok repeat gives the same bound and there are at least report.min_repeats of
them; a study whose records carry no anatomy (older records) gets no such guideline. A captured step
(training.cuda_graphs) is never told to capture itself: its all-reduce is not measured, its dispatch is
the rest of the replayed step with the all-reduce in it, and where that rest outweighs its compute on
more than one rank the bound is undecided (kan.probes.anatomy.captured_bound)."""

from __future__ import annotations

import pandas as pd

from kan.probes.anatomy import CAPTURED_RULE, RULE, UNDECIDED

from ..common.fmt import plural
from .rules import Decide, guideline, key_of, ranks, rests_on, topo

FOLLOWS = {
    "dispatch": "more ranks at this global batch cannot make it shorter than its fixed {fixed:.3f} ms; raise the "
                "per-rank batch, or capture the step as a graph on GPUs, before adding ranks",
    "compute": "more ranks at this global batch shorten it, down to its fixed {fixed:.3f} ms, while the exposed "
               "all-reduce they add stays below the compute they save",
    "communication": "more ranks add communication and save little compute; fewer, fuller ranks pay more",
}
# a captured step: capture is done, so what is left to do is to grow the per-sample part
FOLLOWS_CAPTURED = {
    "dispatch": "the step is already captured as a graph, and more ranks at this global batch cannot make it "
                "shorter than its fixed {fixed:.3f} ms; raise the per-rank batch before adding ranks",
    "compute": FOLLOWS["compute"],
    UNDECIDED: "the bound is undecided: the rest of the replayed step outweighs its compute, and a graph does not "
               "show how that rest splits between dispatch and the all-reduce; the step is already captured, so "
               "raise the per-rank batch until compute outweighs the rest, or time the eager step's exposed "
               "all-reduce (training.cuda_graphs off) to split it",
}


def step_bound(anatomy: pd.DataFrame | None, d: Decide) -> list[dict]:
    if anatomy is None or anatomy.empty:
        return []
    t = anatomy[anatomy["experiment"] == "strong"]
    t = t if len(t) else anatomy[anatomy["experiment"] == anatomy["experiment"].iloc[0]]
    base = CAPTURED_RULE if "captured" in t and t["captured"].fillna(False).astype(bool).any() else RULE
    rule = (f"{base}; at the smallest measured world size of the {t['experiment'].iloc[0]} experiment; advice when "
            f"every ok repeat gives that bound and there are >= {d.min_repeats}")
    out = []
    for model, g in t.groupby("model", sort=True):
        g = g.sort_values(["world_size", "nodes"])
        r = g.iloc[0]
        gid = f"step-bound-{model}"
        step, fixed, compute, comm = (float(r[c]) for c in ("step_ms", "dispatch_ms", "compute_ms", "communication_ms"))
        captured = bool(r.get("captured", False)) and not pd.isna(r.get("captured"))
        nums = {"world_size": int(r["world_size"]), "batch_per_rank": int(r["batch_per_rank"]), "step_ms": round(step, 4),
                "dispatch_ms": round(fixed, 4), "compute_ms": round(compute, 4),
                "communication_ms": None if pd.isna(comm) else round(comm, 4), "captured": captured,
                "ops_per_step": None if pd.isna(r["ops_per_step"]) else round(float(r["ops_per_step"])),
                "bound": r["bound"], "n": int(r["n"]), "n_agree": int(r["n_agree"]),
                "bound_by_world_size": {str(int(w)): b for w, b in zip(g["world_size"], g["bound"])}}
        where = f"{topo(r)} ({int(r['batch_per_rank'])} samples a rank)"
        one = int(r["world_size"]) == 1
        reduce = ("no all-reduce (one rank)" if one else "the all-reduce not measured (inside the graph)" if captured
                  else f"{comm:.3f} ms exposed all-reduce")
        rest = ("fixed cost" if not captured else "rest of the replayed step (one graph launch and the copy-in)" if one
                else "rest of the replayed step, the all-reduce included")
        what = "of undecided bound" if r["bound"] == UNDECIDED else f"{r['bound']}-bound"
        head = (f"{model}: a {'captured ' if captured else ''}step at {where} is {what}: {fixed:.3f} ms {rest}, "
                f"{compute:.3f} ms per-sample compute, {reduce}, of {step:.3f} ms measured")
        if int(r["n_agree"]) < int(r["n"]) or int(r["n"]) < d.min_repeats:
            more = max(d.min_repeats - int(r["n"]), 1)
            out.append(rests_on(guideline(gid, "strong", "inconclusive",
                                          f"{head}; its repeats do not agree on the bound ({int(r['n_agree'])} of "
                                          f"{int(r['n'])}), so nothing follows yet.", rule, nums,
                                          f"run {plural(more, 'more repeat')} of {topo(r)}", [(topo(r), more, key_of(r))]),
                                [(topo(r), r["n"])]))
            continue
        text = f"{head} → {(FOLLOWS_CAPTURED if captured else FOLLOWS)[r['bound']].format(fixed=fixed)}."
        if r["bound"] == UNDECIDED:  # more repeats cannot split what no probe measures
            out.append(rests_on(guideline(gid, "strong", "inconclusive", text, rule, nums,
                                          "time the eager step's exposed all-reduce (training.cuda_graphs off)"),
                                [(topo(r), r["n"])]))
            continue
        out.append(rests_on(guideline(gid, "strong", "advice", text, rule, nums), [(topo(r), r["n"])]))
    return out


def cite_bound(guidelines: list[dict], model_json: dict | None) -> list[dict]:
    """The deployment recommendation cites what bounds its model's step: where the step is
    dispatch-bound (advice), the deploy guideline says that more ranks cannot make a step shorter than
    its fixed cost, with the performance model's own fixed term c0 beside the anatomy's measured one
    (two ways to the same number: the anatomy's compute-only steps before the clock, and the model's fit
    over the measured step times), so "add GPUs" never reads as free for a dispatch-bound step."""
    bounds = {g["id"][len("step-bound-"):]: g for g in guidelines
              if g["id"].startswith("step-bound-") and g["status"] == "advice"}
    models = (model_json or {}).get("models") or {}
    for g in guidelines:
        if not g["id"].startswith("deploy-"):
            continue
        model = g["id"][len("deploy-"):]
        b = bounds.get(model)
        if b is None or b["numbers"]["bound"] != "dispatch":
            continue
        n = b["numbers"]
        c0 = (((models.get(model) or {}).get("compute") or {}).get("params") or {}).get("c0_s")
        fit = (f"; the performance model's fitted fixed term c0 is {1e3 * c0['value']:.3f} ms" if c0 and
               c0.get("value") is not None else "")
        g["text"] += (f" What bounds the step: at {ranks(n['world_size'])} it is dispatch-bound ({n['dispatch_ms']:.3f} "
                      f"ms fixed of {n['step_ms']:.3f} ms{fit}): no number of ranks makes a step shorter than that "
                      f"fixed cost, so ranks past the point where the per-sample compute is gone buy nothing; raise the "
                      f"per-rank batch{'' if n.get('captured') else ' or capture the step as a graph on GPUs'} first"
                      f"{' (the step is already captured)' if n.get('captured') else ''}.")
        g.setdefault("numbers", {})["step_bound"] = {"bound": "dispatch", "dispatch_ms": n["dispatch_ms"],
                                                     "step_ms": n["step_ms"],
                                                     "model_c0_ms": round(1e3 * c0["value"], 4) if c0 and
                                                     c0.get("value") is not None else None}
    return guidelines
