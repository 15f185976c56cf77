"""Figures of the four studies (matplotlib Agg + seaborn), written as PNG into one folder with a
manifest `figures.json`: {name: {"file", "title", "caption"}} or {name: {"title", "missing": why}}.
A figure whose data are absent becomes a manifest entry with `missing`, never an exception.
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
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

REFERENCE_LABEL = "seed paper (A100, pykan)"
REF_STYLE = {"color": "0.45", "marker": "s", "linestyle": ":", "markersize": 6, "label": REFERENCE_LABEL}
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


def _series(ax, t: pd.DataFrame, x: str, y: str, lo: str | None, hi: str | None, label_by=("model", "placement"),
            positive: bool = True):
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


def plot_strong(t: pd.DataFrame, ref: pd.DataFrame | None, folder: Path, threshold: float) -> dict:
    have = t[t["speedup"].notna()] if len(t) else t
    out = {}
    if have.empty or have["world_size"].nunique() < 2:
        why = "no strong-scaling points measured at two or more world sizes (status ok)"
        return {"strong_speedup": {"title": "Strong scaling: speedup", "missing": why},
                "strong_efficiency": {"title": "Strong scaling: efficiency", "missing": why}}
    xs = list(have["world_size"])
    fig, ax = plt.subplots(figsize=(6, 4))
    _series(ax, have, "world_size", "speedup", "speedup_ci_lo", "speedup_ci_hi")
    base = have["baseline_world_size"].min()
    grid = sorted(set(xs) | (set(ref["gpus"]) if ref is not None else set()))
    ax.plot(grid, [p / base for p in grid], color="k", lw=1, ls="--", label="ideal (linear)")
    if ref is not None:
        ax.plot(ref["gpus"], ref["speedup"], **REF_STYLE)
    _world_axis(ax, grid)
    ax.set_yscale("log", base=2)
    ymax = max([p / base for p in grid] + list(have["speedup"]) + (list(ref["speedup"]) if ref is not None else []))
    ax.set_ylim(min(0.5, 0.8 * have["speedup"].min()), 1.5 * ymax)
    ax.set_ylabel(f"speedup vs {int(base)} rank(s)")
    ax.set_title("Strong scaling: speedup (95% CI over repeats)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    out["strong_speedup"] = {"file": _save(fig, folder, "strong_speedup"), "title": "Strong scaling: speedup",
                             "caption": "Speedup = samples/s at p ranks over samples/s at the baseline; dashed: "
                                        "ideal linear speedup." + (f" Grey squares: {REFERENCE_LABEL}." if ref is not None else "")}
    fig, ax = plt.subplots(figsize=(6, 4))
    eff = have.assign(efficiency_pct_lo=100 * have["speedup_ci_lo"] / (have["world_size"] / have["baseline_world_size"]),
                      efficiency_pct_hi=100 * have["speedup_ci_hi"] / (have["world_size"] / have["baseline_world_size"]))
    _series(ax, eff, "world_size", "efficiency_pct", "efficiency_pct_lo", "efficiency_pct_hi")
    ax.axhline(100 * threshold, color="tab:red", lw=1, ls="--", label=f"threshold {threshold:.0%}")
    if ref is not None:
        ax.plot(ref["gpus"], ref["efficiency_pct"], **REF_STYLE)
    _world_axis(ax, grid)
    ax.set_ylabel("parallel efficiency (%)")
    _clip_y(ax, list(eff["efficiency_pct"]), headroom=1.25, minimum=115)
    ax.set_title("Strong scaling: efficiency")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    out["strong_efficiency"] = {"file": _save(fig, folder, "strong_efficiency"), "title": "Strong scaling: efficiency",
                                "caption": "Efficiency = speedup / (p / p_base); red: the configured threshold."}
    return out


def plot_weak(t: pd.DataFrame, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = t[t["samples_per_s_per_rank_mean"].notna()] if len(t) else t
    if have.empty:
        return {"weak": {"title": "Weak scaling", "missing": "no weak-scaling point measured (status ok)"}}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    _series(a1, have, "world_size", "samples_per_s_per_rank_mean", "samples_per_s_per_rank_ci_lo",
            "samples_per_s_per_rank_ci_hi")
    _world_axis(a1, have["world_size"])
    a1.set_ylabel("samples/s per rank")
    _clip_y(a1, have["samples_per_s_per_rank_mean"])
    a1.set_title("Weak scaling: per-rank throughput")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3)
    _series(a2, have.dropna(subset=["weak_efficiency_pct"]), "world_size", "weak_efficiency_pct", None, None)
    grid = set(have["world_size"])
    if ref is not None and len(ref):
        base = ref.loc[ref["gpus"].idxmin(), "samples_per_s_per_gpu"]
        a2.plot(ref["gpus"], 100 * ref["samples_per_s_per_gpu"] / base, **REF_STYLE)
        grid |= set(ref["gpus"])
    a2.axhline(100, color="k", lw=1, ls="--", label="ideal")
    _world_axis(a2, grid)
    a2.set_ylabel("weak efficiency (%)")
    _clip_y(a2, have["weak_efficiency_pct"], headroom=1.25, minimum=115)
    a2.set_title("Weak scaling: efficiency")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    cap = ("Axes are cut at the frame when a CI is very wide; the tables give the full intervals. "
           "Left: samples/s per rank at fixed per-rank batch and samples per rank (95% CI over repeats). Right: "
           "per-rank throughput relative to the smallest world size.")
    if ref is not None:
        cap += f" Grey squares: {REFERENCE_LABEL}, relative to its 1 GPU."
    return {"weak": {"file": _save(fig, folder, "weak"), "title": "Weak scaling", "caption": cap}}


def plot_comm(t: pd.DataFrame, folder: Path, share_pct: float) -> dict:
    have = t[t["exposed_comm_pct_median"].notna()] if len(t) else t
    if have.empty:
        return {"comm": {"title": "Communication overhead", "missing": "no communication point measured (status ok)"}}
    d = have.assign(config=[f"p={int(p)} ({int(n)}x{int(g)})" for p, n, g in
                            zip(have["world_size"], have["nodes"], have["gpus_per_node"])])
    d = d.sort_values(["world_size", "nodes"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    colors = {"intra": sns.color_palette("deep")[0], "inter": sns.color_palette("deep")[3]}
    xs = range(len(d))
    a1.bar(xs, d["exposed_comm_pct_median"], color=[colors.get(p, "grey") for p in d["placement"]],
           yerr=_err(d, "exposed_comm_pct_mean", "exposed_comm_pct_ci_lo", "exposed_comm_pct_ci_hi"), capsize=4)
    a1.axhline(share_pct, color="tab:red", lw=1, ls="--")
    _clip_y(a1, list(d["exposed_comm_pct_median"]) + [share_pct], floor=min(0.0, d["exposed_comm_pct_median"].min() * 1.2))
    a1.set_xticks(list(xs))
    a1.set_xticklabels(d["config"], rotation=20, fontsize=8)
    a1.set_ylabel("exposed communication (% of step)")
    a1.set_title("Exposed communication by placement")
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    a1.legend(handles=[Patch(color=colors["intra"], label="intra-node"), Patch(color=colors["inter"], label="inter-node"),
                       Line2D([], [], color="tab:red", ls="--", label=f"threshold {share_pct:g}%")], fontsize=8)
    a1.grid(alpha=0.3, axis="y")
    a2.bar(xs, d["samples_per_s_mean"], color=[colors.get(p, "grey") for p in d["placement"]],
           yerr=_err(d, "samples_per_s_mean", "samples_per_s_ci_lo", "samples_per_s_ci_hi"), capsize=4)
    a2.set_xticks(list(xs))
    a2.set_xticklabels(d["config"], rotation=20, fontsize=8)
    a2.set_ylabel("samples/s (all ranks)")
    _clip_y(a2, d["samples_per_s_mean"])
    a2.set_title("Throughput by placement")
    a2.grid(alpha=0.3, axis="y")
    cap = ("Exposed communication = median synced step − median no_sync step (interleaved in one run), as % of "
           "the synced step; bars: median over repeats, whiskers: 95% CI of the mean. Blue: one node; red: across nodes.")
    return {"comm": {"file": _save(fig, folder, "comm"), "title": "Communication overhead", "caption": cap}}


def plot_model_size(t: pd.DataFrame, ref: pd.DataFrame | None, folder: Path) -> dict:
    have = t[t["peak_mem_gib_mean"].notna() & t["num_params"].notna()] if len(t) else t
    if have.empty:
        return {"model_size": {"title": "Model size", "missing": "no model-size point measured (status ok)"}}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    h = have.assign(label="measured")
    _series(a1, h, "num_params", "peak_mem_gib_mean", "peak_mem_gib_ci_lo", "peak_mem_gib_ci_hi", label_by=("label",))
    _series(a2, h, "num_params", "samples_per_s_per_rank_mean", "samples_per_s_per_rank_ci_lo",
            "samples_per_s_per_rank_ci_hi", label_by=("label",))
    for _, r in have.iterrows():
        a1.annotate(f"w={int(r['hidden_width'])}", (r["num_params"], r["peak_mem_gib_mean"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    if ref is not None and len(ref):
        a1.plot(ref["params"], ref["peak_mem_gb"] * 1e9 / GIB, **REF_STYLE)
        a2.plot(ref["params"], ref["samples_per_s_per_gpu"], **REF_STYLE)
    kind = have["mem_kind"].dropna().iloc[0] if "mem_kind" in have and have["mem_kind"].notna().any() else "peak"
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("parameters")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _clip_y(a1, list(have["peak_mem_gib_mean"]) + (list(ref["peak_mem_gb"] * 1e9 / GIB) if ref is not None else []),
            headroom=1.3)
    a1.set_ylabel(f"peak memory (GiB, {kind})")
    a1.set_title("Peak memory vs parameters")
    a2.set_yscale("log")
    a2.set_ylabel("samples/s per rank")
    a2.set_title("Per-rank throughput vs parameters")
    cap = ("Hidden-width sweep: peak memory (CPU: process peak RSS; CUDA: allocator peak) and per-rank throughput "
           "against the parameter count, 95% CI over repeats.")
    if ref is not None:
        cap += f" Grey squares: {REFERENCE_LABEL} (2 nodes x 2 GPUs)."
    return {"model_size": {"file": _save(fig, folder, "model_size"), "title": "Model size", "caption": cap}}


def plot_figures(tables: dict, folder: str | Path, reference: dict | None = None, thresholds: dict | None = None) -> dict:
    """Write every figure into `folder` and its manifest figures.json; returns the manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    reference = reference or {}
    thresholds = thresholds or {}
    sns.set_theme(style="whitegrid", context="notebook")
    empty = pd.DataFrame()
    manifest: dict = {}
    steps = [
        lambda: plot_strong(tables.get("strong", empty), reference.get("strong"), folder,
                            float(thresholds.get("efficiency_threshold", 0.75))),
        lambda: plot_weak(tables.get("weak", empty), reference.get("weak"), folder),
        lambda: plot_comm(tables.get("comm", empty), folder, float(thresholds.get("comm_share_pct", 20))),
        lambda: plot_model_size(tables.get("model_size", empty), reference.get("model_size"), folder),
    ]
    names = [["strong_speedup", "strong_efficiency"], ["weak"], ["comm"], ["model_size"]]
    for step, keys in zip(steps, names):
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
