"""What was run and on what, for the report: the runs by state (ok, failed, pending, running, missing,
corrupt; the answer shows a badge for each state but ok), the answer's "measured on" line (for
imported runs: elsewhere, from where, what they lack) and the "what was measured, on what" table of
the appendix. Everything here only reads the points table and the provenance.
"""

from __future__ import annotations

import math

import pandas as pd

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


def _hosts_text(points: pd.DataFrame | None, prov: dict) -> str:
    """'3: a, b, c'; for imported runs, whose host names are not recorded, the most nodes a run used."""
    hosts = prov.get("hostnames") or []
    if prov.get("imported"):
        nodes = (pd.to_numeric(points["nodes"], errors="coerce").max()
                 if points is not None and "nodes" in points else None)
        return f"up to {int(nodes)} node{'s' if nodes != 1 else ''} a run (imported: host names not recorded)" \
            if nodes and nodes == nodes else "imported: not recorded"
    return f"{len(hosts)}: {_join(hosts, MAX_HOSTS)}" if hosts else "–"


def measured_on(points: pd.DataFrame | None, provenance: dict) -> list[tuple[str, str]]:
    """(label, text) rows: devices, hosts, backend, world sizes, runs, experiments, software."""
    prov = provenance or {}
    counts = status_counts(points)
    done, planned = _sizes(points, True), _sizes(points, False)
    sizes = _join(done) + ("" if done == planned else f" (planned: {_join(planned)})")
    exps = sorted(set(points["experiment"].dropna())) if points is not None and "experiment" in points else []
    software = "; ".join(f"{label} {_join(prov.get(k))}" for k, label in
                         (("torch", "torch"), ("cuda", "CUDA"), ("nccl", "NCCL")) if prov.get(k))
    return [
        ("devices", _join(prov.get("device_names") or prov.get("device_types"))),
        ("hosts", _hosts_text(points, prov)),
        ("backend", _join(prov.get("backends")) + (f" (launcher {_join(prov.get('launchers'))})"
                                                   if prov.get("launchers") else "")),
        ("world sizes measured", sizes),
        ("runs (point × repeat)", f"{counts['planned']} planned, {counts['ok']} ok"),
        *step_time_rows(points),
        ("experiments", _join(exps)),
        ("software", software or "–"),
        ("commit", _join(prov.get("git"))),
    ]


def step_time_rows(points: pd.DataFrame | None) -> list[tuple[str, str]]:
    """The 'step-time points' row where a study has any: how many ok runs measured their step to a
    tolerance instead of training their work, why they stopped, and what that means for time to target."""
    if points is None or "step_tolerance_pct" not in points:
        return []
    tol = pd.to_numeric(points["step_tolerance_pct"], errors="coerce").fillna(0)
    ok = points[(tol > 0) & (points["status"] == "ok")]
    if ok.empty:
        return []
    why = ok["stop_reason"].fillna("work").value_counts()
    said = {"tolerance": "within ±{}%", "cap": "at max_steps", "work": "at the end of their work"}
    steps = pd.to_numeric(ok["num_steps"], errors="coerce")
    tols = ", ".join(f"{t:g}" for t in sorted(set(tol[tol > 0])))
    parts = "; ".join(f"{n} {said.get(r, r).format(tols)}" for r, n in why.items())
    return [("step-time points", f"{len(ok)} ok run{'s' if len(ok) != 1 else ''} measured their step, not "
             f"their work: stopped {parts}, after {int(steps.min()):,} to {int(steps.max()):,} steps; their time "
             "to a target is predicted, never measured")]


def band_text(b: dict | None, f) -> str:
    """A prediction band as text: 'value [lo, hi]' in the units of `f`, the band only when known."""
    if not b or b.get("value") is None or (isinstance(b["value"], float) and math.isnan(b["value"])):
        return "–"
    return f(b["value"]) + (f" [{f(b['lo'])}, {f(b['hi'])}]" if b.get("lo") is not None else "")


def imported_text(provenance: dict | None) -> str | None:
    """For runs imported from elsewhere: from where, as cited, and what the analysis could not use."""
    imp = (provenance or {}).get("imported")
    if not imp:
        return None
    cited = f" ({'; '.join(imp['citations'])})" if imp["citations"] else ""
    return (f"The {imp['num_records']} runs were imported from {', '.join(imp['paths'])}{cited}, not measured by "
            f"kanscale. The analysis could not use what they lack: {'; '.join(imp['lacks'])}.")


def placement_text(provenance: dict | None) -> str:
    """'1 host (x), Intel Xeon ..., backend gloo': where the numbers come from, in one line; for runs
    imported from elsewhere, that they were, from where, and what the analysis could not use."""
    prov = provenance or {}
    imp = prov.get("imported")
    if imp:  # short, above the verdicts; where from and what they lack follow them (imported_text)
        return (f"{', '.join(imp['hardware']) or 'hardware not stated'} elsewhere, not by kanscale: "
                f"{imp['num_records']} imported runs")
    hosts = prov.get("hostnames") or []
    devices = prov.get("device_names") or prov.get("device_types") or []
    parts = [f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else None,
             ", ".join(map(str, devices[:2])) if devices else None,
             "backend " + ", ".join(map(str, prov.get("backends") or [])) if prov.get("backends") else None]
    return "; ".join(p for p in parts if p) or "an unrecorded machine"
