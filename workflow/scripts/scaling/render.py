"""The self-contained HTML report. It answers first: a summary box (what was measured on what, the
recommended configuration, run counts, expectation verdicts), then every guideline once with its
numbers as small tables, the expectations, the comparison with other studies (report.compare),
and then the tables, inline figures (base64 PNG), law fits, the performance model (kept apart
from the measurements), method and provenance. Jinja2 with autoescape; everything the page needs
is inside the one file (no external URLs); wide tables scroll inside their own box."""

from __future__ import annotations

import base64
import datetime as dt
import math
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from . import compare as compare_studies
from . import linkcheck, operator
from .expectations import RULE as EXPECT_RULE
from .expectations import fmt as expect_fmt
from .expectations import fmt_ci
from .fits import describe
from .numbers import numbers_tables
from .reference import PAPER_BASELINE, comparable, overlay_note
from .repeats import RepeatPlan
from .sequential import history_context
from .stats import level_label
from .summary import CARDS, measured_on, recommendations, status_counts
from .target import rule_text

TEMPLATES = Path(__file__).resolve().parents[2] / "report" / "templates"
SECTIONS = ("strong", "weak", "comm", "model_size", "ddp")
SECTION_FIGURES = {"strong": ["strong_speedup", "strong_efficiency", "loss_curves"],
                   "weak": ["weak_throughput", "weak_efficiency"],
                   "comm": ["comm_exposed", "comm_throughput", "allreduce_busbw", "allreduce_time"],
                   "model_size": ["model_size_memory", "model_size_throughput"],
                   "ddp": ["ddp_time_to_target", "ddp_loss_curves"]}
TOPICS = (("deploy", "Where to run (performance model)"), ("strong", "Strong scaling"), ("weak", "Weak scaling"),
          ("comm", "Communication and placement"), ("model_size", "Memory"), ("ddp", "DDP settings"))


def _fmt(v, nd=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{nd}f}"
    return str(v)


def _text(v) -> str:
    """A free-text cell: empty for None/NaN (a CSV's empty cell reads back as NaN)."""
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _ci(row, col, nd=1, scale=1.0):
    """'mean [lo, hi]' (or just the mean for one repeat); `scale` converts units (e.g. s -> µs)."""
    m, lo, hi = row.get(f"{col}_mean"), row.get(f"{col}_ci_lo"), row.get(f"{col}_ci_hi")
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "–"
    txt = _fmt(float(m) * scale, nd)
    if lo is not None and not (isinstance(lo, float) and math.isnan(lo)):
        txt += f" [{_fmt(float(lo) * scale, nd)}, {_fmt(float(hi) * scale, nd)}]"
    return txt


def _pct(v, nd=1):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.{nd}f}%"


def _topo(r):
    return f"{int(r['nodes'])}×{int(r['gpus_per_node'])}"


def _runs(r):
    txt = f"{int(r['n_ok'])}/{int(r['n_planned'])}"
    contended = r.get("n_contended")
    if contended is not None and not (isinstance(contended, float) and math.isnan(contended)) and contended:
        txt += f" ({int(contended)} contended)"
    return txt


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


# ratios against the DDP baseline: exactly 1 at the baseline itself
BASELINE_RATIOS = ("speedup", "efficiency", "weak_efficiency", "scaled_speedup", "time_to_target_speedup")


def _ratio(r, col, nd=2, pct=False):
    """'value [lo, hi]' of a ratio column with _ci_lo/_ci_hi siblings."""
    v = r.get(col)
    if _nan(v):
        return "–"
    f = (lambda x: f"{100 * float(x):.1f}%") if pct else (lambda x: _fmt(float(x), nd))
    if col in BASELINE_RATIOS and str(r.get("is_baseline")).lower() == "true":
        return f(v) + " (baseline)"
    lo, hi = r.get(f"{col}_ci_lo"), r.get(f"{col}_ci_hi")
    return f(v) + ("" if _nan(lo) or _nan(hi) else f" [{f(lo)}, {f(hi)}]")


