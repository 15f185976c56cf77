"""Figures of one study, or of several side by side (report.compare), written as PNG into one folder
with a manifest `figures.json`: {name: {"file", "title", "caption"}} or {name: {"title", "missing":
why}}. A figure whose data are absent becomes a manifest entry with `missing`, never an exception.
One panel per image (plotkit.PANEL): on a narrow screen each gets the page's full width.

Measurements are markers with 95% CI bars; the performance model's predictions are dashed lines
(with their bootstrap band for one study), labelled "model" with their leave-one-world-size-out
error. The seed paper's points are drawn only where the first study is comparable
(reference.comparable). Series are labelled by placement class, so ranks that shared one host read
"simulated inter-node (one host)". With several studies each study has one hue on every figure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from . import plotkit as kit
from .columns import INTER, INTRA, SIMULATED, SINGLE
from .ddp_plot import TITLES as DDP_TITLES
from .ddp_plot import plot_ddp
from .reference import comparable, overlay_label, overlay_note

REFERENCE_LABEL = "seed paper (A100, pykan)"
REF_STYLE = {"color": "0.45", "marker": "s", "linestyle": ":", "markersize": 6, "label": REFERENCE_LABEL}
GIB = 2**30
REFERENCE_DIRS = {"seed-paper-a100": Path(__file__).resolve().parents[2] / "report" / "reference"}
FIGURES = ("strong_speedup", "strong_efficiency", "loss_curves", "weak_throughput", "weak_efficiency",
           "comm_exposed", "comm_throughput", "allreduce_busbw", "allreduce_time", "model_size_memory",
           "model_size_throughput")  # and, in a study with the ddp experiment, ddp_plot.TITLES
TITLES = {"strong_speedup": "Strong scaling: speedup", "strong_efficiency": "Strong scaling: efficiency",
          "loss_curves": "Training loss vs training time", "weak_throughput": "Weak scaling: throughput per rank",
          "weak_efficiency": "Weak scaling: efficiency", "comm_exposed": "Exposed communication by placement",
          "comm_throughput": "Throughput by placement", "allreduce_busbw": "All-reduce: bus bandwidth",
          "allreduce_time": "All-reduce: time", "model_size_memory": "Model size: peak memory",
          "model_size_throughput": "Model size: throughput per rank", **DDP_TITLES}


def load_reference(name: str | None) -> dict[str, pd.DataFrame]:
    """The seed paper's per-point CSVs (strong, weak, comm, model_size) by the config's
    report.reference name, found next to the scripts; {} for none."""
    folder = REFERENCE_DIRS.get(name) if name else None
    if folder is None:
        return {}
    out = {}
    for part in ("strong", "weak", "comm", "model_size"):
        path = folder / f"{part}.csv"
        if path.exists():
            out[part] = pd.read_csv(path)
    return out


def _ddp(t: pd.DataFrame | None) -> pd.DataFrame:
    if t is None or t.empty:
        return pd.DataFrame()
    return t[t["ddp"].astype(bool)] if "ddp" in t else t


def _lines(t: pd.DataFrame, x: str):
    """(model, placement class, rows) per measured curve; the single-rank baseline starts every
    multi-rank class's curve, so each reads as one line from p = 1."""
    for model, g in t.groupby("model", sort=True):
        base = g[g["placement_class"] == SINGLE]
        classes = [c for c in g["placement_class"].unique() if c != SINGLE]
        for cls in sorted(classes) or [SINGLE]:
            rows = g[g["placement_class"] == cls] if cls != SINGLE else base
            yield model, cls, (pd.concat([base, rows]).sort_values(x) if cls != SINGLE else rows)


def _series(ax, st: kit.Styles, study: int, t: pd.DataFrame, x: str, y: str, lo: str | None, hi: str | None,
            scale: float = 1.0) -> tuple[list, list]:
    """Errorbar lines of one study; returns (x values, interval tops) for the frame."""
    xs, tops = [], []
    for model, cls, g in _lines(t, x):
        mid = scale * g[y]
        low = scale * g[lo] if lo else mid
        high = scale * g[hi] if hi else mid
        ax.errorbar(g[x], mid, yerr=kit.errors(mid, low, high), marker=st.marker(model, cls), capsize=4,
                    color=st.color(study, cls), label=st.label(study, model, cls), lw=1.6, markersize=6)
        xs += list(g[x])
        tops += list(high)
    return xs, tops


