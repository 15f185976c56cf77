"""The self-contained HTML report: tables, inline figures (base64 PNG), guidelines, provenance.
Jinja2 with autoescape; everything the page needs is inside the one file (no external URLs)."""

from __future__ import annotations

import base64
import datetime as dt
import math
from pathlib import Path

import jinja2
import pandas as pd
import yaml

TEMPLATES = Path(__file__).resolve().parents[2] / "report" / "templates"
SECTIONS = ("strong", "weak", "comm", "model_size")


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
    """'mean [lo, hi]' (or just the mean for one repeat)."""
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
    return txt


# per study: (header, function of the row) -- units in the headers
COLUMNS = {
    "strong": [
        ("model", lambda r: r["model"]), ("nodes×ranks", _topo), ("world size", lambda r: int(r["world_size"])),
        ("batch/rank", lambda r: int(r["batch_per_rank"])), ("ok/planned", _runs),
        ("samples/s (mean [95% CI])", lambda r: _ci(r, "samples_per_s", 0)),
        ("epoch time s", lambda r: _ci(r, "epoch_time_s", 2)),
        ("speedup", lambda r: _fmt(r.get("speedup"), 2)), ("efficiency", lambda r: _pct(r.get("efficiency"))),
        ("Karp–Flatt e", lambda r: _fmt(r.get("karp_flatt"), 3)),
        ("exposed comm % (median)", lambda r: _fmt(r.get("exposed_comm_pct_median"), 1)),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "weak": [
        ("model", lambda r: r["model"]), ("nodes×ranks", _topo), ("world size", lambda r: int(r["world_size"])),
        ("batch/rank", lambda r: int(r["batch_per_rank"])), ("ok/planned", _runs),
        ("samples/s per rank (mean [95% CI])", lambda r: _ci(r, "samples_per_s_per_rank", 0)),
        ("samples/s (all ranks)", lambda r: _ci(r, "samples_per_s", 0)),
        ("weak efficiency", lambda r: _pct(r.get("weak_efficiency"))),
        ("scaled speedup", lambda r: _fmt(r.get("scaled_speedup"), 2)),
        ("exposed comm % (median)", lambda r: _fmt(r.get("exposed_comm_pct_median"), 1)),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "comm": [
        ("model", lambda r: r["model"]), ("nodes×ranks", _topo), ("placement", lambda r: r["placement"]),
        ("world size", lambda r: int(r["world_size"])), ("ok/planned", _runs),
        ("exposed comm % (median)", lambda r: _fmt(r.get("exposed_comm_pct_median"), 1)),
        ("exposed comm ms (median)", lambda r: _fmt(1e3 * r["exposed_comm_s_median"], 2)
         if r.get("exposed_comm_s_median") is not None and not math.isnan(r["exposed_comm_s_median"]) else "–"),
        ("samples/s (mean [95% CI])", lambda r: _ci(r, "samples_per_s", 0)),
        ("inter vs intra loss %", lambda r: _fmt(r.get("inter_vs_intra_loss_pct"), 1)),
        ("not ok", lambda r: _text(r.get("not_ok"))),
    ],
    "model_size": [
        ("model", lambda r: r["model"]), ("hidden width", lambda r: int(r["hidden_width"])),
        ("nodes×ranks", _topo), ("ok/planned", _runs), ("parameters", lambda r: _fmt(r.get("num_params"), 0)),
        ("peak memory GiB (mean [95% CI])", lambda r: _ci(r, "peak_mem_gib", 3)),
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
    if points is None or points.empty:
        return {"planned": 0, "ok": 0, "failed": 0, "missing": 0, "not_ok": []}
    st = points["status"].fillna("missing")
    not_ok = points[st != "ok"]
    return {"planned": len(points), "ok": int((st == "ok").sum()), "missing": int((st == "missing").sum()),
            "failed": int(((st != "ok") & (st != "missing")).sum()),
            "by_status": st.value_counts().to_dict(),
            "not_ok": [{"point_id": r["point_id"], "status": r["status"], "reason": r.get("reason") or ""}
                       for r in not_ok.to_dict("records")]}


def reference_notes(tables: dict, reference: dict) -> dict[str, str]:
    """One sentence per study comparing the measured figures with the seed paper's, where both exist."""
    notes = {}
    if not reference:
        return notes
    s, rs = tables.get("strong"), reference.get("strong")
    if s is not None and rs is not None and len(s) and s["efficiency"].notna().any():
        top = s.dropna(subset=["efficiency"]).sort_values("world_size").iloc[-1]
        p = int(top["world_size"])
        same = rs[rs["gpus"] == p]
        paper = (f"{same['efficiency_pct'].max():.1f}% at {p} GPUs" if len(same) else
                 f"{rs.iloc[-1]['efficiency_pct']:.1f}% at {int(rs.iloc[-1]['gpus'])} GPUs")
        notes["strong"] = (f"Measured strong-scaling efficiency at {p} ranks: {100 * top['efficiency']:.1f}%; the seed "
                           f"paper reports {paper} (A100, pykan, fixed per-GPU batch 512, one run per point).")
    w, rw = tables.get("weak"), reference.get("weak")
    if w is not None and rw is not None and len(w) and w["weak_efficiency"].notna().any():
        top = w.dropna(subset=["weak_efficiency"]).sort_values("world_size").iloc[-1]
        base = rw.loc[rw["gpus"].idxmin(), "samples_per_s_per_gpu"]
        last = rw.sort_values("gpus").iloc[-1]
        notes["weak"] = (f"Measured weak efficiency at {int(top['world_size'])} ranks: {100 * top['weak_efficiency']:.1f}%; "
                         f"the seed paper's per-GPU throughput went from {base:,.0f} to {last['samples_per_s_per_gpu']:,.0f} "
                         f"samples/s ({100 * last['samples_per_s_per_gpu'] / base:.1f}%) at {int(last['gpus'])} GPUs.")
    rc = reference.get("comm")
    if rc is not None and len(rc):
        notes["comm"] = ("The seed paper's comm_overhead_pct ("
                         + ", ".join(f"{r['case']}: {r['comm_overhead_pct']:.1f}%" for _, r in rc.iterrows())
                         + ") times an extra unbucketed all-reduce every other batch; it is not the exposed "
                           "communication of DDP measured here, so the two are not directly comparable.")
    m, rm = tables.get("model_size"), reference.get("model_size")
    if m is not None and rm is not None and len(rm):
        notes["model_size"] = ("The seed paper's per-GPU throughput halved with each doubling of width ("
                               + " → ".join(f"{v:,.0f}" for v in rm["samples_per_s_per_gpu"])
                               + " samples/s for widths " + ", ".join(str(int(x)) for x in rm["hidden_width"])
                               + "), pykan's cost rather than the hardware's; its peak memory was "
                               + f"{rm['peak_mem_gb'].min():.2f}–{rm['peak_mem_gb'].max():.2f} GB.")
    return notes


def build_context(tables: dict, guidelines: list[dict], manifest: dict, figures_dir, config: dict,
                  provenance: dict, reference: dict | None = None, generated_utc: str | None = None) -> dict:
    reference = reference or {}
    sec_figs = {"strong": ["strong_speedup", "strong_efficiency"], "weak": ["weak"], "comm": ["comm"],
                "model_size": ["model_size"]}
    sections = {}
    for name in SECTIONS:
        t = tables.get(name)
        sections[name] = {"table": table_rows(name, t), "figures": figure_entries(manifest, figures_dir, sec_figs[name]),
                          "guidelines": [g for g in guidelines if g.get("topic") == name]}
    fits = tables.get("fits") or {}
    return {
        "study": config.get("study", "study"),
        "generated_utc": generated_utc or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "config_yaml": yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=100),
        "thresholds": config.get("report", {}),
        "status": status_summary(tables.get("points")),
        "provenance": provenance or {},
        "sections": sections,
        "guidelines": guidelines,
        "fits": fits,
        "reference_notes": reference_notes(tables, reference),
        "reference_used": bool(reference),
    }


def render_report(tables: dict, guidelines: list[dict], manifest: dict, figures_dir, config: dict,
                  provenance: dict, reference: dict | None = None, generated_utc: str | None = None,
                  templates: str | Path = TEMPLATES) -> str:
    """The report's HTML as a string."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    ctx = build_context(tables, guidelines, manifest, figures_dir, config, provenance, reference, generated_utc)
    return env.get_template("report.html.j2").render(**ctx)