def _kf(r):
    """Karp–Flatt e with its meaning when it is outside [0, 1] (then it is not a serial fraction)."""
    e = r.get("karp_flatt")
    if _nan(e):
        return "–"
    note = _text(r.get("karp_flatt_note"))
    return f"{float(e):.3f}" + (f" ({note})" if note else "")


def _ddp(r):
    v = r.get("ddp")
    return "no (plain model)" if v is False or str(v).lower() == "false" else "yes"


def _t2t(r):
    note = _text(r.get("time_to_target_note"))
    if _nan(r.get("time_to_target_s")):
        return note or "–"
    lo, hi = r.get("time_to_target_s_ci_lo"), r.get("time_to_target_s_ci_hi")
    txt = _fmt(float(r["time_to_target_s"]), 2)
    return txt + ("" if _nan(lo) or _nan(hi) else f" [{_fmt(float(lo), 2)}, {_fmt(float(hi), 2)}]")


def _ddp_where(r):
    link = r.get("link_mbit")
    t = f"{int(r['nodes'])}×{int(r['gpus_per_node'])}"
    return t + (f" @ {float(link):g} Mbit/s (emulated)" if not _nan(link) and float(link) > 0 else "")


def _vs_none(r, col, nd=2):
    """A ratio to the `none` setting: 'baseline' on that row, '–' where unknown."""
    if str(r.get("ddp_setting")) == "none":
        return "1 (baseline)"
    return _ratio(r, col, nd)


def _bytes(r):
    b = r.get("bytes_per_step_mean")
    if _nan(b):
        return "–"
    txt = f"{float(b) / 1024:,.1f}"
    return txt if str(r.get("ddp_setting")) == "none" or _nan(r.get("bytes_ratio")) else \
        f"{txt} ({float(r['bytes_ratio']):.3g}×)"