def _measured(ax, st: kit.Styles, have, y: str, ci: str, scale: float = 1.0) -> tuple[list, list, list]:
    """Every study's curves of column y (CI columns <ci>_ci_lo / _hi); (x values, interval tops, values)."""
    xs, tops, vals = [], [], []
    for i, t in have:
        t = t.dropna(subset=[y])
        x, top = _series(ax, st, i, t, "world_size", y, f"{ci}_ci_lo", f"{ci}_ci_hi", scale)
        xs, tops, vals = xs + x, tops + top, vals + list(scale * t[y])
    return xs, tops, vals


def _frame(ax, st: kit.Styles, have, vals, tops, ci_hi: str, scale: float = 1.0, at_least=None) -> bool:
    """The y range around the data (kit.limits); a ▲ where an interval is cut; True if one is."""
    top = kit.limits(ax, vals, tops, at_least=at_least)
    cuts = [kit.mark_cut(ax, t["world_size"], scale * t[ci_hi], top, st.color(i, INTRA)) for i, t in have]
    return any(cuts)


def _entry(fig, ax, folder: Path, name: str, ylabel: str, title: str, caption: str, cut: bool = False) -> dict:
    """Label the axes, put the legend below, write the PNG: the figure's manifest entry."""
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    kit.legend_below(fig, ax)
    return {"file": kit.save(fig, folder, name), "title": TITLES[name],
            "caption": caption + (" " + kit.CUT_NOTE if cut else "")}


def model_lines(model_json: dict | None) -> list[tuple[str, str, list[dict], str]]:
    """[(model, placement class, predictions, validation text)] of the performance model, multi-rank
    classes only (the single-rank class is one point)."""
    out = []
    for model, m in sorted(((model_json or {}).get("models") or {}).items()):
        for cls, entry in (m.get("placements") or {}).items():
            if cls == SINGLE or not entry.get("predictions"):
                continue
            v = entry.get("validation") or {}
            err = (f"LOO MAPE {v['loo_mape_pct']:.0f}%" if v.get("loo_mape_pct") is not None else "not validated")
            out.append((model, cls, entry["predictions"], err))
    return out


def _draw_model(ax, st: kit.Styles, study: int, model_json: dict | None, key: str, scale: float = 1.0) -> list:
    """Dashed model lines (with their bootstrap band for one study); returns the x values drawn."""
    xs_all = []
    for model, cls, preds, err in model_lines(model_json):
        xs = [r["world_size"] for r in preds]
        ys = [scale * r[key]["value"] for r in preds]
        color = st.color(study, cls)
        ax.plot(xs, ys, ls=kit.PLACEMENT_DASHES.get(cls, "--"), lw=1.1, color=color,
                label=f"model: {st.label(study, model, cls)} ({err})")
        lo = [r[key]["lo"] for r in preds]
        hi = [r[key]["hi"] for r in preds]
        if not st.multi and all(v is not None for v in lo + hi):
            ax.fill_between(xs, [scale * v for v in lo], [scale * v for v in hi], color=color, alpha=0.12, lw=0)
        xs_all += xs
    return xs_all


def _studies_with(studies: list[dict], name: str, col: str) -> list[tuple[int, pd.DataFrame]]:
    out = []
    for i, s in enumerate(studies):
        t = _ddp(s["tables"].get(name))
        if not t.empty and col in t:
            t = t[t[col].notna()]
            if not t.empty:
                out.append((i, t))
    return out


def _model_caption(studies) -> str:
    if not any(model_lines(s["tables"].get("model")) for s in studies):
        return ""
    return (" Dashed (intra-node), dash-dotted (inter-node), dotted (simulated inter-node): the performance "
            "model's prediction (a model, not a measurement) with its leave-one-world-size-out error"
            + ("" if len(studies) > 1 else " and its bootstrap band") + ".")


