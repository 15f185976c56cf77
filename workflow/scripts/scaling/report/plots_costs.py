"""What a step costs: exposed communication and throughput by placement, the all-reduce sweep with
the fitted ring model, and memory and throughput over the model-size sweep."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from ..common.columns import GIB, INTER, INTRA, SIMULATED, mem_kind_label
from . import plotkit as kit
from .reference import comparable, overlay_label, overlay_note
from .series import REF_STYLE, TITLES, entry, studies_with


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
    have = studies_with(studies, "comm", "exposed_comm_pct_mean")
    if not have:
        why = "no communication point measured (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("comm_exposed", "comm_throughput")}
    configs = sorted({(int(r.world_size), int(r.nodes), int(r.gpus_per_node), r.placement_class)
                      for _, t in have for r in t.itertuples()})
    st = st.within([t for _, t in have])
    ticks = [f"p={p}\n{n}x{g}\n{'simulated' if c == SIMULATED else c.split('-')[0]}" for p, n, g, c in configs]
    drawn = {cfg[3] for cfg in configs}
    # a caption names only what is drawn: the simulated class is explained where it has a bar
    colors = "Colours: studies." if st.multi else (
        "Colours: link class" + (f"; \"{SIMULATED}\" = several 'nodes' whose ranks all ran on one host (no "
                                      "network between them)." if SIMULATED in drawn else "."))
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
    have = studies_with(studies, "model_size", "peak_mem_gib_mean")
    have = [(i, t[t["num_params"].notna()]) for i, t in have if "num_params" in t]
    have = [(i, t) for i, t in have if not t.empty]
    if not have:
        why = "no model-size point measured (status ok)"
        return {k: {"title": TITLES[k], "missing": why} for k in ("model_size_memory", "model_size_throughput")}
    check = comparable("model_size", studies[0]["tables"].get("model_size"))
    ref = ref if check["comparable"] and ref is not None and len(ref) and have[0][0] == 0 else None
    kinds = sorted({k for _, t in have for k in t.get("mem_kind", pd.Series(dtype=str)).dropna()})
    kind = "; ".join(mem_kind_label(k) for k in kinds) or "peak"
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
               + (overlay_note("model_size", check) if ref is not None else ""))
        out[name] = entry(fig, ax, folder, name, ylabel, title, cap, cut)
    return out
