"""The study's tables as rows of text cells for the report: each table's columns (units in the
headers) and how a value reads: mean [95% CI], ratios to the DDP baseline, '–' for unknown."""

from __future__ import annotations

import math

import pandas as pd

from kan import startup

from ..common.columns import DEFAULT_DDP_SETTING
from ..common.fmt import interval, sig, zero_width
from ..common.stats import known
from ..tables.experiments import BASELINE_RATIOS


def number_text(v, nd=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{nd}f}"
    return str(v)


def cell_text(v) -> str:
    """A free-text cell: empty for None/NaN (a CSV's empty cell reads back as NaN)."""
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _ci(row, col, nd=1, scale=1.0):
    """'mean [lo, hi]' (or just the mean for one repeat); `scale` converts units (e.g. s -> µs)."""
    m, lo, hi = row.get(f"{col}_mean"), row.get(f"{col}_ci_lo"), row.get(f"{col}_ci_hi")
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "–"
    if zero_width(lo, hi, m):  # one repeat, or every repeat alike (peak memory often is): no interval
        return number_text(float(m) * scale, nd)
    return interval(float(m), float(lo), float(hi), scale)  # to the digits the interval supports


def _pct(v, nd=1):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.{nd}f}%"


def _topo(r):
    return f"{int(r['nodes'])}x{int(r['gpus_per_node'])}"


def _runs(r):
    txt = f"{int(r['n_ok'])}/{int(r['n_planned'])}"
    contended = r.get("n_contended")
    if contended is not None and not (isinstance(contended, float) and math.isnan(contended)) and contended:
        txt += f" ({int(contended)} contended)"
    return txt




def _ratio(r, col, nd=2, pct=False):
    """'value [lo, hi]' of a ratio column with _ci_lo/_ci_hi siblings."""
    v = r.get(col)
    if not known(v):
        return "–"
    f = (lambda x: f"{100 * float(x):.1f}%") if pct else (lambda x: number_text(float(x), nd))
    if col in BASELINE_RATIOS and str(r.get("is_baseline")).lower() == "true":
        return f(v) + " (baseline)"
    # the run without DDP against itself: 1 by definition, its spread no ratio's
    if col.endswith("_vs_nonddp") and str(r.get("ddp")).lower() == "false" and int(r["world_size"]) == 1:
        return f(v) + " (baseline)"
    lo, hi = r.get(f"{col}_ci_lo"), r.get(f"{col}_ci_hi")
    return f(v) + ("" if zero_width(lo, hi, v) else f" [{f(lo)}, {f(hi)}]")


def _kf(r):
    """Karp–Flatt e with its meaning when it is outside [0, 1] (then it is not a serial fraction)."""
    e = r.get("karp_flatt")
    if not known(e):
        return "–"
    note = cell_text(r.get("karp_flatt_note"))
    return f"{float(e):.3f}" + (f" ({note})" if note else "")


def _ddp(r):
    v = r.get("ddp")
    return "no (plain model)" if v is False or str(v).lower() == "false" else "yes"


def _t2t(r):
    if known(r.get("step_tolerance_pct")) and float(r["step_tolerance_pct"]) > 0:
        return "– (step-time point)"  # stopped once its step was known: never trained to the target
    note = cell_text(r.get("time_to_target_note"))
    if not known(r.get("time_to_target_s")):
        return note or "–"
    lo, hi = r.get("time_to_target_s_ci_lo"), r.get("time_to_target_s_ci_hi")
    return interval(float(r["time_to_target_s"]), lo, hi)  # to the digits its interval supports


def ddp_where(r):
    link = r.get("link_mbit")
    t = f"{int(r['nodes'])}x{int(r['gpus_per_node'])}"
    return t + (f" @ {float(link):g} Mbit/s (emulated)" if known(link) and float(link) > 0 else "")


def _vs_none(r, col, nd=2):
    """A ratio to the `none` setting: 'baseline' on that row, '–' where unknown."""
    if str(r.get("ddp_setting")) == DEFAULT_DDP_SETTING:
        return "1 (baseline)"
    return _ratio(r, col, nd)


def _bytes(r):
    b = r.get("bytes_per_step_mean")
    if not known(b):
        return "–"
    txt = f"{float(b) / 1024:,.1f}"
    return txt if str(r.get("ddp_setting")) == DEFAULT_DDP_SETTING or not known(r.get("bytes_ratio")) else \
        f"{txt} ({float(r['bytes_ratio']):.3g}×)"


