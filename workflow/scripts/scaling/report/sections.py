"""The report's parts other than the tables, as what the template shows: figures inline, the runs'
status, the seed-paper notes, the law fits, the performance model, the guidelines by topic, the
comparison with other studies, the expectations and the looks."""

from __future__ import annotations

import math

import base64
from pathlib import Path

import pandas as pd

from ..common.columns import baseline_name
from ..common.fmt import band, cost, interval, plural, seconds, sig
from kan.contract.repeats import RepeatPlan
from ..common.settings import Settings
from ..common.stats import level_label
from ..decide.expectations import RULE as EXPECT_RULE
from ..decide.expectations import fmt as expect_fmt
from ..decide.expectations import fmt_ci
from ..decide.sequential import history_context
from ..tables.fits import fit_text
from . import compare as compare_studies
from .cells import cell_text, ddp_where, number_text
from .numbers import numbers_tables
from .reference import comparable, overlay_note
from .run_summary import status_counts

SECTIONS = ("strong", "weak", "comm", "model_size", "ddp")
TOPICS = (("time-to-accuracy", "Time to the held-out target"), ("deploy", "Where to run (performance model)"), ("strong", "Strong scaling"), ("weak", "Weak scaling"),
          ("comm", "Communication and placement"), ("model_size", "Memory"), ("ddp", "DDP settings"))


# the columns a section's table shows at first (at most 8: the rest is one click away and in the CSV),
# by the start of their header (a held-out target renames the time-to-target columns)
CORE_COLUMNS = {
    "strong": ("model", "placement", "world size", "batch/rank", "samples/s", "efficiency vs DDP base",
               "time to", "ok/planned"),
    "weak": ("model", "placement", "world size", "batch/rank", "samples/s per rank", "weak efficiency vs DDP base",
             "exposed comm %", "ok/planned"),
    "comm": ("model", "placement", "link class", "exposed comm % (mean", "samples/s", "loss vs 1 node", "ok/planned"),
    "model_size": ("model", "hidden width", "placement", "parameters", "peak memory", "samples/s per rank",
                   "ok/planned"),
    "ddp": ("model", "placement", "setting", "step ms", "step vs none", "final loss vs none", "time to target vs none",
            "ok/planned"),
}


