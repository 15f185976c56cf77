"""Figures of the studies (matplotlib Agg + seaborn), written as PNG into one folder with a
manifest `figures.json`: {name: {"file", "title", "caption"}} or {name: {"title", "missing": why}}.
A figure whose data are absent becomes a manifest entry with `missing`, never an exception.

Measurements are markers with 95% CI bars; the performance model's predictions are dashed lines with
their bootstrap band, labelled "model" with their leave-one-world-size-out error. The seed paper's
points are drawn only where the study is comparable (reference.comparable). Series are labelled by
placement class, so ranks that shared one host read "simulated inter-node (one host)".
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from .columns import INTER, INTRA, SIMULATED, SINGLE  # noqa: E402
from .reference import comparable, overlay_label, overlay_note  # noqa: E402

REFERENCE_LABEL = "seed paper (A100, pykan)"
REF_STYLE = {"color": "0.45", "marker": "s", "linestyle": ":", "markersize": 6, "label": REFERENCE_LABEL}
PLACEMENT_COLORS = {SINGLE: "0.2", INTRA: sns.color_palette("deep")[0], INTER: sns.color_palette("deep")[3],
                    SIMULATED: sns.color_palette("deep")[1]}
GIB = 2**30
DPI = 110


def load_reference(folder: str | Path | None) -> dict[str, pd.DataFrame]:
    """The seed paper's per-point CSVs (strong, weak, comm, model_size); {} when none is asked for."""
    if not folder:
        return {}
    out = {}
    for name in ("strong", "weak", "comm", "model_size"):
        path = Path(folder) / f"{name}.csv"
        if path.exists():
            out[name] = pd.read_csv(path)
    return out


def _err(t: pd.DataFrame, mid: str, lo: str, hi: str, positive: bool = False):
    """Asymmetric error bars from CI columns (0 where the CI is unknown: a single repeat). With
    `positive` (log axes, quantities that cannot be negative) the bar stops above zero."""
    lower = (t[mid] - t[lo]).fillna(0).clip(lower=0)
    upper = (t[hi] - t[mid]).fillna(0).clip(lower=0)
    if positive:
        lower = pd.concat([lower, 0.95 * t[mid]], axis=1).min(axis=1)
    return [lower.to_numpy(), upper.to_numpy()]