def _exposed(r, how: str = "median"):
    """The exposed communication share; at one rank there is no all-reduce to expose (synced less no_sync
    there is DDP's own bookkeeping, which the operator section and the guidelines count as none)."""
    if int(r["world_size"]) == 1:
        return "– (1 rank)"
    return number_text(r.get("exposed_comm_pct_median"), 1) if how == "median" else _ci(r, "exposed_comm_pct", 1)


# per study: (header, function of the row) -- units in the headers
TABLE_COLUMNS = {
    "strong": [
        ("model", lambda r: r["model"]), ("placement", _topo), ("link class", lambda r: cell_text(r.get("placement_class"))),
        ("DDP", _ddp), ("world size", lambda r: int(r["world_size"])),
        ("batch/rank", lambda r: int(r["batch_per_rank"])), ("ok/planned", _runs),
        ("samples/s (mean [95% CI])", lambda r: _ci(r, "samples_per_s", 0)),
        ("epoch time s", lambda r: _ci(r, "epoch_time_s", 2)),
        ("speedup vs DDP base", lambda r: _ratio(r, "speedup")),
        ("efficiency vs DDP base [95% CI]", lambda r: _ratio(r, "efficiency", pct=True)),
        ("efficiency vs non-DDP", lambda r: _ratio(r, "efficiency_vs_nonddp", pct=True)),
        ("Karp–Flatt e", _kf),
        ("exposed comm % (median)", _exposed),
        ("time to target s", _t2t),
        ("time-to-target speedup", lambda r: _ratio(r, "time_to_target_speedup")),
        ("not ok", lambda r: cell_text(r.get("not_ok"))),
    ],
    "weak": [
        ("model", lambda r: r["model"]), ("placement", _topo), ("link class", lambda r: cell_text(r.get("placement_class"))),
        ("DDP", _ddp), ("world size", lambda r: int(r["world_size"])),
        ("batch/rank", lambda r: int(r["batch_per_rank"])), ("ok/planned", _runs),
        ("samples/s per rank (mean [95% CI])", lambda r: _ci(r, "samples_per_s_per_rank", 0)),
        ("samples/s (all ranks)", lambda r: _ci(r, "samples_per_s", 0)),
        ("weak efficiency vs DDP base [95% CI]", lambda r: _ratio(r, "weak_efficiency", pct=True)),
        ("weak efficiency vs non-DDP", lambda r: _ratio(r, "weak_efficiency_vs_nonddp", pct=True)),
        ("scaled speedup", lambda r: _ratio(r, "scaled_speedup")),
        ("exposed comm % (median)", _exposed),
        ("not ok", lambda r: cell_text(r.get("not_ok"))),
    ],
    "comm": [
        ("model", lambda r: r["model"]), ("placement", _topo), ("link class", lambda r: cell_text(r.get("placement_class"))),
        ("world size", lambda r: int(r["world_size"])), ("ok/planned", _runs),
        ("exposed comm % (mean [95% CI])", lambda r: _exposed(r, "mean")),
        ("exposed comm ms (median)", lambda r: number_text(1e3 * r["exposed_comm_s_median"], 2)
         if known(r.get("exposed_comm_s_median")) else "–"),
        ("samples/s (mean [95% CI])", lambda r: _ci(r, "samples_per_s", 0)),
        ("loss vs 1 node % [95% CI]", lambda r: _ratio(r, "inter_vs_intra_loss_pct", 1)),
        ("not ok", lambda r: cell_text(r.get("not_ok"))),
    ],
    "allreduce": [
        ("link class", lambda r: cell_text(r.get("placement_class"))), ("placement", _topo),
        ("world size", lambda r: int(r["world_size"])), ("size KiB", lambda r: number_text(r["size_bytes"] / 1024, 0)),
        ("repeats", lambda r: int(r["n_ok"])),
        ("time µs (mean [95% CI])", lambda r: _ci(r, "time_s", 1, 1e6)),
        ("algbw GB/s", lambda r: number_text(r.get("algbw_gbps"), 3)), ("busbw GB/s", lambda r: number_text(r.get("busbw_gbps"), 3)),
    ],
    "ddp": [
        ("model", lambda r: r["model"]), ("placement", ddp_where), ("setting", lambda r: cell_text(r.get("ddp_setting"))),
        ("ok/planned", _runs), ("step ms (mean [95% CI])", lambda r: _ci(r, "step_time_s", 2, 1e3)),
        ("step vs none", lambda r: _vs_none(r, "step_ratio")),
        ("exposed comm % (mean [95% CI])", lambda r: _ci(r, "exposed_comm_pct", 1)),
        ("KiB per step (vs none)", _bytes),
        ("final loss (mean [95% CI])", lambda r: _ci(r, "final_train_loss", 4)),
        ("final loss vs none", lambda r: _vs_none(r, "final_loss_ratio", 3)),
        ("time to target s", _t2t), ("time to target vs none", lambda r: _vs_none(r, "ttt_ratio")),
        ("not ok", lambda r: cell_text(r.get("not_ok"))),
    ],
    "model_size": [
        ("model", lambda r: r["model"]), ("hidden width", lambda r: int(r["hidden_width"])),
        ("placement", _topo), ("ok/planned", _runs), ("parameters", lambda r: number_text(r.get("num_params"), 0)),
        ("peak memory GiB (mean [95% CI])", lambda r: _ci(r, "peak_mem_gib", 3)),
        ("memory kind", lambda r: cell_text(r.get("mem_kind"))),
        ("params per GB", lambda r: number_text(r.get("params_per_gb"), 0)),
        ("weights / grads / optimizer KiB", lambda r: " / ".join(
            number_text(r.get(f"{k}_bytes_median", math.nan) / 1024, 1) for k in ("weights", "grads", "optimizer"))),
        ("samples/s per rank", lambda r: _ci(r, "samples_per_s_per_rank", 0)),
        ("not ok", lambda r: cell_text(r.get("not_ok"))),
    ],
}