# per study: (header, function of the row) -- units in the headers
COLUMNS = {
    "strong": [
        ("model", lambda r: r["model"]), ("nodes×ranks", _topo), ("placement", lambda r: _text(r.get("placement_class"))),
        ("DDP", _ddp), ("world size", lambda r: int(r["world_size"])),
        ("batch/rank", lambda r: int(r["batch_per_rank"])), ("ok/planned", _runs),
        ("samples/s (mean [95% CI])", lambda r: _ci(r, "samples_per_s", 0)),
        ("epoch time s", lambda r: _ci(r, "epoch_time_s", 2)),
        ("speedup vs DDP base", lambda r: _ratio(r, "speedup")),
        ("efficiency vs DDP base", lambda r: _ratio(r, "efficiency", pct=True)),
        ("efficiency vs non-DDP", lambda r: _ratio(r, "efficiency_vs_nonddp", pct=True)),
        ("Karp–Flatt e", _kf),
        ("exposed comm % (median)", lambda r: _fmt(r.get("exposed_comm_pct_median"), 1)),
        ("time to target s", _t2t),
        ("time-to-target speedup", lambda r: _ratio(r, "time_to_target_speedup")),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "weak": [
        ("model", lambda r: r["model"]), ("nodes×ranks", _topo), ("placement", lambda r: _text(r.get("placement_class"))),
        ("DDP", _ddp), ("world size", lambda r: int(r["world_size"])),
        ("batch/rank", lambda r: int(r["batch_per_rank"])), ("ok/planned", _runs),
        ("samples/s per rank (mean [95% CI])", lambda r: _ci(r, "samples_per_s_per_rank", 0)),
        ("samples/s (all ranks)", lambda r: _ci(r, "samples_per_s", 0)),
        ("weak efficiency vs DDP base", lambda r: _ratio(r, "weak_efficiency", pct=True)),
        ("weak efficiency vs non-DDP", lambda r: _ratio(r, "weak_efficiency_vs_nonddp", pct=True)),
        ("scaled speedup", lambda r: _ratio(r, "scaled_speedup")),
        ("exposed comm % (median)", lambda r: _fmt(r.get("exposed_comm_pct_median"), 1)),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "comm": [
        ("model", lambda r: r["model"]), ("nodes×ranks", _topo), ("placement", lambda r: _text(r.get("placement_class"))),
        ("world size", lambda r: int(r["world_size"])), ("ok/planned", _runs),
        ("exposed comm % (mean [95% CI])", lambda r: _ci(r, "exposed_comm_pct", 1)),
        ("exposed comm ms (median)", lambda r: _fmt(1e3 * r["exposed_comm_s_median"], 2)
         if not _nan(r.get("exposed_comm_s_median")) else "–"),
        ("samples/s (mean [95% CI])", lambda r: _ci(r, "samples_per_s", 0)),
        ("loss vs 1 node % [95% CI]", lambda r: _ratio(r, "inter_vs_intra_loss_pct", 1)),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "allreduce": [
        ("placement", lambda r: _text(r.get("placement_class"))), ("nodes×ranks", _topo),
        ("world size", lambda r: int(r["world_size"])), ("size KiB", lambda r: _fmt(r["size_bytes"] / 1024, 0)),
        ("repeats", lambda r: int(r["n_ok"])),
        ("time µs (mean [95% CI])", lambda r: _ci(r, "time_s", 1, 1e6)),
        ("algbw GB/s", lambda r: _fmt(r.get("algbw_gbps"), 3)), ("busbw GB/s", lambda r: _fmt(r.get("busbw_gbps"), 3)),
    ],
    "ddp": [
        ("model", lambda r: r["model"]), ("placement", _ddp_where), ("setting", lambda r: _text(r.get("ddp_setting"))),
        ("ok/planned", _runs), ("step ms (mean [95% CI])", lambda r: _ci(r, "step_time_s", 2, 1e3)),
        ("step vs none", lambda r: _vs_none(r, "step_ratio")),
        ("exposed comm % (mean [95% CI])", lambda r: _ci(r, "exposed_comm_pct", 1)),
        ("KiB per step (vs none)", _bytes),
        ("final loss (mean [95% CI])", lambda r: _ci(r, "final_train_loss", 4)),
        ("final loss vs none", lambda r: _vs_none(r, "final_loss_ratio", 3)),
        ("time to target s", _t2t), ("time to target vs none", lambda r: _vs_none(r, "ttt_ratio")),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "model_size": [
        ("model", lambda r: r["model"]), ("hidden width", lambda r: int(r["hidden_width"])),
        ("nodes×ranks", _topo), ("ok/planned", _runs), ("parameters", lambda r: _fmt(r.get("num_params"), 0)),
        ("peak memory GiB (mean [95% CI])", lambda r: _ci(r, "peak_mem_gib", 3)),
        ("memory kind", lambda r: _text(r.get("mem_kind"))),
        ("params per GB", lambda r: _fmt(r.get("params_per_gb"), 0)),
        ("weights / grads / optimizer KiB", lambda r: " / ".join(
            _fmt(r.get(f"{k}_bytes_median", math.nan) / 1024, 1) for k in ("weights", "grads", "optimizer"))),
        ("samples/s per rank", lambda r: _ci(r, "samples_per_s_per_rank", 0)),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
}


def table_rows(name: str, t: pd.DataFrame | None) -> dict:
    """{'headers': [...], 'rows': [[cell, ...], ...]} of one study's table for the template."""
    cols = COLUMNS[name]
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


def figure_entries(manifest: dict, folder: str | Path | None, names: list[str]) -> list[dict]:
    """The figures of one section as {'title', 'caption', 'data_uri'} or {'title', 'missing'}."""
    out = []
    for name in names:
        entry = manifest.get(name) or {"title": name.replace("_", " "), "missing": "figure not produced"}
        if "file" in entry and folder is not None:
            path = Path(folder) / entry["file"]
            try:
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                out.append({"title": entry["title"], "caption": entry.get("caption", ""),
                            "data_uri": f"data:image/png;base64,{data}"})
                continue
            except OSError:
                entry = {"title": entry["title"], "missing": f"figure file {entry['file']} not readable"}
        out.append({"title": entry.get("title", name), "missing": entry.get("missing", "figure not produced")})
    return out


def status_summary(points: pd.DataFrame | None) -> dict:
    """Counts by state (summary.status_counts) and the runs that did not succeed or ran contended."""
    out = status_counts(points)
    out.update(not_ok=[], contended=[])
    if points is None or points.empty:
        return out
    st = points["status"].fillna("missing")
    flags = points["contended"] if "contended" in points else pd.Series(False, index=points.index)
    contended = points[[str(v).lower() == "true" for v in flags]]
    out["not_ok"] = [{"point_id": r["point_id"], "status": r["status"], "reason": _text(r.get("reason"))}
                     for r in points[st != "ok"].to_dict("records")]
    out["contended"] = [{"point_id": r["point_id"], "status": r["status"], "contention": _text(r.get("contention"))}
                        for r in contended.to_dict("records")]
    return out


def reference_notes(tables: dict, reference: dict) -> dict[str, str]:
    """One sentence per study: the comparison with the seed paper's figures where the study measured
    the paper's workload, else why the overlay is off."""
    notes = {}
    if not reference:
        return notes
    checks = {name: comparable(name, tables.get(name)) for name in SECTIONS if name != "ddp"}  # not in the paper
    for name, check in checks.items():
        notes[name] = overlay_note(name, check)
    s, rs = tables.get("strong"), reference.get("strong")
    if checks["strong"]["comparable"] and rs is not None and s["efficiency"].notna().any():
        top = s[s["ddp"].astype(bool)].dropna(subset=["efficiency"]).sort_values("world_size").iloc[-1]
        p = int(top["world_size"])
        same = rs[rs["gpus"] == p]
        paper = (f"{same['efficiency_pct'].max():.1f}% at {p} GPUs" if len(same) else
                 f"{rs.iloc[-1]['efficiency_pct']:.1f}% at {int(rs.iloc[-1]['gpus'])} GPUs")
        notes["strong"] += (f" Measured strong-scaling efficiency at {p} ranks: {100 * top['efficiency']:.1f}% (vs the "
                            f"DDP baseline); the seed paper reports {paper} (vs a non-DDP 1-GPU run).")
    w, rw = tables.get("weak"), reference.get("weak")
    if checks["weak"]["comparable"] and rw is not None and w["weak_efficiency"].notna().any():
        top = w[w["ddp"].astype(bool)].dropna(subset=["weak_efficiency"]).sort_values("world_size").iloc[-1]
        base = rw.loc[rw["gpus"].idxmin(), "samples_per_s_per_gpu"]
        last = rw.sort_values("gpus").iloc[-1]
        notes["weak"] += (f" Measured weak efficiency at {int(top['world_size'])} ranks: "
                          f"{100 * top['weak_efficiency']:.1f}%; the seed paper's per-GPU throughput went from "
                          f"{base:,.0f} to {last['samples_per_s_per_gpu']:,.0f} samples/s "
                          f"({100 * last['samples_per_s_per_gpu'] / base:.1f}%) at {int(last['gpus'])} GPUs.")
    rc = reference.get("comm")
    if checks["comm"]["comparable"] and rc is not None and len(rc):
        notes["comm"] += (" The seed paper's comm_overhead_pct ("
                          + ", ".join(f"{r['case']}: {r['comm_overhead_pct']:.1f}%" for _, r in rc.iterrows())
                          + ") times an extra unbucketed all-reduce every other batch; it is not the exposed "
                            "communication of DDP measured here, so the two are not directly comparable.")
    rm = reference.get("model_size")
    if checks["model_size"]["comparable"] and rm is not None and len(rm):
        notes["model_size"] += (" The seed paper's per-GPU throughput halved with each doubling of width ("
                                + " → ".join(f"{v:,.0f}" for v in rm["samples_per_s_per_gpu"])
                                + " samples/s for widths " + ", ".join(str(int(x)) for x in rm["hidden_width"])
                                + "), pykan's cost rather than the hardware's; its peak memory was "
                                + f"{rm['peak_mem_gb'].min():.2f}–{rm['peak_mem_gb'].max():.2f} GB.")
    return notes


def fit_rows(fits: dict) -> list[list[str]]:
    """[experiment, model, placement, law, formula, world sizes, result] per law fit."""
    rows = []
    for experiment in ("strong", "weak"):
        for model, by_cls in (fits.get(experiment) or {}).items():
            for cls, laws in by_cls.items():
                for law, f in laws.items():
                    sizes = ", ".join(map(str, f.get("world_sizes", [])))
                    result = describe(f)
                    if f.get("status") == "fit":
                        result += f" (RMSE {f['rmse']:.3g} over {f['num_residuals']} repeats)"
                        if f.get("ci_reason"):
                            result += f"; {f['ci_reason']}"
                        if f.get("peak_world_size_rel"):
                            result += f"; USL peak at p ≈ {f['peak_world_size_rel']:.1f} × p_base"
                    rows.append([experiment, model, cls, law, f.get("formula", ""), sizes, result])
    return rows


def _param_text(name: str, prm: dict, scale: float = 1.0, unit: str = "") -> str:
    if prm.get("at_bound"):
        return f"{name} at its lower bound 0"
    txt = f"{name} = {prm['value'] * scale:.3g}{unit}"
    if prm.get("ci_lo") is not None:
        txt += f" [{prm['ci_lo'] * scale:.3g}, {prm['ci_hi'] * scale:.3g}]"
    return txt + (f" ({prm['note']})" if prm.get("note") else "")


def _band_text(b: dict, fmt) -> str:
    txt = fmt(b["value"])
    return txt + (f" [{fmt(b['lo'])}, {fmt(b['hi'])}]" if b.get("lo") is not None else "")


def model_sections(model_json: dict | None) -> list[dict]:
    """Per model: its fitted terms, and per placement class the comm terms, validation and predictions."""
    out = []
    for model, m in sorted(((model_json or {}).get("models") or {}).items()):
        sec = {"model": model, "reason": m.get("reason"), "compute": "", "placements": []}
        if m.get("compute"):
            names = {"c0_s": ("fixed per step", 1e3, " ms"), "per_sample_s": ("per sample", 1e6, " µs"),
                     "per_sample_param_s": ("per sample and parameter", 1e9, " ns")}
            sec["compute"] = ", ".join(_param_text(names[t][0], prm, *names[t][1:])
                                       for t, prm in m["compute"]["params"].items())
            if "c0_s" not in m["compute"]["terms"]:
                sec["compute"] += " (one per-rank batch measured: the fixed part is not separable, compute ∝ batch assumed)"
        for cls, e in (m.get("placements") or {}).items():
            entry = {"placement": cls, "reason": e.get("reason"), "comm": "", "validation": "", "rows": [],
                     "per_p": []}
            if e.get("comm"):
                c = e["comm"]
                beta = c["beta_s_per_byte"]
                bw = f"; 1/β = {1 / beta['value'] / 1e9:.3g} GB/s" if beta["value"] > 0 else ""
                entry["comm"] = (", ".join([_param_text("α", c["alpha_s"], 1e6, " µs"),
                                            _param_text("β", beta, 1e9, " ns/byte"),
                                            _param_text("exposure", c["exposure"])]) + bw + f" (from {c['source']})")
            v = e.get("validation") or {}
            if v:
                entry["validation"] = (f"LOO MAPE {v['loo_mape_pct']:.1f}% over p = "
                                       f"{', '.join(map(str, v['world_sizes_validated']))}" if v.get("loo_mape_pct")
                                       is not None else f"not validated: {v.get('reason', '')}")
                entry["per_p"] = [f"p = {x['world_size']}: " + (f"{x['error_pct']:+.1f}% (|error| {x['abs_error_pct']:.1f}%, "
                                                                 f"{x['num_points']} point(s))" if "error_pct" in x
                                                                 else x["reason"]) for x in v.get("per_world_size", [])]
            for r in e.get("predictions") or []:
                entry["rows"].append([
                    str(r["world_size"]), _fmt(r["batch_per_rank"], 1),
                    _band_text(r["step_time_s"], lambda x: f"{1e3 * x:.3g}"),
                    _band_text(r["samples_per_s"], lambda x: f"{x:,.0f}"),
                    _band_text(r["speedup"], lambda x: f"{x:.2f}"),
                    _band_text(r["efficiency"], lambda x: f"{100 * x:.0f}%"),
                    _band_text(r["time_s"], lambda x: f"{x:,.1f}"), f"{r['gpu_hours']:.3g}",
                    "extrapolated" if r["extrapolated"] else "within measured"])
            sec["placements"].append(entry)
        out.append(sec)
    return out


def ddp_model_rows(model_json: dict | None) -> list[list[str]]:
    """The performance model's step time per DDP setting (from its bytes) beside the measured one."""
    rows = []
    for model, entries in sorted(((model_json or {}).get("ddp_settings") or {}).items()):
        for e in entries:
            pred, err = e.get("predicted_step_time_s"), e.get("error_pct")
            rows.append([model, _ddp_where(e), e["ddp_setting"],
                         "–" if e.get("bytes_factor") is None else f"{e['bytes_factor']:.3g}",
                         _text(e.get("bytes_factor_source")), _fmt(1e3 * e["measured_step_time_s"], 2),
                         "–" if pred is None else _fmt(1e3 * pred, 2), "–" if err is None else f"{err:+.0f}%",
                         _text(e.get("reason"))])
    return rows


def guideline_groups(guidelines: list[dict]) -> list[dict]:
    """The guidelines by topic, each once, with its numbers as tables."""
    out = []
    for topic, title in TOPICS:
        items = [{**g, "tables": numbers_tables(g.get("numbers"))} for g in guidelines if g.get("topic") == topic]
        if items:
            out.append({"topic": topic, "title": title, "items": items})
    return out


def _cell_text(c: dict | None, unit: str) -> str:
    return fmt_ci(c["value"], c.get("lo"), c.get("hi"), unit) if c else "–"


def compare_context(current: dict, others: list[dict]) -> dict | None:
    """Key figures of every study side by side with their differences, and each study's hardware."""
    if not others:
        return None
    studies = compare_studies.unique_names([current] + list(others))
    names = [s["name"] for s in studies]
    rows = []
    for r in compare_studies.key_figures(studies):
        rows.append({"figure": r["figure"], "where": r["where"], "cells": [_cell_text(c, r["unit"]) for c in r["cells"]],
                     "deltas": [d or {"text": "–", "apart": False, "note": ""} for d in r["deltas"]]})
    return {"names": names, "rows": rows, "hardware": compare_studies.hardware_rows(studies)}


def expectations_context(expectations: dict | None) -> dict | None:
    if not expectations or not expectations.get("expectations"):
        return None
    items = []
    for e in expectations["expectations"]:
        rows = [{**r, "value_text": fmt_ci(r["value"], r.get("ci_lo"), r.get("ci_hi"), e["unit"])
                 + (" (exact)" if r.get("exact") and r.get("value") is not None else "")} for r in e["rows"]]
        bounds = " and ".join(f"{op} {expect_fmt(e[b], e['unit'])}" for b, op in (("min", "≥"), ("max", "≤"))
                              if e.get(b) is not None)
        items.append({**e, "rows": rows, "bounds": bounds})
    return {"items": items, "counts": expectations.get("counts", {}), "rule": expectations.get("rule", EXPECT_RULE)}


def looks_context(look: dict | None, guidelines: list[dict], config: dict) -> dict:
    """The looks of an adaptive study (scaling/sequential.py) and the deciding intervals' level."""
    rp = RepeatPlan.from_config(config.get("repeats", 1), float((config.get("report") or {}).get("alpha", 0.05)))
    ctx = history_context(look, guidelines, rp)
    ctx["level_label"] = level_label(rp.level)
    ctx["alpha_label"] = level_label(rp.alpha)
    return ctx


def build_context(tables: dict, guidelines: list[dict], manifest: dict, figures_dir, config: dict,
                  provenance: dict, reference: dict | None = None, generated_utc: str | None = None,
                  expectations: dict | None = None, compare: list[dict] | None = None,
                  look: dict | None = None) -> dict:
    reference = reference or {}
    thresholds = {k: v for k, v in (config.get("report") or {}).items() if k not in ("reference", "compare", "expect")}
    sections = {}
    for name in SECTIONS:
        t = tables.get(name)
        sections[name] = {"table": table_rows(name, t), "figures": figure_entries(manifest, figures_dir,
                                                                                   SECTION_FIGURES[name]),
                          "num_guidelines": sum(g.get("topic") == name for g in guidelines)}
    sections["comm"]["allreduce"] = table_rows("allreduce", tables.get("allreduce_sizes"))
    sections["ddp"]["model"] = ddp_model_rows(tables.get("model"))
    fits = tables.get("fits") or {}
    by_status = {s: [g for g in guidelines if g.get("status") == s] for s in ("advice", "inconclusive", "not_enough_data")}
    study = config.get("study", "study")
    status = status_summary(tables.get("points"))
    return {
        "study": study,
        "generated_utc": generated_utc or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "config_yaml": yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=100),
        "thresholds": config.get("report", {}),
        "status": status,
        "cards": CARDS,
        "provenance": provenance or {},
        "sections": sections,
        "guideline_groups": guideline_groups(guidelines),
        "looks": looks_context(look, guidelines, config),
        "summary": {"counts": {s: len(v) for s, v in by_status.items()},
                    "measured_on": measured_on(tables.get("points"), provenance or {}),
                    "recommendations": recommendations(tables.get("model"), guidelines)},
        "expectations": expectations_context(expectations),
        "compare": compare_context({"name": study, "folder": None, "tables": tables, "provenance": provenance or {}},
                                   compare or []),
        "fit_rows": fit_rows(fits),
        "fit_method": fits.get("method") or {},
        "models": model_sections(tables.get("model")),
        "link_check": linkcheck.report_context(tables.get("model")),
        "operator": operator.section(tables.get("strong"), tables.get("model")),
        "model_method": (tables.get("model") or {}).get("method", ""),
        "allreduce_source": (tables.get("model") or {}).get("allreduce_sweep", ""),
        "corun_source": ((tables.get("model") or {}).get("corun") or {}).get("text", ""),
        "target_rule": rule_text(thresholds),
        "baseline_note": PAPER_BASELINE,
        "reference_notes": reference_notes(tables, reference),
        "reference_used": bool(reference),
    }


def render_report(tables: dict, guidelines: list[dict], manifest: dict, figures_dir, config: dict,
                  provenance: dict, reference: dict | None = None, generated_utc: str | None = None,
                  templates: str | Path = TEMPLATES, expectations: dict | None = None,
                  compare: list[dict] | None = None, look: dict | None = None) -> str:
    """The report's HTML as a string. `expectations` = expectations.json; `compare` = other studies
    (compare.read_study), shown after this one; `look` = an adaptive study's last look file."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    ctx = build_context(tables, guidelines, manifest, figures_dir, config, provenance, reference, generated_utc,
                        expectations, compare, look)
    return env.get_template("report.html.j2").render(**ctx)
