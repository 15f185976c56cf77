"""The report's "What bounds a step" section: the anatomy table (scaling/tables/anatomy_table.py) as cells,
its figures, and per implementation what follows in words (no section without anatomies)."""

from __future__ import annotations

import pandas as pd

from kan.probes.anatomy import RULE

from .figure_names import ANATOMY_PREFIX as PREFIX
from .sections import figure_entries

HEADERS = ["experiment", "model", "world size", "per-rank batch", "step (ms)", "dispatch (ms)", "compute (ms)",
           "exposed comm (ms)", "unexplained (ms)", "dispatch share", "operators / step", "GPU busy", "kernels", "bound"]
ADVICE = {
    "dispatch": "a dispatch-bound step does not get shorter with more ranks at a fixed global batch (a smaller "
                "per-rank batch saves only per-sample time): raise the per-rank batch, or on GPUs capture the "
                "step as a graph, before adding ranks",
    "compute": "the arithmetic bounds the step: more ranks at a fixed global batch shorten it, as long as the "
               "exposed all-reduce stays smaller than the compute they save",
    "communication": "the exposed all-reduce bounds the step: more ranks add communication and save little; "
                     "fewer, fuller ranks, larger buckets or overlapping the all-reduce with backward pay more",
}
# a captured step (training.cuda_graphs): no capture advice, and its dispatch is the rest of the replay
ADVICE_CAPTURED = {
    "dispatch": "the step is already captured as a graph and its rest (one graph launch and the copy-in) still "
                "outweighs its compute: more ranks at a fixed global batch do not shorten it; raise the per-rank "
                "batch before adding ranks",
    "compute": ADVICE["compute"],
    "undecided": "the step is captured as a graph: its dispatch column is the rest of the replayed step, the "
                 "all-reduce included, and its exposed comm is not measured; that rest outweighs its compute, so "
                 "the bound is undecided; raise the per-rank batch, or time the eager step to split the rest",
}


def _ms(v) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):.3f}"


def _pct(v) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):.0f}%"


def _comm(r) -> str:
    return "not measured" if _captured(r) and pd.isna(r["communication_ms"]) else _ms(r["communication_ms"])


def _dispatch(r) -> str:
    """A captured step's dispatch is the replay's rest; where the eager line's compute alone exceeds
    the replayed step that rest is clamped to 0, and the cell says so."""
    clamped = r.get("dispatch_clamped")
    if _captured(r) and clamped is not None and not pd.isna(clamped) and bool(clamped):
        return f"{_ms(r['dispatch_ms'])} (clamped: the eager compute exceeds the replayed step)"
    return _ms(r["dispatch_ms"])


def _captured(r) -> bool:
    v = r.get("captured", False)
    return False if v is None or pd.isna(v) else bool(v)


def anatomy_context(table: pd.DataFrame | None, manifest: dict, figures_dir) -> dict | None:
    if table is None or table.empty:
        return None
    rows = [[r["experiment"], r["model"], int(r["world_size"]), int(r["batch_per_rank"]), _ms(r["step_ms"]),
             _dispatch(r), _ms(r["compute_ms"]) + (" (eager line)" if _captured(r) else ""), _comm(r), _ms(r["other_ms"]),
             _pct(r["dispatch_share_pct"]), "" if pd.isna(r["ops_per_step"]) else f"{float(r['ops_per_step']):.0f}",
             _pct(r["gpu_busy_pct"]), "" if pd.isna(r["kernels"]) else r["kernels"], r["bound"]]
            for _, r in table.iterrows()]
    words = []
    for (exp, model), g in table.groupby(["experiment", "model"], sort=True):
        g = g.sort_values("world_size")
        by = ", ".join(f"p = {int(w)}: {b}" for w, b in zip(g["world_size"], g["bound"]))
        last = g.iloc[-1]
        words.append(f"{model}, {exp} ({by}): {(ADVICE_CAPTURED if _captured(last) else ADVICE)[last['bound']]}.")
    return {"headers": HEADERS, "rows": rows, "words": words, "rule": RULE,
            "figures": figure_entries(manifest, figures_dir, [n for n in manifest if n.startswith(PREFIX) or n == "anatomy"])}
