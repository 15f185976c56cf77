"""Expectations: thresholds the user writes in the config (`report.expect`), checked against the
measured tables with their 95% CIs, for a pass/fail table in the report and a CI job's exit code.

Grammar (one mapping per expectation):

    report:
      expect:
        - metric: strong_efficiency   # one of METRICS (below)
          world_size: 8               # optional selectors: which rows of the metric's table count
          min: 0.7                    # at least one of min / max (inclusive bounds, in the metric's unit)
        - {metric: exposed_comm_pct, max: 10}
        - {metric: model_loo_mape_pct, placement: intra-node, max: 25, name: "model good enough"}

Selectors: model (a model label such as "kan-bspline [2,64,1]", or its family "kan-bspline"),
world_size, nodes, gpus_per_node, placement (a link class: single-rank, intra-node, inter-node), hidden_width, batch_per_rank;
exposed_comm_pct also takes experiment (strong, weak or comm), allreduce_busbw_gbps size_bytes. Every
measured row the selectors match is checked; a selector no row matches gives "not measured".

Verdict of one row with value v and 95% CI [lo, hi]: a `min` passes when lo >= min, fails when
hi < min, and is "inconclusive" when the interval straddles it (`max` mirrored). A row with a CI
column but one ok repeat has no interval: inconclusive. Metrics without an interval by nature (the
model's held-out error) and the baseline's own ratios (1 by definition) are judged on the value.
A row planned but never measured ok is "not measured". An expectation takes the worst of its rows:
fail > inconclusive > not measured > pass.
"""

from __future__ import annotations

import math

import pandas as pd

from ..common.columns import baseline_name, model_family
from ..common.fmt import sig
from ..common.stats import as_number, known
from kan.contract.expect_spec import (COMM_EXPERIMENTS, INTEGER_SELECTORS, KEYS, METRICS, SELECTORS, Metric,  # noqa: F401
                          allowed_keys, expectation_problems, validate_expectations)

PASS, FAIL, INCONCLUSIVE, NOT_MEASURED = "pass", "fail", "inconclusive", "not measured"
STATUSES = (PASS, FAIL, INCONCLUSIVE, NOT_MEASURED)
WORST_FIRST = (FAIL, INCONCLUSIVE, NOT_MEASURED, PASS)
RULE = ("min passes when the 95% CI's lower end is at or above it, fails when the upper end is below it, and is "
        "inconclusive when the interval straddles it (max mirrored) or one repeat gives no interval; exact values "
        "(the model's held-out error, the baseline's own ratios) are judged on the value; an expectation takes "
        "the worst of its rows: fail > inconclusive > not measured > pass")


# ---- evaluation ---------------------------------------------------------------------------------

def verdict(value, lo, hi, lower=None, upper=None) -> str:
    """pass / fail / inconclusive of one value with its interval [lo, hi] against the bounds (an
    exact value has lo = hi = value; no interval at all: inconclusive)."""
    if not (known(lo) and known(hi)):
        return INCONCLUSIVE
    out = PASS
    if lower is not None:
        out = PASS if lo >= lower else FAIL if hi < lower else INCONCLUSIVE
    if upper is not None:
        v = PASS if hi <= upper else FAIL if lo > upper else INCONCLUSIVE
        out = min(out, v, key=WORST_FIRST.index)
    return out


def _rows(metric: Metric, tables: dict) -> pd.DataFrame:
    """The metric's candidate rows with columns value, ci_lo, ci_hi, exact, where, not_ok + selectors."""
    if metric.table == "model":
        return _model_rows(tables.get("model"))
    if metric.table == "allreduce_sizes":
        return _allreduce_rows(tables.get("allreduce_sizes"))
    parts = []
    for name in metric.table.split("+"):
        t = tables.get(name)
        if t is None or t.empty or metric.column not in t:
            continue
        t = t[t["ddp"].astype(bool)] if "ddp" in t else t
        if metric.extra == ("experiment",):
            t = t[t["world_size"] > 1]
        parts.append(t.assign(experiment=name))
    if not parts:
        return pd.DataFrame()
    t = pd.concat(parts, ignore_index=True)
    exact = t["is_baseline"].fillna(False).astype(bool) if "is_baseline" in t else pd.Series(False, index=t.index)
    out = t.assign(value=t[metric.column], exact=exact,
                   ci_lo=t[f"{metric.ci}_ci_lo"] if metric.ci else math.nan,
                   ci_hi=t[f"{metric.ci}_ci_hi"] if metric.ci else math.nan,
                   placement=t.get("placement_class"), not_ok=t.get("not_ok", ""))
    out["where"] = [f"{r['model']} {int(r['nodes'])}x{int(r['gpus_per_node'])} (p={int(r['world_size'])}"
                    + (f", {r['experiment']}" if metric.extra == ("experiment",) else "")
                    + (f", width {int(r['hidden_width'])}" if metric.table == "model_size" else "") + ")"
                    for _, r in out.iterrows()]
    return out