def plot_strong(studies: list[dict], st: kit.Styles, ref: pd.DataFrame | None, folder: Path,
                threshold: float) -> dict:
    have = _studies_with(studies, "strong", "speedup")
    if not have or all(t["world_size"].nunique() < 2 for _, t in have):
        why = "no strong-scaling points measured at two or more world sizes (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("strong_speedup", "strong_efficiency")}
    check = comparable("strong", studies[0]["tables"].get("strong"))
    ref = ref if check["comparable"] and ref is not None and have[0][0] == 0 else None
    ref_style = {**REF_STYLE, "label": overlay_label(check) if ref is not None else REFERENCE_LABEL}
    cap_tail = _model_caption(studies) + " " + overlay_note("strong", check)
    st = st.within([t for _, t in have])
    out = {}
    base = min(t["baseline_world_size"].min() for _, t in have)

    fig, ax = kit.figure()
    xs, tops, vals = _measured(ax, st, have, "speedup", "speedup")
    for i, _ in have:
        xs += _draw_model(ax, st, i, studies[i]["tables"].get("model"), "speedup")
    grid = sorted(set(xs) | (set(ref["gpus"]) if ref is not None else set()))
    ax.plot(grid, [p / base for p in grid], color="k", lw=1, ls=":", label="ideal (linear)")
    if ref is not None:
        ax.plot(ref["gpus"], ref["speedup"], **ref_style)
        vals += list(ref["speedup"])
    kit.world_axis(ax, grid)
    kit.plain_log_y(ax, 2)
    ax.set_ylim(min(0.5, 0.8 * min(vals)), 1.5 * max([p / base for p in grid] + vals + [v for v in tops if v == v]))
    out["strong_speedup"] = _entry(
        fig, ax, folder, "strong_speedup", f"speedup vs {int(base)} DDP rank{'s' if base > 1 else ''} (×)",
        "Strong scaling: speedup (95% CI over repeats)",
        "Speedup = samples/s at p ranks ÷ samples/s at the DDP baseline (exactly 1 there, so it has no interval); "
        "dotted: ideal linear speedup." + cap_tail)

    fig, ax = kit.figure()
    xs, tops, vals = _measured(ax, st, have, "efficiency", "efficiency", 100)
    for i, _ in have:
        xs += _draw_model(ax, st, i, studies[i]["tables"].get("model"), "efficiency", 100)
    ax.axhline(100 * threshold, **kit.THRESHOLD, label=f"threshold {threshold:.0%}")
    if ref is not None:
        ax.plot(ref["gpus"], ref["efficiency_pct"], **ref_style)
        vals += list(ref["efficiency_pct"])
    kit.world_axis(ax, sorted(set(xs) | (set(ref["gpus"]) if ref is not None else set())))
    cut = _frame(ax, st, have, vals, tops, "efficiency_ci_hi", 100, at_least=110)
    out["strong_efficiency"] = _entry(
        fig, ax, folder, "strong_efficiency", "efficiency vs DDP baseline (%)",
        "Strong scaling: efficiency (95% CI over repeats)",
        "Efficiency = speedup ÷ (p / p_base) against the DDP baseline, which is 100% by definition (no interval); "
        "solid grey: the configured threshold." + cap_tail, cut)
    return out