def _sig(v) -> str:
    """Three significant digits: held-out times run from milliseconds to hours."""
    return f"{float(v):,.3g}" if abs(float(v)) < 1000 else number_text(float(v), 0)


def _with_ci(r, col, fmt) -> str:
    """'value [lo, hi]' of a column with _ci_lo/_ci_hi siblings (no _mean suffix); no interval when
    every repeat gave the same value; the training-loss note when there is no value."""
    if not known(r.get(col)):
        return cell_text(r.get("time_to_target_note")) or "–"
    lo, hi = r.get(f"{col}_ci_lo"), r.get(f"{col}_ci_hi")
    same = not known(lo) or not known(hi) or float(lo) == float(hi)
    return fmt(r[col]) + ("" if same else f" [{fmt(lo)}, {fmt(hi)}]")


def _reached(r):
    n, of = r.get("target_n_reached"), r.get("target_n_repeats")
    return f"{int(n)} of {int(of)}" if known(n) and known(of) else "–"


def _startup(r):
    """The start-up's sum, then the parts that ran (kan/startup.py), e.g. '2.31 (imports 1.9, first steps
    (JIT) 0.35, anatomy probe 0.062)'; the sum alone for records made before the parts were recorded."""
    if not known(r.get("startup_s_mean")):
        return "–"
    parts = {p: r[f"{startup.column(p)}_mean"] for p in startup.PARTS if known(r.get(f"{startup.column(p)}_mean"))}
    return _sig(r["startup_s_mean"]) + (f" ({startup.text(parts, _sig)})" if parts else "")


def heldout_columns(name: str, t: pd.DataFrame | None) -> list:
    """The columns of a strong or weak table with a held-out target (report.target; its frame has
    target_metric): time and samples to it, the repeats that reached it and the evaluation time off
    the clock, in place of the training-loss target's time; otherwise TABLE_COLUMNS as they are."""
    cols = TABLE_COLUMNS[name]
    if name not in ("strong", "weak") or t is None or "target_metric" not in t:
        return cols
    metric = next((m for m in t["target_metric"] if isinstance(m, str) and m), "held-out")
    cols = [c for c in cols if c[0] not in ("time to target s", "time-to-target speedup", "not ok")]
    return cols + [
        (f"time to {metric} target s", lambda r: _with_ci(r, "time_to_target_s", _sig)),
        ("samples to target", lambda r: _with_ci(r, "samples_to_target", lambda v: number_text(float(v), 0))),
        ("reached (repeats)", _reached),
        ("time-to-target speedup", lambda r: _ratio(r, "time_to_target_speedup")),
        ("eval time ms, whole run (off the clock)", lambda r: number_text(1e3 * r["eval_time_s_mean"], 1)
         if known(r.get("eval_time_s_mean")) else "–"),
        ("start-up s (off the clock)", _startup),
        ("not ok", lambda r: cell_text(r.get("not_ok"))),
    ]


