"""The box at the top of the report: what was measured on what, the recommended configuration(s)
with their numbers, how many runs are done, failed, pending, running, missing or corrupt, and the
expectations' verdicts. Everything here is also in the sections below; this only reads it.

A recommendation is shown as advice only where its guideline is advice (the model's held-out
error is within the threshold for every placement it compared); otherwise its numbers are shown
under "inconclusive" with what would settle it, or it says what is missing.
"""

from __future__ import annotations

import math

import pandas as pd

from ..decide.rules import duration_text

# states that are not a failure of the run itself; every other non-ok status is one
NOT_FAILED = ("ok", "running", "pending", "missing", "corrupt")
CARDS = ("ok", "failed", "pending", "running", "missing", "corrupt")
MAX_HOSTS = 4


def status_counts(points: pd.DataFrame | None) -> dict:
    """{'planned', one count per CARDS entry, 'failed_kinds': {status: n}} over the runs (point x repeat)."""
    out = {"planned": 0, **{c: 0 for c in CARDS}, "failed_kinds": {}}
    if points is None or points.empty or "status" not in points:
        return out
    st = points["status"].fillna("missing").astype(str)
    out["planned"] = len(st)
    for s, n in st.value_counts().items():
        if s in NOT_FAILED:
            out[s] = int(n)
        else:
            out["failed"] += int(n)
            out["failed_kinds"][s] = int(n)
    return out


def _join(values, limit: int | None = None) -> str:
    values = [str(v) for v in values or []]
    if limit and len(values) > limit:
        return ", ".join(values[:limit]) + f" … ({len(values)} in all)"
    return ", ".join(values) or "–"


def _sizes(points: pd.DataFrame, ok_only: bool) -> list[int]:
    if points is None or points.empty or "world_size" not in points:
        return []
    p = points[points["status"] == "ok"] if ok_only else points
    return sorted({int(v) for v in pd.to_numeric(p["world_size"], errors="coerce").dropna()})


def measured_on(points: pd.DataFrame | None, provenance: dict) -> list[tuple[str, str]]:
    """(label, text) rows: devices, hosts, backend, world sizes, runs, experiments, software."""
    prov = provenance or {}
    counts = status_counts(points)
    done, planned = _sizes(points, True), _sizes(points, False)
    sizes = _join(done) + ("" if done == planned else f" (planned: {_join(planned)})")
    exps = sorted(set(points["experiment"].dropna())) if points is not None and "experiment" in points else []
    hosts = prov.get("hostnames") or []
    software = "; ".join(f"{label} {_join(prov.get(k))}" for k, label in
                         (("torch", "torch"), ("cuda", "CUDA"), ("nccl", "NCCL")) if prov.get(k))
    return [
        ("devices", _join(prov.get("device_names") or prov.get("device_types"))),
        ("hosts", f"{len(hosts)}: {_join(hosts, MAX_HOSTS)}" if hosts else "–"),
        ("backend", _join(prov.get("backends")) + (f" (launcher {_join(prov.get('launchers'))})"
                                                   if prov.get("launchers") else "")),
        ("world sizes measured", sizes),
        ("runs (point × repeat)", f"{counts['planned']} planned, {counts['ok']} ok"),
        ("experiments", _join(exps)),
        ("software", software or "–"),
        ("commit", _join(prov.get("git"))),
    ]


def band_text(b: dict | None, f) -> str:
    """A prediction band as text: 'value [lo, hi]' in the units of `f`, the band only when known."""
    if not b or b.get("value") is None or (isinstance(b["value"], float) and math.isnan(b["value"])):
        return "–"
    return f(b["value"]) + (f" [{f(b['lo'])}, {f(b['hi'])}]" if b.get("lo") is not None else "")


def _choice(what: str, c: dict | None) -> list[str]:
    if not c:
        return [what, "none qualifies", "–", "–", "–", "–"]
    return [what, f"{c['world_size']} rank(s), {c['placement_class']}" + (" (extrapolated)" if c.get("extrapolated")
                                                                            else ""),
            band_text(c.get("time_s"), duration_text), f"{c['gpu_hours']:.3g}", band_text(c.get("efficiency"), lambda x: f"{x:.0%}"),
            c.get("validation", "–")]


def accuracy_recommendations(guidelines: list[dict]) -> list[dict]:
    """With a held-out target, the configuration to deploy is the one that reaches it soonest (the
    time-to-accuracy verdict of the strong experiment, measured and predicted past what was measured,
    else the weak one; decide/accuracy.py), not the one with the fastest step: these come first, as
    {'model', 'status', 'settle', 'text', 'kind'}."""
    acc = [g for g in guidelines if g.get("topic") == "time-to-accuracy"]
    for exp in ("strong", "weak"):
        mine = [g for g in acc if g["id"].startswith((f"time-to-accuracy-{exp}-",
                                                       f"time-to-accuracy-predicted-{exp}-"))]
        if mine:
            return [{"model": "", "status": g["status"], "settle": g.get("settle"), "rows": [], "work": "",
                     "text": g["text"], "kind": "accuracy"} for g in mine]
    return []


def recommendations(model_json: dict | None, guidelines: list[dict]) -> list[dict]:
    """The time-to-target verdicts (accuracy_recommendations), then per model of the strong experiment
    where the performance model places its configured work: {'model', 'status', 'work', 'rows',
    'settle', 'text', 'kind'}."""
    deploy = {g["id"]: g for g in guidelines if g.get("topic") == "deploy"}
    out = accuracy_recommendations(guidelines)
    for model, m in sorted(((model_json or {}).get("models") or {}).items()):
        g = deploy.get(f"deploy-{model}")
        if g is None or m.get("work") is None:
            continue
        rec = m.get("recommendation") or {}
        entry = {"model": model, "status": g["status"], "settle": g.get("settle"), "rows": [], "work": "",
                 "text": g["text"], "kind": "step"}
        w = rec.get("work")
        if w and "cheapest" in rec:
            batch = (f"global batch {w['global_batch']}" if w.get("batch_rule") == "fixed global batch"
                     else f"per-rank batch {w.get('batch_per_rank')}")
            entry["work"] = f"{w['samples']:,} samples × {w['epochs']} epochs, {batch}"
            thr = rec["efficiency_threshold"]
            entry["rows"] = [_choice(f"fastest with predicted efficiency ≥ {thr:.0%}", rec.get("fastest")),
                             _choice("fewest GPU-hours", rec["cheapest"])]
        out.append(entry)
    if not any(e["kind"] == "step" for e in out):
        for g in deploy.values():
            out.append({"model": "", "status": g["status"], "settle": g.get("settle"), "rows": [], "work": "",
                        "text": g["text"], "kind": "step"})
    return out