def core_table(name: str, table: dict) -> dict:
    """The table with its core columns only (CORE_COLUMNS; the first match of each), and how many
    columns the full table has; a table without a core list is shown whole."""
    heads = table["headers"]
    keep = []
    for want in CORE_COLUMNS.get(name, heads):
        i = next((i for i, h in enumerate(heads) if h.startswith(want) and i not in keep), None)
        if i is not None:
            keep.append(i)
    return {"headers": [heads[i] for i in keep], "rows": [[r[i] for i in keep] for r in table["rows"]],
            "hidden": len(heads) - len(keep)}


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
    out.update(not_ok=[], contended=[], spent_hours=None)
    if points is None or points.empty:
        return out
    if "job_wall_s" in points:  # what the study spent: every job that ran, a failed one too
        wall = pd.to_numeric(points["job_wall_s"], errors="coerce")
        ran = wall.notna()
        if ran.any():
            out["spent_hours"] = float((pd.to_numeric(points.loc[ran, "world_size"]) * wall[ran]).sum() / 3600)
    st = points["status"].fillna("missing")
    flags = points["contended"] if "contended" in points else pd.Series(False, index=points.index)
    contended = points[[str(v).lower() == "true" for v in flags]]
    out["not_ok"] = [{"point_id": r["point_id"], "status": r["status"], "reason": cell_text(r.get("reason"))}
                     for r in points[st != "ok"].to_dict("records")]
    out["contended"] = [{"point_id": r["point_id"], "status": r["status"], "contention": cell_text(r.get("contention"))}
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
        # shown in its section only where the paper's points are drawn; otherwise one line for all
        # in the appendix (render.reference_off)
        notes[name] = overlay_note(name, check) if check["comparable"] else ""
        notes.setdefault("off", [])
        if not check["comparable"]:
            notes["off"].append(f"{name.replace('_', ' ')}: {'; '.join(check['why_not'])}")
    s, rs = tables.get("strong"), reference.get("strong")
    if checks["strong"]["comparable"] and rs is not None and s["efficiency"].notna().any():
        top = s[s["ddp"].astype(bool)].dropna(subset=["efficiency"]).sort_values("world_size").iloc[-1]
        p = int(top["world_size"])
        same = rs[rs["gpus"] == p]
        paper = (f"{same['efficiency_pct'].max():.1f}% at {p} GPUs" if len(same) else
                 f"{rs.iloc[-1]['efficiency_pct']:.1f}% at {int(rs.iloc[-1]['gpus'])} GPUs")
        notes["strong"] += (f" Measured strong-scaling efficiency at {p} ranks: {100 * top['efficiency']:.1f}% (vs "
                            f"{baseline_name([s])}); the seed paper reports {paper} (vs a non-DDP 1-GPU run).")
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
                    result = fit_text(f)
                    if f.get("status") == "fit":
                        result += f" (RMSE {f['rmse']:.3g} over {f['num_residuals']} runs)"
                        if f.get("ci_reason"):
                            result += f"; {f['ci_reason']}"
                        peak = f.get("peak_world_size_rel")
                        if peak and peak > 1000:  # κ ≈ 0: a peak that far out is no prediction
                            result += "; no USL peak within 1,000 × p_base (κ ≈ 0)"
                        elif peak:
                            result += f"; USL peak at p ≈ {peak:.1f} × p_base"
                    rows.append([experiment, model, cls, law, f.get("formula", ""), sizes, result])
    return rows


def _sig3(x: float) -> str:
    """x x 1000 (s -> ms; GB/s passed / 1000) to 3 significant digits, never in e-notation."""
    return sig(1e3 * x)


def _param_text(name: str, prm: dict, scale: float = 1.0, unit: str = "") -> str:
    if prm.get("at_bound"):
        return f"{name} at its lower bound 0"
    lo, hi = prm.get("ci_lo"), prm.get("ci_hi")
    if lo is not None and math.isclose(lo, hi, rel_tol=1e-9, abs_tol=1e-300):
        lo = None  # every draw gave the same value (one run per point): an interval of zero width says nothing
    if lo is not None:
        # to the first digit of the interval's width; an end within float noise of 0 reads 0
        lo = 0.0 if abs(prm["ci_lo"]) < 1e-9 * max(abs(prm["ci_hi"]), 1e-300) else prm["ci_lo"]
        txt = f"{name} = {interval(prm['value'], lo, prm['ci_hi'], scale, unit.strip() and ' ' + unit.strip())}"
    else:
        txt = f"{name} = {_sig3(prm['value'] * scale / 1e3)}{unit}"
    return txt + (f" ({prm['note']})" if prm.get("note") else "")


def model_sections(model_json: dict | None, device: str = "CPU") -> list[dict]:
    """Per model: its fitted terms, and per placement class the comm terms, validation and predictions;
    `device` ('GPU' or 'CPU') names the cost's unit."""
    out = []
    for model, m in sorted(((model_json or {}).get("models") or {}).items()):
        sec = {"model": model, "reason": m.get("reason"), "compute": "", "placements": [], "engine": m.get("engine")}
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
                # 1/β only where it reads as a link's bandwidth (a β near its bound 0 gives 1e14 GB/s)
                gbps = 1 / beta["value"] / 1e9 if beta["value"] > 0 else math.inf
                bw = f"; 1/β = {_sig3(gbps / 1e3)} GB/s" if 1e-3 < gbps < 1e4 else ""
                # d: the per-step DDP cost of a model never probed (imported runs; model/fit.py)
                fixed = [_param_text("DDP per step d", c["ddp_fixed_s"], 1e3, " ms")] if "ddp_fixed_s" in c else []
                entry["comm"] = (", ".join(fixed + [_param_text("α", c["alpha_s"], 1e6, " µs"),
                                                    _param_text("β", beta, 1e9, " ns/byte"),
                                                    _param_text("exposure", c["exposure"])]) + bw
                                 + f" (from {c['source']})")
            v = e.get("validation") or {}
            by_place = "per_placement" in v  # the placement model's (model/placed.py)
            if v.get("measured"):
                entry["validation"] = f"none needed: {v['method']}"
            elif v:
                how = "leave one placement out" if by_place else "LOO MAPE"
                entry["validation"] = (f"{how} {v['loo_mape_pct']:.1f}% over p = "
                                       f"{', '.join(map(str, v['world_sizes_validated']))}" if v.get("loo_mape_pct")
                                       is not None else f"not validated: {v.get('reason', '')}")
                entry["per_p"] = [f"p = {x['world_size']}: " + (f"{x['error_pct']:+.1f}% (|error| {x['abs_error_pct']:.1f}%, "
                                                                 f"{plural(x['num_points'], 'point')})" if "error_pct" in x
                                                                 else x["reason"]) for x in v.get("per_world_size", [])]
                entry["per_p"] += [f"{x['placement']}: " + (f"{x['error_pct']:+.1f}%" if "error_pct" in x else x["reason"])
                                   for x in v.get("per_placement", [])]
            entry["refused"] = [f"{x['world_size']} ranks ({x['placement']}): {x['reason']}" for x in e.get("refused", [])]
            for r in e.get("predictions") or []:
                entry["rows"].append([
                    f"{r['world_size']} ({r['placement']})" if r.get("placement") else str(r["world_size"]),
                    sig(r["batch_per_rank"]),
                    band(r["step_time_s"], 1e3, floor=0.0),
                    band(r["samples_per_s"], floor=0.0),
                    band(r["speedup"], floor=0.0),
                    band(r["efficiency"], 100, "%", floor=0.0),
                    seconds(*(r["time_s"].get(k) for k in ("value", "lo", "hi"))),
                    cost(r["gpu_hours"], device),
                    r.get("extrapolation") or ("extrapolated" if r["extrapolated"] else "within measured")])
            sec["placements"].append(entry)
        out.append(sec)
    return out


def ddp_model_rows(model_json: dict | None) -> list[list[str]]:
    """The performance model's step time per DDP setting (from its bytes) beside the measured one."""
    rows = []
    for model, entries in sorted(((model_json or {}).get("ddp_settings") or {}).items()):
        for e in entries:
            pred, err = e.get("predicted_step_time_s"), e.get("error_pct")
            rows.append([model, ddp_where(e), e["ddp_setting"],
                         "–" if e.get("bytes_factor") is None else f"{e['bytes_factor']:.3g}",
                         cell_text(e.get("bytes_factor_source")), number_text(1e3 * e["measured_step_time_s"], 2),
                         "–" if pred is None else number_text(1e3 * pred, 2), "–" if err is None else f"{err:+.0f}%",
                         cell_text(e.get("reason"))])
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


def looks_context(look: dict | None, guidelines: list[dict], repeats, settings: Settings) -> dict:
    """The looks of an adaptive study (decide/sequential.py) and the deciding intervals' level;
    `repeats`: the config's repeats."""
    rp = RepeatPlan.from_config(repeats, settings.alpha)
    ctx = history_context(look, guidelines, rp)
    ctx["level_label"] = level_label(rp.level)
    ctx["alpha_label"] = level_label(rp.alpha)
    return ctx


BASIS_NAMES = {"bspline": "B-spline", "rbf": "RBF", "chebyshev": "Chebyshev"}


def matched_models(config: dict) -> list[str]:
    """What mlp_matched is in this study, in numbers, for Terms: 'mlp_matched [2,64,1] is the MLP
    [2,416,1]: 1,665 parameters, against the KAN's 1,664 (kanscale, B-spline)'. Built as the trainer
    builds them (kan.models.build_model), on PyTorch's meta device: counted, never allocated."""
    if "model" not in config or "mlp_matched" not in config["model"]["impl"]:
        return []  # (a report rendered from tables alone has no model section)
    m = config["model"]
    import torch

    from kan.contract.point import ModelConfig
    from kan.models import build_model, matched_mlp_widths, mlp_param_count, num_params

    out = []
    for basis in m["basis"]:
        cfg = ModelConfig(impl="kanscale", basis=basis, widths=tuple(m["widths"]), grid_size=m["grid_size"],
                          spline_order=m["spline_order"], grid_range=tuple(m["grid_range"]))
        with torch.device("meta"):
            kan = num_params(build_model(cfg))
        mlp = matched_mlp_widths(cfg.widths, kan)
        out.append(f"mlp_matched [{','.join(map(str, cfg.widths))}] is the MLP [{','.join(map(str, mlp))}]: "
                   f"{mlp_param_count(mlp):,} parameters, against the {BASIS_NAMES.get(basis, basis)} KAN's {kan:,}")
    return out