def heldout_rows(tables: dict) -> dict:
    """The "Time to accuracy" section's table: time and samples to the held-out target with their
    intervals and the repeats that reached it, per experiment, world size and model (the strong and
    weak tables' held-out columns; "not reached" where a point's repeats did not all reach it)."""
    cols = [("experiment", lambda r: cell_text(r["experiment"])), ("model", lambda r: cell_text(r["model"])),
            ("world size", lambda r: f"{int(r['world_size'])}" + ("" if bool(r["ddp"]) else " (no DDP)")),
            ("nodes", lambda r: f"{int(r['nodes'])}"),
            ("time to target s", lambda r: _with_ci(r, "time_to_target_s", _sig)),
            ("samples to target", lambda r: _with_ci(r, "samples_to_target", lambda v: number_text(float(v), 0))),
            ("reached (repeats)", _reached), ("start-up s (off the clock)", _startup)]
    rows = []
    for exp in ("strong", "weak"):
        t = tables.get(exp)
        if t is None or t.empty or "target_metric" not in t:
            continue
        for rec in t.assign(experiment=exp).to_dict("records"):
            try:
                rows.append([f(rec) for _, f in cols])
            except (KeyError, TypeError, ValueError):
                continue
    return {"headers": [h for h, _ in cols], "rows": rows}


def table_rows(name: str, t: pd.DataFrame | None) -> dict:
    """{'headers': [...], 'rows': [[cell, ...], ...]} of one study's table for the template."""
    cols = heldout_columns(name, t)
    rows = []
    if t is not None:
        for rec in t.to_dict("records"):
            row = []
            for _, f in cols:
                try:
                    row.append(f(rec))
                except (KeyError, TypeError, ValueError):
                    row.append("–")
            rows.append(row)
    return {"headers": [h for h, _ in cols], "rows": rows}


def tuning_rows(tuning: dict) -> list[dict]:
    """Each implementation's lr sweep (lr_tuning.json): the chosen rate, why, and one row per
    candidate (final held-out metric, time to a fixed target, ok and failed repeats)."""
    out = []
    for key, c in tuning.items():
        rows = []
        for cand in c["candidates"]:
            final = cand["final_metric"]
            t = cand["time_to_target_s"]
            rows.append([f"{cand['lr']:g}" + (" (chosen)" if cand["lr"] == c["chosen"] else ""),
                         "–" if final is None else f"{final:.4g}",
                         "–" if t is None else _sig(t),
                         f"{cand['repeats']}" + (f" ({cand['failed']} failed)" if cand["failed"] else "")])
        out.append({"key": key, "chosen": "none" if c["chosen"] is None else f"{c['chosen']:g}", "why": c["why"],
                    "headers": ["lr", f"final {c['metric']}", "time to target s", "ok repeats"], "rows": rows})
    return out


def critical_rows(critical: dict) -> dict:
    """The critical batch per model (critical_batch.json): B_crit with its interval (or the bound a
    fit outside the batches tried gives), E_min and S_min, the status, the held-out target each model
    was measured to, and the samples to target at each batch. Models whose targets differ (a target
    from_reference scales each model's own reference) are said to: their E and B_crit answer
    different questions."""
    def num(v, digits=3):
        return sig(v, digits)

    def target(c) -> str:
        if c.get("target_value") is None:
            return "–"
        op = "≤" if c.get("target_metric") == "val_loss" else "≥"
        ref = c.get("reference_value")
        of_ref = f" ({c['target_value'] / ref:.3g} x {ref:.4g})" if known(ref) and ref else ""
        return f"{c['target_metric']} {op} {c['target_value']:.4g}{of_ref}"

    batches = sorted({int(b) for c in critical.values() for b in c["batches"]})
    targets = {m: target(c) for m, c in critical.items()}
    differ = len({(c.get("target_metric"), c.get("target_value")) for c in critical.values()}) > 1
    rows = []
    for model, c in critical.items():
        ci = c.get("ci") or [None, None]
        crit = (f"{num(c['b_crit'])} [{num(ci[0])}, {num(ci[1]) if ci[1] is not None else '∞'}]" if c["b_crit"]
                else f"> {c['b_crit_lower_bound']:,}" if c.get("b_crit_lower_bound")
                else f"< {c['b_crit_upper_bound']:,}" if c.get("b_crit_upper_bound") else "–")
        per = [num(c["samples_to_target"].get(str(b))) if str(b) in c["samples_to_target"]
               else ("not reached" if b in c["not_reached"] else "–") for b in batches]
        rows.append([model, crit, num(c["e_min"]), num(c["s_min"]), c["status"], targets[model], *per])
    why = {m: c["why"] for m, c in critical.items()}
    if differ:
        why = {m: f"{w}; measured to {targets[m]}, not the other models' target, so its samples to target and "
                  f"B_crit are not comparable with theirs" for m, w in why.items()}
    return {"headers": ["model", "B_crit [95% CI]", "E_min samples", "S_min steps", "status",
                        "target (differs between models)" if differ else "target",
                        *[f"samples to target at B={b:,}" for b in batches]],
            "rows": rows, "why": why, "targets_differ": differ}