def _clip_y(ax, values, floor=0.0, headroom=1.6, minimum=None):
    """Keep the axis on the data: a wide CI (few noisy repeats) is cut at the frame instead of
    squashing the points; the table shows the full interval."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return
    top = max(vals) * headroom
    if minimum is not None:
        top = max(top, minimum)
    ax.set_ylim(floor, top)


def _series(ax, t: pd.DataFrame, x: str, y: str, lo: str | None, hi: str | None,
            label_by=("model", "placement_class"), positive: bool = True):
    palette = sns.color_palette("deep")
    for i, (key, g) in enumerate(t.groupby(list(label_by), sort=True)):
        g = g.sort_values(x)
        label = " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
        yerr = _err(g, y, lo, hi, positive) if lo and hi else None
        ax.errorbar(g[x], g[y], yerr=yerr, marker="o", capsize=4, color=palette[i % len(palette)], label=label)


def _world_axis(ax, values):
    vals = sorted({int(v) for v in values if not math.isnan(v)})
    if vals:
        ax.set_xscale("log", base=2)
        ax.set_xticks(vals)
        ax.set_xticklabels([str(v) for v in vals])
    ax.set_xlabel("world size (ranks)")


def _save(fig, folder: Path, name: str) -> str:
    fname = f"{name}.png"
    tmp = folder / f".{fname}.tmp"
    fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png")
    plt.close(fig)
    os.replace(tmp, folder / fname)
    return fname


def _ddp(t: pd.DataFrame) -> pd.DataFrame:
    return t[t["ddp"].astype(bool)] if "ddp" in t else t


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


def _draw_model(ax, lines, key: str, scale: float = 1.0) -> list[float]:
    """Dashed model lines with their bootstrap band; returns the x values drawn."""
    xs_all = []
    for _, cls, preds, err in lines:
        xs = [r["world_size"] for r in preds]
        ys = [scale * r[key]["value"] for r in preds]
        color = PLACEMENT_COLORS.get(cls, "0.5")
        ax.plot(xs, ys, ls="--", lw=1.2, color=color, label=f"model {cls} ({err})")
        lo = [scale * r[key]["lo"] if r[key]["lo"] is not None else None for r in preds]
        hi = [scale * r[key]["hi"] if r[key]["hi"] is not None else None for r in preds]
        if all(v is not None for v in lo + hi):
            ax.fill_between(xs, lo, hi, color=color, alpha=0.12, lw=0)
        xs_all += xs
    return xs_all


def plot_strong(t: pd.DataFrame, ref: pd.DataFrame | None, folder: Path, threshold: float,
                model_json: dict | None = None) -> dict:
    have = _ddp(t[t["speedup"].notna()]) if len(t) else t
    out = {}
    if have.empty or have["world_size"].nunique() < 2:
        why = "no strong-scaling points measured at two or more world sizes (status ok)"
        return {"strong_speedup": {"title": "Strong scaling: speedup", "missing": why},
                "strong_efficiency": {"title": "Strong scaling: efficiency", "missing": why}}
    check = comparable("strong", t)
    ref = ref if check["comparable"] else None
    ref_style = {**REF_STYLE, "label": overlay_label(check) if ref is not None else REFERENCE_LABEL}
    lines = model_lines(model_json)
    xs = list(have["world_size"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _series(ax, have, "world_size", "speedup", "speedup_ci_lo", "speedup_ci_hi")
    base = have["baseline_world_size"].min()
    drawn = _draw_model(ax, lines, "speedup")
    grid = sorted(set(xs) | set(drawn) | (set(ref["gpus"]) if ref is not None else set()))
    ax.plot(grid, [p / base for p in grid], color="k", lw=1, ls=":", label="ideal (linear)")
    if ref is not None:
        ax.plot(ref["gpus"], ref["speedup"], **ref_style)
    _world_axis(ax, grid)
    ax.set_yscale("log", base=2)
    ymax = max([p / base for p in grid] + list(have["speedup"]) + (list(ref["speedup"]) if ref is not None else []))
    ax.set_ylim(min(0.5, 0.8 * have["speedup"].min()), 1.5 * ymax)
    ax.set_ylabel(f"speedup vs {int(base)} DDP rank(s)")
    ax.set_title("Strong scaling: speedup (95% CI over repeats)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    model_cap = (" Dashed: the performance model's prediction (a model, not a measurement) with its bootstrap band "
                 "and its leave-one-world-size-out error." if lines else "")
    ref_cap = " " + overlay_note("strong", check)
    out["strong_speedup"] = {"file": _save(fig, folder, "strong_speedup"), "title": "Strong scaling: speedup",
                             "caption": "Speedup = samples/s at p ranks over samples/s at the DDP baseline; dotted: "
                                        "ideal linear speedup." + model_cap + ref_cap}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    eff = have.assign(efficiency_pct_lo=100 * have["efficiency_ci_lo"], efficiency_pct_hi=100 * have["efficiency_ci_hi"])
    _series(ax, eff, "world_size", "efficiency_pct", "efficiency_pct_lo", "efficiency_pct_hi")
    _draw_model(ax, lines, "efficiency", 100)
    ax.axhline(100 * threshold, color="tab:red", lw=1, ls="-.", label=f"threshold {threshold:.0%}")
    if ref is not None:
        ax.plot(ref["gpus"], ref["efficiency_pct"], **ref_style)
    _world_axis(ax, grid)
    ax.set_ylabel("parallel efficiency (%)")
    _clip_y(ax, list(eff["efficiency_pct"]), headroom=1.25, minimum=115)
    ax.set_title("Strong scaling: efficiency")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    out["strong_efficiency"] = {"file": _save(fig, folder, "strong_efficiency"), "title": "Strong scaling: efficiency",
                                "caption": "Efficiency = speedup / (p / p_base) against the DDP baseline; red: the "
                                           "configured threshold." + model_cap + ref_cap}
    return out


def plot_loss_curves(curves: pd.DataFrame | None, strong: pd.DataFrame) -> tuple:
    """Training loss vs training time per world size (strong experiment), one panel per model, with
    the target loss of the time-to-target column."""
    c = curves[curves["experiment"] == "strong"] if curves is not None and len(curves) else pd.DataFrame()
    if c.empty:
        return None, "no loss curve recorded for the strong experiment (loss_curves.csv is empty)"
    models = sorted(c["model"].unique())
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.2), squeeze=False)
    sizes = sorted(int(p) for p in c["world_size"].unique())
    palette = dict(zip(sizes, sns.color_palette("viridis", len(sizes))))
    for ax, model in zip(axes[0], models):
        g = c[c["model"] == model]
        seen = set()
        for _, run in g.groupby(["point_id", "rep"]):
            run = run.sort_values("step")
            p, ddp = int(run["world_size"].iloc[0]), bool(run["ddp"].iloc[0])
            label = f"p={p} ({run['placement_class'].iloc[0]})" if ddp else "p=1 non-DDP"
            ax.plot(run["elapsed_s"], run["train_loss"], color=palette[p] if ddp else "0.5", ls="-" if ddp else "--",
                    lw=1.2, alpha=0.85, label=None if label in seen else label)
            seen.add(label)
        tgt = strong[(strong["model"] == model)]["target_loss"].dropna() if "target_loss" in strong else []
        if len(tgt):
            ax.axhline(float(tgt.iloc[0]), color="tab:red", lw=1, ls="-.", label=f"target {float(tgt.iloc[0]):.3g}")
        ax.set_yscale("log")
        ax.set_xlabel("training time (s, start-up excluded)")
        ax.set_ylabel("training loss (global mean)")
        ax.set_title(model, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return fig, None


def plot_weak(t: pd.DataFrame, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = _ddp(t[t["samples_per_s_per_rank_mean"].notna()]) if len(t) else t
    if have.empty:
        return {"weak": {"title": "Weak scaling", "missing": "no weak-scaling point measured (status ok)"}}
    check = comparable("weak", t)
    ref = ref if check["comparable"] else None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    _series(a1, have, "world_size", "samples_per_s_per_rank_mean", "samples_per_s_per_rank_ci_lo",
            "samples_per_s_per_rank_ci_hi")
    _world_axis(a1, have["world_size"])
    a1.set_ylabel("samples/s per rank")
    _clip_y(a1, have["samples_per_s_per_rank_mean"])
    a1.set_title("Weak scaling: per-rank throughput")
    a1.legend(fontsize=7)
    a1.grid(alpha=0.3)
    eff = have.dropna(subset=["weak_efficiency_pct"])
    eff = eff.assign(lo=100 * eff["weak_efficiency_ci_lo"], hi=100 * eff["weak_efficiency_ci_hi"])
    _series(a2, eff, "world_size", "weak_efficiency_pct", "lo", "hi")
    grid = set(have["world_size"])
    if ref is not None and len(ref):
        base = ref.loc[ref["gpus"].idxmin(), "samples_per_s_per_gpu"]
        a2.plot(ref["gpus"], 100 * ref["samples_per_s_per_gpu"] / base, **{**REF_STYLE, "label": overlay_label(check)})
        grid |= set(ref["gpus"])
    a2.axhline(100, color="k", lw=1, ls="--", label="ideal")
    _world_axis(a2, grid)
    a2.set_ylabel("weak efficiency (%)")
    _clip_y(a2, have["weak_efficiency_pct"], headroom=1.25, minimum=115)
    a2.set_title("Weak scaling: efficiency vs the DDP baseline")
    a2.legend(fontsize=7)
    a2.grid(alpha=0.3)
    cap = ("Axes are cut at the frame when a CI is very wide; the tables give the full intervals. "
           "Left: samples/s per rank at fixed per-rank batch and samples per rank (95% CI over repeats). Right: "
           "per-rank throughput relative to the DDP baseline. " + overlay_note("weak", check))
    return {"weak": {"file": _save(fig, folder, "weak"), "title": "Weak scaling", "caption": cap}}


def plot_comm(t: pd.DataFrame, folder: Path, share_pct: float) -> dict:
    have = _ddp(t[t["exposed_comm_pct_median"].notna()]) if len(t) else t
    if have.empty:
        return {"comm": {"title": "Communication overhead", "missing": "no communication point measured (status ok)"}}
    d = have.assign(config=[f"p={int(p)} ({int(n)}x{int(g)})" for p, n, g in
                            zip(have["world_size"], have["nodes"], have["gpus_per_node"])])
    d = d.sort_values(["world_size", "nodes"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    colors = [PLACEMENT_COLORS.get(c, "grey") for c in d["placement_class"]]
    xs = range(len(d))
    a1.bar(xs, d["exposed_comm_pct_median"], color=colors,
           yerr=_err(d, "exposed_comm_pct_mean", "exposed_comm_pct_ci_lo", "exposed_comm_pct_ci_hi"), capsize=4)
    a1.axhline(share_pct, color="tab:red", lw=1, ls="--")
    _clip_y(a1, list(d["exposed_comm_pct_median"]) + [share_pct], floor=min(0.0, d["exposed_comm_pct_median"].min() * 1.2))
    a1.set_xticks(list(xs))
    a1.set_xticklabels(d["config"], rotation=20, fontsize=8)
    a1.set_ylabel("exposed communication (% of step)")
    a1.set_title("Exposed communication by placement")
    present = [c for c in (INTRA, INTER, SIMULATED) if c in set(d["placement_class"])]
    a1.legend(handles=[Patch(color=PLACEMENT_COLORS[c], label=c) for c in present]
              + [Line2D([], [], color="tab:red", ls="--", label=f"threshold {share_pct:g}%")], fontsize=7)
    a1.grid(alpha=0.3, axis="y")
    a2.bar(xs, d["samples_per_s_mean"], color=colors,
           yerr=_err(d, "samples_per_s_mean", "samples_per_s_ci_lo", "samples_per_s_ci_hi"), capsize=4)
    a2.set_xticks(list(xs))
    a2.set_xticklabels(d["config"], rotation=20, fontsize=8)
    a2.set_ylabel("samples/s (all ranks)")
    _clip_y(a2, d["samples_per_s_mean"])
    a2.set_title("Throughput by placement")
    a2.grid(alpha=0.3, axis="y")
    cap = ("Exposed communication = median synced step − median no_sync step (interleaved in one run), as % of "
           "the synced step; bars: median over repeats, whiskers: 95% CI of the mean. Colours: placement class; "
           f"\"{SIMULATED}\" = several 'nodes' whose ranks all ran on one host (no network between them).")
    return {"comm": {"file": _save(fig, folder, "comm"), "title": "Communication overhead", "caption": cap}}


def plot_allreduce(t: pd.DataFrame | None, model_json: dict | None, folder: Path) -> dict:
    """Bus bandwidth and time of one all_reduce vs buffer size per topology, with the fitted ring model."""
    title = "All-reduce sweep"
    if t is None or t.empty:
        return {"allreduce": {"title": title, "missing": "no all-reduce sweep measured (allreduce.csv is empty)"}}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    fitted = {}
    for m in ((model_json or {}).get("models") or {}).values():
        for cls, e in (m.get("placements") or {}).items():
            if "comm" in e and "sweep" in e["comm"].get("source", ""):
                fitted[cls] = (e["comm"]["alpha_s"]["value"], e["comm"]["beta_s_per_byte"]["value"])
    for (cls, n, g, p), d in t.groupby(["placement_class", "nodes", "gpus_per_node", "world_size"]):
        d = d.sort_values("size_bytes")
        color = PLACEMENT_COLORS.get(cls, "grey")
        label = f"{int(n)}x{int(g)} {cls}"
        a1.plot(d["size_bytes"], d["busbw_gbps"], marker="o", color=color, label=label)
        a2.errorbar(d["size_bytes"], d["time_s_mean"], yerr=_err(d, "time_s_mean", "time_s_ci_lo", "time_s_ci_hi", True),
                    marker="o", capsize=3, color=color, ls="none", label=label)
        if cls in fitted:
            alpha, beta = fitted[cls]
            sz = d["size_bytes"].to_numpy(float)
            a2.plot(sz, 2 * (p - 1) * alpha + 2 * (p - 1) / p * sz * beta, ls="--", color=color, lw=1,
                    label=f"model α={alpha * 1e6:.3g} µs, 1/β={1 / beta / 1e9:.3g} GB/s" if beta > 0 else "model")
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("buffer size (bytes)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    a1.set_ylabel("bus bandwidth (GB/s)")
    a1.set_title("busbw = size / time × 2(p − 1)/p")
    a2.set_yscale("log")
    a2.set_ylabel("time of one all_reduce (s)")
    a2.set_title("time, 95% CI over repeats; dashed: ring model")
    cap = ("float32 all_reduce of each buffer size, median over iterations on the slowest rank, mean over repeats. "
           "Dashed: the fitted ring model 2(p − 1)·α + 2(p − 1)/p·n·β (a model).")
    return {"allreduce": {"file": _save(fig, folder, "allreduce"), "title": title, "caption": cap}}


def plot_model_size(t: pd.DataFrame, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = t[t["peak_mem_gib_mean"].notna() & t["num_params"].notna()] if len(t) else t
    if have.empty:
        return {"model_size": {"title": "Model size", "missing": "no model-size point measured (status ok)"}}
    check = comparable("model_size", t)
    ref = ref if check["comparable"] else None
    ref_style = {**REF_STYLE, "label": overlay_label(check)}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    h = have.assign(label="measured")
    _series(a1, h, "num_params", "peak_mem_gib_mean", "peak_mem_gib_ci_lo", "peak_mem_gib_ci_hi", label_by=("label",))
    _series(a2, h, "num_params", "samples_per_s_per_rank_mean", "samples_per_s_per_rank_ci_lo",
            "samples_per_s_per_rank_ci_hi", label_by=("label",))
    for _, r in have.iterrows():
        a1.annotate(f"w={int(r['hidden_width'])}", (r["num_params"], r["peak_mem_gib_mean"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    if ref is not None and len(ref):
        a1.plot(ref["params"], ref["peak_mem_gb"] * 1e9 / GIB, **ref_style)
        a2.plot(ref["params"], ref["samples_per_s_per_gpu"], **ref_style)
    kind = have["mem_kind"].dropna().iloc[0] if "mem_kind" in have and have["mem_kind"].notna().any() else "peak"
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("parameters")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _clip_y(a1, list(have["peak_mem_gib_mean"]) + (list(ref["peak_mem_gb"] * 1e9 / GIB) if ref is not None else []),
            headroom=1.3)
    a1.set_ylabel(f"peak memory (GiB, {kind})")
    a1.set_title("Peak memory vs parameters")
    a2.set_yscale("log")
    a2.set_ylabel("samples/s per rank")
    a2.set_title("Per-rank throughput vs parameters")
    cap = ("Hidden-width sweep: peak memory (CPU: process peak RSS; CUDA: allocator peak) and per-rank throughput "
           "against the parameter count, 95% CI over repeats. " + overlay_note("model_size", check))
    return {"model_size": {"file": _save(fig, folder, "model_size"), "title": "Model size", "caption": cap}}


def _loss_figure(tables: dict, folder: Path) -> dict:
    title = "Training loss vs training time"
    fig, why = plot_loss_curves(tables.get("loss_curves"), tables.get("strong", pd.DataFrame()))
    if fig is None:
        return {"loss_curves": {"title": title, "missing": why}}
    return {"loss_curves": {"file": _save(fig, folder, "loss_curves"), "title": title,
                            "caption": "Strong scaling: global mean training loss over the last window of steps "
                                       "against training time since the first step, one line per repeat; dashed grey: "
                                       "the non-DDP baseline; red: the target loss of the time-to-target column."}}


FIGURES = ("strong_speedup", "strong_efficiency", "loss_curves", "weak", "comm", "allreduce", "model_size")


def plot_figures(tables: dict, folder: str | Path, reference: dict | None = None, thresholds: dict | None = None) -> dict:
    """Write every figure into `folder` and its manifest figures.json; returns the manifest. `tables`
    may also hold 'loss_curves' (loss_curves.csv), 'allreduce_sizes' and 'model' (model.json)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    reference = reference or {}
    thresholds = thresholds or {}
    sns.set_theme(style="whitegrid", context="notebook")
    empty = pd.DataFrame()
    model = tables.get("model")
    manifest: dict = {}
    steps = [
        (lambda: plot_strong(tables.get("strong", empty), reference.get("strong"), folder,
                             float(thresholds.get("efficiency_threshold", 0.75)), model),
         ["strong_speedup", "strong_efficiency"]),
        (lambda: _loss_figure(tables, folder), ["loss_curves"]),
        (lambda: plot_weak(tables.get("weak", empty), reference.get("weak"), folder), ["weak"]),
        (lambda: plot_comm(tables.get("comm", empty), folder, float(thresholds.get("comm_share_pct", 20))), ["comm"]),
        (lambda: plot_allreduce(tables.get("allreduce_sizes"), model, folder), ["allreduce"]),
        (lambda: plot_model_size(tables.get("model_size", empty), reference.get("model_size"), folder), ["model_size"]),
    ]
    for step, keys in steps:
        try:
            manifest.update(step())
        except (KeyError, ValueError, TypeError) as e:  # a malformed table: say so in the report, don't crash
            plt.close("all")
            for k in keys:
                manifest[k] = {"title": k.replace("_", " "), "missing": f"figure failed: {type(e).__name__}: {e}"}
    tmp = folder / ".figures.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, folder / "figures.json")
    return manifest