def _allreduce_rows(t: pd.DataFrame | None) -> pd.DataFrame:
    """busbw = size / time x 2(p - 1)/p falls as the time rises: its CI ends are the time's, swapped."""
    if t is None or t.empty:
        return pd.DataFrame()
    scale = t["size_bytes"] / 1e9 * 2 * (t["world_size"] - 1) / t["world_size"]
    return t.assign(value=t["busbw_gbps"], ci_lo=scale / t["time_s_ci_hi"], ci_hi=scale / t["time_s_ci_lo"],
                    exact=False, placement=t["placement_class"], not_ok="", model=None,
                    where=[f"{int(r.nodes)}x{int(r.gpus_per_node)} {r.placement_class}, {int(r.size_bytes):,} bytes"
                           for r in t.itertuples()])


def _model_rows(model_json: dict | None) -> pd.DataFrame:
    rows = []
    for model, m in sorted(((model_json or {}).get("models") or {}).items()):
        for cls, entry in (m.get("placements") or {}).items():
            v = (entry.get("validation") or {})
            mape = v.get("loo_mape_pct")
            rows.append({"model": model, "placement": cls, "value": math.nan if mape is None else mape,
                         "ci_lo": mape, "ci_hi": mape, "exact": True, "where": f"{model} {cls}",
                         "not_ok": v.get("reason") or entry.get("reason") or ""})
    return pd.DataFrame(rows)


def _matches(rows: pd.DataFrame, e: dict) -> pd.DataFrame:
    for k in SELECTORS + ("experiment", "size_bytes"):
        if k not in e or rows.empty:
            continue
        if k not in rows:
            return rows.iloc[0:0]
        if k == "model":
            rows = rows[[str(m) == e[k] or model_family(m) == e[k] for m in rows["model"]]]
        else:
            rows = rows[rows[k] == e[k]]
    return rows


def describe(e: dict) -> str:
    """'strong_efficiency at world_size=8 ≥ 70%' in the metric's unit."""
    m = METRICS[e["metric"]]
    sel = ", ".join(f"{k}={e[k]}" for k in SELECTORS + m.extra if k in e)
    bounds = " and ".join(f"{op} {fmt(e[b], m.unit)}" for b, op in (("min", "≥"), ("max", "≤")) if b in e)
    return f"{e['metric']}{' at ' + sel if sel else ''} {bounds}"


def _number(v, unit: str) -> str:
    v = float(v)
    if unit == "fraction":
        return f"{100 * v:.1f}%"
    if unit == "%":
        return f"{v:.1f}%"
    return sig(v) if abs(v) < 1000 else f"{v:,.0f}"


def fmt(v, unit: str) -> str:
    """A value in its unit: fractions as %, '–' when unknown."""
    if not known(v):
        return "–"
    return _number(v, unit) + ("" if unit in ("fraction", "%") else f" {unit}")


def fmt_ci(v, lo, hi, unit: str) -> str:
    """'1,800 [1,673, 1,927] samples/s' or '90.0% [76.9%, 103.1%]'; the interval only when known."""
    if not known(v):
        return "–"
    ci = f" [{_number(lo, unit)}, {_number(hi, unit)}]" if known(lo) and known(hi) else ""
    return _number(v, unit) + ci + ("" if unit in ("fraction", "%") else f" {unit}")


def _description(m: Metric, tables: dict) -> str:
    """The metric's text, naming the baseline as it ran: runs imported without a one-rank DDP run
    have their ratios taken against the one-rank run without DDP."""
    if m.table not in ("strong", "weak"):
        return m.text
    return m.text.replace("the DDP baseline", baseline_name([tables.get(m.table)]))


def evaluate(expect: list, tables: dict) -> dict:
    """expectations.json: {'expectations': [...], 'counts': {status: n}}. `tables` = the scaling
    tables (DataFrames) and 'model' (model.json)."""
    results = []
    for i, e in enumerate(expect or []):
        m = METRICS[e["metric"]]
        rows = _matches(_rows(m, tables), e)
        checked = []
        for r in rows.to_dict("records"):
            value, lo, hi = r["value"], r["ci_lo"], r["ci_hi"]
            if not known(value):
                status = NOT_MEASURED
                reason = str(r.get("not_ok") or "no ok repeat")
            else:
                if r["exact"]:
                    lo = hi = value
                status = verdict(value, lo, hi, e.get("min"), e.get("max"))
                reason = "one ok repeat: no confidence interval" if not (known(lo) and known(hi)) else ""
            checked.append({"where": r["where"], "value": as_number(value), "ci_lo": None if r["exact"] else as_number(lo),
                            "ci_hi": None if r["exact"] else as_number(hi), "exact": bool(r["exact"]), "status": status,
                            "reason": reason})
        if checked:
            status = min((c["status"] for c in checked), key=WORST_FIRST.index)
            reason = ""
        else:
            status, reason = NOT_MEASURED, "no measured row matches the selectors"
        results.append({"index": i, "name": e.get("name") or describe(e), "named": "name" in e, "metric": e["metric"],
                        "description": _description(m, tables), "unit": m.unit, "min": e.get("min"), "max": e.get("max"),
                        "selectors": {k: e[k] for k in SELECTORS + m.extra if k in e},
                        "status": status, "reason": reason, "rows": checked})
    counts = {s: sum(r["status"] == s for r in results) for s in STATUSES}
    return {"expectations": results, "counts": counts, "rule": RULE}