def plot_loss_curves(studies: list[dict], st: kit.Styles, folder: Path) -> dict:
    """Training loss vs training time per world size (strong experiment), one panel per model."""
    parts = []
    for i, s in enumerate(studies):
        c = s["tables"].get("loss_curves")
        if c is not None and len(c) and "experiment" in c:
            parts.append(c[c["experiment"] == "strong"].assign(_study=i))
    c = pd.concat(parts) if parts else pd.DataFrame()
    if c.empty:
        return {"loss_curves": {"title": TITLES["loss_curves"],
                                "missing": "no loss curve recorded for the strong experiment (loss_curves.csv is empty)"}}
    models = sorted(c["model"].unique())
    ncol = min(2, len(models))
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(kit.PANEL[0] * ncol, kit.PANEL[1] * nrow), squeeze=False,
                             layout="constrained")
    sizes = sorted(int(p) for p in c["world_size"].unique())
    for ax, model in zip(axes.flat, models):
        g = c[c["model"] == model]
        for (i, _, _), run in g.groupby(["_study", "point_id", "rep"]):
            run = run.sort_values("step")
            p, ddp = int(run["world_size"].iloc[0]), bool(run["ddp"].iloc[0])
            shades = (sns.light_palette(st.color(i), len(sizes) + 2)[2:] if st.multi
                      else sns.color_palette("viridis", len(sizes)))
            color = shades[sizes.index(p)] if ddp else "0.5"
            label = (f"{studies[i]['name']} · " if st.multi else "") + (
                f"p={p} ({run['placement_class'].iloc[0]})" if ddp else "p=1 non-DDP")
            ax.plot(run["elapsed_s"], run["train_loss"], color=color, ls="-" if ddp else "--", lw=1.3, alpha=0.85,
                    label=label)
        for i, s in enumerate(studies):
            strong = s["tables"].get("strong")
            tgt = strong[strong["model"] == model]["target_loss"].dropna() if strong is not None and \
                "target_loss" in strong else []
            if len(tgt):
                ax.axhline(float(tgt.iloc[0]), color=st.color(i) if st.multi else "tab:red", lw=1, ls="-.",
                           label=f"{studies[i]['name'] + ' · ' if st.multi else ''}target {float(tgt.iloc[0]):.3g}")
        kit.plain_log_y(ax)
        ax.set_xlabel("training time (s, start-up excluded)")
        ax.set_ylabel("training loss (MSE, mean over ranks)")
        ax.set_title(model)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    kit.legend_below(fig, list(axes.flat)[:len(models)])
    return {"loss_curves": {"file": kit.save(fig, folder, "loss_curves"), "title": TITLES["loss_curves"],
                            "caption": "Strong scaling: global mean training loss over the last window of steps "
                                       "against training time since the first step, one line per repeat; dashed grey: "
                                       "the non-DDP baseline; dash-dotted: the target loss of the time-to-target column."}}


