"""Several studies in one report (config key `report.compare`): reading other studies' results
folders, and the key figures of all of them side by side with their differences.

A compared folder is a results/<study> folder this workflow wrote (on another cluster, with another
kernel, another NCCL setting ...), given relative to the working directory. The current study is
always the first; differences are each study's value against it.

Rows are matched across studies by placement (nodes x ranks per node) and model. Models match by
their label when every study has the same labels, else by their widths alone (two kernel
implementations of one architecture carry different labels); a study with two models of one
width keeps full labels, which then match nothing.

Two intervals that do not overlap mean the studies differ (the test errs strict); overlapping
intervals are reported as such, not as "equal".
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..common.columns import model_family
from ..common.io import read_csv
from ..common.stats import as_number
from ..tables.experiments import BASELINE_RATIOS
from .reference import widths_of

REQUIRED = ("points.csv", "strong.csv", "weak.csv", "comm.csv", "model_size.csv", "model.json", "provenance.json")
OPTIONAL = ("allreduce_sizes.csv", "loss_curves.csv", "measurements.csv")
CSV_TABLES = ("points", "strong", "weak", "comm", "model_size", "ddp", "allreduce_sizes", "loss_curves")


def compare_files(folders, key: str = "report.compare", workdir: str | Path = ".") -> list[str]:
    """The files of the compared folders a report reads (inputs of the report rules); ValueError
    naming the key and the folder when one is absent or is not a results folder of this workflow."""
    if folders is None:
        return []
    if not isinstance(folders, list) or not all(isinstance(f, str) and f for f in folders):
        raise ValueError(f"{key}: must be a list of results folders (e.g. [results/cluster_a]), got {folders!r}")
    out = []
    for i, folder in enumerate(folders):
        where, path = f"{key}[{i}]", Path(workdir) / folder
        if not path.is_dir():
            raise ValueError(f"{where}: {folder}: no such folder (relative to the working directory "
                             f"{Path(workdir).resolve()}); give a results/<study> folder this workflow wrote")
        lacking = [f for f in REQUIRED if not (path / f).is_file()]
        if lacking:
            raise ValueError(f"{where}: {folder}: {', '.join(lacking)} missing; is it a results/<study> folder whose "
                             f"study ran to its report?")
        out += [f"{folder.rstrip('/')}/{f}" for f in REQUIRED + OPTIONAL if (path / f).is_file()]
    return out


def _json(path: Path, where: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{where}: {path}: not readable JSON ({e})") from None


def read_study(folder: str | Path, where: str = "report.compare") -> dict:
    """{'name', 'folder', 'tables', 'provenance'} of a results folder; `tables` as read_tables gives
    them (model.json under 'model'). ValueError naming `where` and the file for a malformed one."""
    folder = Path(folder)
    tables = {}
    for name in CSV_TABLES:
        path = folder / f"{name}.csv"
        try:
            tables[name] = read_csv(path)
        except (pd.errors.ParserError, UnicodeDecodeError) as e:
            raise ValueError(f"{where}: {path}: not a readable CSV ({e})") from None
    for name, cols in (("strong", ("model", "world_size", "nodes", "gpus_per_node")), ("points", ("status",))):
        missing = [c for c in cols if c not in tables[name]]
        if missing and not tables[name].empty:
            raise ValueError(f"{where}: {folder / (name + '.csv')}: columns {', '.join(missing)} missing; not a "
                             f"table this workflow wrote")
    tables["model"] = _json(folder / "model.json", where)
    prov = _json(folder / "provenance.json", where)
    m = read_csv(folder / "measurements.csv") if (folder / "measurements.csv").is_file() else pd.DataFrame()
    names = m["study"].dropna().unique() if "study" in m else []
    return {"name": str(names[0]) if len(names) == 1 else str(folder), "folder": str(folder), "tables": tables,
            "provenance": prov if isinstance(prov, dict) else {}}


def read_studies(folders: list[str], key: str = "report.compare") -> list[dict]:
    return [read_study(f, f"{key}[{i}]") for i, f in enumerate(folders or [])]


def unique_names(studies: list[dict]) -> list[dict]:
    """Two studies of one name (the same study on two clusters) get their folder as the label."""
    names = [s["name"] for s in studies]
    for s in studies:
        if names.count(s["name"]) > 1 and s.get("folder"):
            s["name"] = f"{s['name']} ({s['folder']})"
    return studies


# ---- matching rows across studies ---------------------------------------------------------------

def model_keys(studies: list[dict]) -> dict[tuple[int, str], str]:
    """{(study index, model label): key}: the label when all studies share their labels, else the
    widths (a study whose widths repeat keeps its labels)."""
    labels = []
    for s in studies:
        got = set()
        for name in ("strong", "weak", "comm", "model_size"):
            t = s["tables"].get(name)
            if t is not None and "model" in t:
                got |= set(t["model"].dropna().astype(str))
        got |= set(((s["tables"].get("model") or {}).get("models") or {}))
        labels.append(got)
    same = all(lbl == labels[0] for lbl in labels)
    out = {}
    for i, lbls in enumerate(labels):
        widths = [str(widths_of(m)) for m in lbls]
        for m in lbls:
            w = widths_of(m)
            out[(i, m)] = m if same or w is None or widths.count(str(w)) > 1 else "[" + ",".join(map(str, w)) + "]"
    return out


def _ddp_rows(t: pd.DataFrame | None) -> pd.DataFrame:
    if t is None or t.empty:
        return pd.DataFrame()
    return t[t["ddp"].astype(str).str.lower().isin(("true", "1"))] if "ddp" in t else t


def _cell(r, col: str, ci: str | None) -> dict:
    v = r.get(col)
    lo = r.get(f"{ci}_ci_lo") if ci else None
    hi = r.get(f"{ci}_ci_hi") if ci else None
    exact = col in BASELINE_RATIOS and str(r.get("is_baseline", "")).lower() == "true"
    return {"value": as_number(v), "lo": None if exact else as_number(lo), "hi": None if exact else as_number(hi)}


def _by_key(studies, keys, name: str, index: list[str]) -> list[dict]:
    """Per study {(model key, *index values): row} of one table's DDP rows. The model-size sweep's
    labels differ by width: there the key is the model family and the width."""
    out = []
    for i, s in enumerate(studies):
        t = _ddp_rows(s["tables"].get(name))
        rows = {}
        for r in t.to_dict("records"):
            m = str(r["model"])
            head = model_family(m) if name == "model_size" else keys.get((i, m), m)
            rows[(head,) + tuple(int(r[c]) for c in index)] = r
        out.append(rows)
    return out


# metric: (table, value column, CI stem, unit, label); unit "fraction" is shown as %
KEY_FIGURES = {
    "strong_samples_per_s": ("strong", "samples_per_s_mean", "samples_per_s", "samples/s", "strong: samples/s"),
    "strong_efficiency": ("strong", "efficiency", "efficiency", "fraction", "strong: efficiency"),
    "weak_efficiency": ("weak", "weak_efficiency", "weak_efficiency", "fraction", "weak: efficiency"),
    "exposed_comm_pct": ("comm", "exposed_comm_pct_mean", "exposed_comm_pct", "%", "comm: exposed communication"),
    "inter_node_loss_pct": ("comm", "inter_vs_intra_loss_pct", "inter_vs_intra_loss_pct", "%",
                            "comm: loss vs one node"),
    "peak_mem_gib": ("model_size", "peak_mem_gib_mean", "peak_mem_gib", "GiB", "model size: peak memory"),
}


def key_figures(studies: list[dict]) -> list[dict]:
    """Rows {'figure', 'where', 'unit', 'cells': [per study {'value', 'lo', 'hi'} or None],
    'deltas': [per later study {'text', 'apart'} or None]} of what all studies measured alike."""
    keys = model_keys(studies)
    rows = []
    place = ["nodes", "gpus_per_node"]
    # throughput, exposed comm, inter-node loss: at every placement all studies measured
    for fig, index in (("strong_samples_per_s", place), ("exposed_comm_pct", place),
                       ("inter_node_loss_pct", place), ("peak_mem_gib", ["hidden_width"])):
        table, col, ci, unit, label = KEY_FIGURES[fig]
        per = _by_key(studies, keys, table, index)
        for k in sorted(set.intersection(*(set(p) for p in per)) if per else set()):
            cells = [_cell(p[k], col, ci) for p in per]
            if any(c["value"] is not None for c in cells):
                where = f"{k[0]} width {k[1]}" if fig == "peak_mem_gib" else f"{k[0]} {k[1]}x{k[2]}"
                rows.append(_row(label, where, unit, cells))
    # efficiencies: at the largest world size all studies measured (its best placement there)
    for fig in ("strong_efficiency", "weak_efficiency"):
        table, col, ci, unit, label = KEY_FIGURES[fig]
        per = _by_key(studies, keys, table, place)
        common = set.intersection(*(set(p) for p in per)) if per else set()
        for model in sorted({k[0] for k in common}):
            at = [k for k in common if k[0] == model and all(as_number(p[k].get(col)) is not None for p in per)]
            if not at:
                continue
            k = max(at, key=lambda k: (k[1] * k[2], -k[1]))
            rows.append(_row(label, f"{model} {k[1]}x{k[2]} (largest common world size, p={k[1] * k[2]})", unit,
                             [_cell(p[k], col, ci) for p in per]))
    rows += _model_errors(studies, keys)
    return rows


def _model_errors(studies, keys) -> list[dict]:
    per = []
    for i, s in enumerate(studies):
        got = {}
        for model, m in ((s["tables"].get("model") or {}).get("models") or {}).items():
            for cls, e in (m.get("placements") or {}).items():
                mape = (e.get("validation") or {}).get("loo_mape_pct")
                got[(keys.get((i, model), model), cls)] = {"value": as_number(mape), "lo": None, "hi": None}
        per.append(got)
    common = set.intersection(*(set(p) for p in per)) if per else set()
    return [_row("model: held-out error (LOO MAPE)", f"{k[0]} {k[1]}", "%", [p[k] for p in per])
            for k in sorted(common) if any(p[k]["value"] is not None for p in per)]


def _row(label: str, where: str, unit: str, cells: list[dict]) -> dict:
    first = cells[0]
    deltas = [delta(first, c, unit) for c in cells[1:]]
    return {"figure": label, "where": where, "unit": unit, "cells": cells, "deltas": deltas}


def delta(a: dict, b: dict, unit: str) -> dict | None:
    """b against a: a relative change for rates and sizes, a difference in percentage points for
    fractions and percentages; `apart` when both intervals exist and do not overlap."""
    if a["value"] is None or b["value"] is None:
        return None
    if unit in ("fraction", "%"):
        scale = 100 if unit == "fraction" else 1
        text = f"{scale * (b['value'] - a['value']):+.1f} pp"
    elif a["value"]:
        text = f"{100 * (b['value'] / a['value'] - 1):+.1f}%"
    else:
        return None
    known = None not in (a["lo"], a["hi"], b["lo"], b["hi"])
    apart = known and (b["lo"] > a["hi"] or b["hi"] < a["lo"])
    note = "intervals apart" if apart else "intervals overlap" if known else "no interval"
    return {"text": text, "apart": bool(apart), "note": note}


def hardware_rows(studies: list[dict]) -> list[list[str]]:
    """Per study: name, folder, devices, hosts, backend, software, commit, records."""
    rows = []
    for s in studies:
        p = s.get("provenance") or {}

        def j(k):
            return ", ".join(p.get(k) or []) or "–"

        sw = "; ".join(f"{label} {', '.join(p.get(k) or [])}" for k, label in
                       (("torch", "torch"), ("cuda", "CUDA"), ("nccl", "NCCL")) if p.get(k))
        rows.append([s["name"], s.get("folder") or "this study", j("device_names"), j("hostnames"), j("backends"),
                     sw or "–", j("git"), str(p.get("num_records", "–"))])
    return rows