def plot_weak(studies: list[dict], st: kit.Styles, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = _studies_with(studies, "weak", "samples_per_s_per_rank_mean")
    if not have:
        why = "no weak-scaling point measured (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("weak_throughput", "weak_efficiency")}
    check = comparable("weak", studies[0]["tables"].get("weak"))
    ref = ref if check["comparable"] and ref is not None and len(ref) and have[0][0] == 0 else None
    st = st.within([t for _, t in have])
    out = {}
    fig, ax = kit.figure()
    xs, tops, vals = _measured(ax, st, have, "samples_per_s_per_rank_mean", "samples_per_s_per_rank")
    kit.world_axis(ax, xs)
    cut = _frame(ax, st, have, vals, tops, "samples_per_s_per_rank_ci_hi")
    out["weak_throughput"] = _entry(
        fig, ax, folder, "weak_throughput", "throughput per rank (samples/s)", "Weak scaling: throughput per rank (95% CI)",
        "Samples/s per rank at fixed per-rank batch and samples per rank; ideal weak scaling is flat.", cut)

    fig, ax = kit.figure()
    xs, tops, vals = _measured(ax, st, have, "weak_efficiency", "weak_efficiency", 100)
    if ref is not None:
        base = ref.loc[ref["gpus"].idxmin(), "samples_per_s_per_gpu"]
        ax.plot(ref["gpus"], 100 * ref["samples_per_s_per_gpu"] / base, **{**REF_STYLE, "label": overlay_label(check)})
        xs += list(ref["gpus"])
    ax.axhline(100, color="k", lw=1, ls="--", label="ideal (100%)")
    kit.world_axis(ax, xs)
    cut = _frame(ax, st, have, vals, tops, "weak_efficiency_ci_hi", 100, at_least=110)
    out["weak_efficiency"] = _entry(
        fig, ax, folder, "weak_efficiency", "weak efficiency vs DDP baseline (%)", "Weak scaling: efficiency (95% CI)",
        "Per-rank throughput relative to the DDP baseline (100% there by definition, no interval). "
        + overlay_note("weak", check), cut)
    return out


def _bars(ax, st: kit.Styles, have, configs: list[tuple], y: str, lo: str, hi: str) -> tuple[list, list]:
    """Grouped bars: one group per placement, one bar per study (mean with its 95% CI); returns the
    values and (x, interval top, colour) per bar."""
    width = 0.8 / max(len(have), 1)
    vals, tops = [], []
    for j, (i, t) in enumerate(have):
        for k, cfg in enumerate(configs):
            r = t[(t["world_size"] == cfg[0]) & (t["nodes"] == cfg[1]) & (t["gpus_per_node"] == cfg[2])]
            if r.empty:
                continue
            r = r.iloc[0]
            x = k + (j - (len(have) - 1) / 2) * width
            ax.bar(x, r[y], width=width * 0.95, color=st.color(i, r["placement_class"]),
                   yerr=kit.errors([r[y]], [r[lo]], [r[hi]]), capsize=4, ecolor="0.15",
                   label=st.studies[i] if st.multi else "_")  # one study: the colours mean placements
            vals.append(r[y])
            tops.append((x, r[hi], st.color(i, r["placement_class"])))
    return vals, tops


def plot_comm(studies: list[dict], st: kit.Styles, folder: Path, share_pct: float) -> dict:
    have = _studies_with(studies, "comm", "exposed_comm_pct_mean")
    if not have:
        why = "no communication point measured (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("comm_exposed", "comm_throughput")}
    configs = sorted({(int(r.world_size), int(r.nodes), int(r.gpus_per_node), r.placement_class)
                      for _, t in have for r in t.itertuples()})
    st = st.within([t for _, t in have])
    ticks = [f"p={p}\n{n}x{g}\n{'simulated' if c == SIMULATED else c.split('-')[0]}" for p, n, g, c in configs]
    colors = "Colours: studies." if st.multi else (f"Colours: placement class; \"{SIMULATED}\" = several 'nodes' "
                                                   f"whose ranks all ran on one host (no network between them).")
    out = {}
    for name, y, lo, hi, ylabel, title, floor in (
            ("comm_exposed", "exposed_comm_pct_mean", "exposed_comm_pct_ci_lo", "exposed_comm_pct_ci_hi",
             "exposed communication (% of step)", "Exposed communication (mean, 95% CI)", None),
            ("comm_throughput", "samples_per_s_mean", "samples_per_s_ci_lo", "samples_per_s_ci_hi",
             "throughput, all ranks (samples/s)", "Throughput by placement (mean, 95% CI)", 0.0)):
        fig, ax = kit.figure()
        vals, tops = _bars(ax, st, have, configs, y, lo, hi)
        extra = []
        if name == "comm_exposed":
            ax.axhline(share_pct, **kit.THRESHOLD, label=f"threshold {share_pct:g}%")
            extra = [share_pct]
        lows = [v for _, t in have for v in t[lo].dropna()]
        # exposed communication is noise around 0 where DDP hides it all: then the axis goes below 0
        negative = floor is None and min(vals + lows) < 0
        top = kit.limits(ax, vals + extra, [h for _, h, _ in tops], lows=lows, floor=None if negative else 0.0)
        cut = any([kit.mark_cut(ax, [x], [h], top, c) for x, h, c in tops])
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(ticks, fontsize=9)
        ax.set_xlabel("placement (world size, nodes x ranks per node)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(axis="x", visible=False)
        present = [c for c in (INTRA, INTER, SIMULATED) if c in {cfg[3] for cfg in configs}]
        kit.legend_below(fig, ax, extra=[] if st.multi else [Patch(color=kit.PLACEMENT_COLORS[c], label=c)
                                                              for c in present])
        cap = ("Exposed communication = median synced step − median no_sync step (interleaved in one run), as % "
               "of the synced step; bars: mean over repeats, whiskers: its 95% CI. " if name == "comm_exposed" else
               "Throughput of the same points, all ranks together; bars: mean over repeats, whiskers: 95% CI. ")
        out[name] = {"file": kit.save(fig, folder, name), "title": TITLES[name],
                     "caption": cap + colors + (" " + kit.CUT_NOTE if cut else "")}
    return out


def plot_allreduce(studies: list[dict], st: kit.Styles, folder: Path) -> dict:
    """Bus bandwidth and time of one all_reduce vs buffer size per topology, with the fitted ring model."""
    have = [(i, s["tables"].get("allreduce_sizes")) for i, s in enumerate(studies)]
    have = [(i, t) for i, t in have if t is not None and not t.empty]
    if not have:
        why = "no all-reduce sweep measured (allreduce.csv is empty)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("allreduce_busbw", "allreduce_time")}
    fig_bw, a1 = kit.figure()
    fig_t, a2 = kit.figure()
    sizes = []
    for i, t in have:
        fitted = {}
        for m in ((studies[i]["tables"].get("model") or {}).get("models") or {}).values():
            for cls, e in (m.get("placements") or {}).items():
                if "comm" in e and "sweep" in e["comm"].get("source", ""):
                    fitted[cls] = (e["comm"]["alpha_s"]["value"], e["comm"]["beta_s_per_byte"]["value"])
        for (cls, n, g, p), d in t.groupby(["placement_class", "nodes", "gpus_per_node", "world_size"]):
            d = d.sort_values("size_bytes")
            color, marker = st.color(i, cls), st.marker(None, cls)
            label = st.label(i, None, f"{int(n)}x{int(g)} {cls}")
            a1.plot(d["size_bytes"], d["busbw_gbps"], marker=marker, color=color, label=label)
            us = 1e6 * d["time_s_mean"]
            a2.errorbar(d["size_bytes"], us, yerr=kit.errors(us, 1e6 * d["time_s_ci_lo"], 1e6 * d["time_s_ci_hi"]),
                        marker=marker, capsize=3, color=color, ls="none", label=label)
            sizes += list(d["size_bytes"])
            if cls in fitted:
                alpha, beta = fitted[cls]
                sz = d["size_bytes"].to_numpy(float)
                a2.plot(sz, 1e6 * (2 * (p - 1) * alpha + 2 * (p - 1) / p * sz * beta), ls="--", color=color, lw=1,
                        label=f"model {st.label(i, None, cls)}: α={alpha * 1e6:.3g} µs, 1/β={1 / beta / 1e9:.3g} GB/s"
                        if beta > 0 else f"model {st.label(i, None, cls)}")
    for fig, ax in ((fig_bw, a1), (fig_t, a2)):
        kit.bytes_axis(ax, sizes)
        kit.legend_below(fig, ax)
    a1.set_ylim(bottom=0)
    a1.set_ylabel("bus bandwidth (GB/s)")
    a1.set_title("busbw = size ÷ time × 2(p − 1)/p")
    kit.plain_log_y(a2)
    a2.set_ylabel("time of one all-reduce (µs)")
    a2.set_title("All-reduce time (95% CI over repeats)")
    base = "float32 all_reduce of each buffer size, median over iterations on the slowest rank, mean over repeats. "
    return {"allreduce_busbw": {"file": kit.save(fig_bw, folder, "allreduce_busbw"), "title": TITLES["allreduce_busbw"],
                                "caption": base + "Bus bandwidth is comparable across world sizes (the bytes each "
                                                  "rank's link carries in a ring all-reduce)."},
            "allreduce_time": {"file": kit.save(fig_t, folder, "allreduce_time"), "title": TITLES["allreduce_time"],
                               "caption": base + "Dashed: the fitted ring model 2(p − 1)·α + 2(p − 1)/p·n·β (a model)."}}


def plot_model_size(studies: list[dict], st: kit.Styles, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = _studies_with(studies, "model_size", "peak_mem_gib_mean")
    have = [(i, t[t["num_params"].notna()]) for i, t in have if "num_params" in t]
    have = [(i, t) for i, t in have if not t.empty]
    if not have:
        why = "no model-size point measured (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("model_size_memory", "model_size_throughput")}
    check = comparable("model_size", studies[0]["tables"].get("model_size"))
    ref = ref if check["comparable"] and ref is not None and len(ref) and have[0][0] == 0 else None
    kinds = sorted({k for _, t in have for k in t.get("mem_kind", pd.Series(dtype=str)).dropna()})
    kind = "; ".join(kit.MEM_KINDS.get(k, k) for k in kinds) or "peak"
    out = {}
    for name, y, lo, hi, ylabel, title in (
            ("model_size_memory", "peak_mem_gib_mean", "peak_mem_gib_ci_lo", "peak_mem_gib_ci_hi",
             "peak memory (GiB)", f"Peak memory ({kind})"),
            ("model_size_throughput", "samples_per_s_per_rank_mean", "samples_per_s_per_rank_ci_lo",
             "samples_per_s_per_rank_ci_hi", "throughput per rank (samples/s)", "Throughput per rank vs parameters")):
        fig, ax = kit.figure()
        vals, tops, params = [], [], []
        for i, t in have:
            t = t.sort_values("num_params")
            mid = t[y]
            ax.errorbar(t["num_params"], mid, yerr=kit.errors(mid, t[lo], t[hi]), marker="o", capsize=4,
                        color=st.color(i, INTRA), label=st.label(i) if st.multi else "measured")
            for _, r in t.iterrows():
                ax.annotate(f"w={int(r['hidden_width'])}", (r["num_params"], r[y]), fontsize=8, xytext=(4, 4),
                            textcoords="offset points")
            vals, tops, params = vals + list(mid), tops + list(t[hi]), params + list(t["num_params"])
        if ref is not None:
            ry = ref["peak_mem_gb"] * 1e9 / GIB if name == "model_size_memory" else ref["samples_per_s_per_gpu"]
            ax.plot(ref["params"], ry, **{**REF_STYLE, "label": overlay_label(check)})
            vals, params = vals + list(ry), params + list(ref["params"])
        top = kit.limits(ax, vals, tops)
        cut = any([kit.mark_cut(ax, t["num_params"], t[hi], top, st.color(i, INTRA)) for i, t in have])
        span = max(params) - min(params)
        ax.set_xlim(min(params) - 0.08 * span - 1, max(params) + 0.15 * span + 1)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_xlabel("parameters")
        cap = ("Hidden-width sweep at a fixed placement, 95% CI over repeats; w = hidden width. "
               + ("Peak memory: CPU runs report the process's peak RSS (it includes the Python/torch runtime); CUDA "
                  "runs the allocator's peak. " if name == "model_size_memory" else "")
               + overlay_note("model_size", check))
        out[name] = _entry(fig, ax, folder, name, ylabel, title, cap, cut)
    return out


def plot_figures(tables: dict, folder: str | Path, reference: dict | None = None, thresholds: dict | None = None,
                 compare: list[dict] | None = None, study: str | None = None) -> dict:
    """Write every figure into `folder` and its manifest figures.json; returns the manifest. `tables`
    (the current study) may also hold 'loss_curves', 'allreduce_sizes' and 'model' (model.json);
    `compare` = other studies as compare.read_study gives them, drawn next to it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    reference = reference or {}
    thresholds = thresholds or {}
    kit.theme()
    studies = [{"name": study or "this study", "tables": tables}] + list(compare or [])
    models = [m for s in studies for n in ("strong", "weak", "comm", "model_size")
              if s["tables"].get(n) is not None and "model" in s["tables"][n] for m in s["tables"][n]["model"].dropna()]
    st = kit.Styles([s["name"] for s in studies], models)
    steps = [
        (lambda: plot_strong(studies, st, reference.get("strong"), folder,
                             float(thresholds.get("efficiency_threshold", 0.75))), ["strong_speedup", "strong_efficiency"]),
        (lambda: plot_loss_curves(studies, st, folder), ["loss_curves"]),
        (lambda: plot_weak(studies, st, reference.get("weak"), folder), ["weak_throughput", "weak_efficiency"]),
        (lambda: plot_comm(studies, st, folder, float(thresholds.get("comm_share_pct", 20))),
         ["comm_exposed", "comm_throughput"]),
        (lambda: plot_allreduce(studies, st, folder), ["allreduce_busbw", "allreduce_time"]),
        (lambda: plot_model_size(studies, st, reference.get("model_size"), folder),
         ["model_size_memory", "model_size_throughput"]),
        (lambda: plot_ddp(tables, folder), ["ddp_time_to_target", "ddp_loss_curves"]),
    ]
    manifest: dict = {}
    for step, keys in steps:
        try:
            manifest.update(step())
        except (KeyError, ValueError, TypeError) as e:  # a malformed table: say so in the report, don't crash
            plt.close("all")
            for k in keys:
                manifest[k] = {"title": TITLES[k], "missing": f"figure failed: {type(e).__name__}: {e}"}
    tmp = folder / ".figures.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, folder / "figures.json")
    return manifest
