"""What a DDP overhead is not: when DDP runs pay a cost per step that the one-rank run does not, yet
that cost is the same whether the ranks share a node or not, and the gradients could cross even a slow
link in a small part of it, the cost is not communication: adding bandwidth will not remove it.

Where the performance model has an inter-node per-step DDP cost d (model/fit.py: a family never probed,
whose DDP cost is its step less the non-DDP compute), per model and per world size measured both within
one node and across nodes (the strong, weak and comm tables together):
    spread  = |mean step across nodes - mean step within one node| at that world size
    wire(p) = 2 (p - 1) / p x gradient bytes x 8 / 1 Gbit/s, a ring all-reduce's bytes per rank at 1 Gbit/s
              (slower than any interconnect a GPU cluster uses: an upper bound on the wire time)
The guideline is advice when d's 95% interval lies above 10 x both the spread and wire(p) at every such
world size; otherwise it is not stated (the data do not show it either way).
"""

from __future__ import annotations

import pandas as pd

from ..common.columns import INTER, INTRA
from .rules import guideline

SLOW_LINK_BIT_S = 1e9  # 1 Gbit/s
FACTOR = 10.0


def _pairs(tables: pd.DataFrame, model: str, grads_bytes: float) -> list[dict]:
    """Per world size with both an intra- and an inter-node DDP point (the experiments' tables
    together): their mean steps (mean of the points' means)."""
    m = tables[(tables["model"] == model) & tables["ddp"].astype(bool) & (tables["world_size"] > 1)
               & tables["step_time_s_mean"].notna()]
    out = []
    for p, g in m.groupby("world_size"):
        intra, inter = g[g["placement_class"] == INTRA], g[g["placement_class"] == INTER]
        if len(intra) and len(inter):
            out.append({"world_size": int(p), "intra_step_s": float(intra["step_time_s_mean"].mean()),
                        "inter_step_s": float(inter["step_time_s_mean"].mean()), "grads_bytes": grads_bytes})
    return out


def not_communication(tables: list[pd.DataFrame], model_json: dict | None) -> list[dict]:
    """The guideline per model (none where the data do not show it); `tables`: strong, weak, comm."""
    out = []
    frames = [t for t in tables if t is not None and len(t) and "step_time_s_mean" in t]
    if not frames or not model_json:
        return out
    both = pd.concat(frames, ignore_index=True)
    for model, m in sorted((model_json.get("models") or {}).items()):
        fixed = (((m.get("placements") or {}).get(INTER) or {}).get("comm") or {}).get("ddp_fixed_s")
        if not fixed or fixed.get("ci_lo") is None:
            continue
        pairs = _pairs(both, model, float(m.get("grads_bytes") or 0.0))
        if not pairs:
            continue
        for r in pairs:
            p = r["world_size"]
            r["spread_s"] = abs(r["inter_step_s"] - r["intra_step_s"])
            r["wire_s_at_1_gbit"] = 2 * (p - 1) / p * r["grads_bytes"] * 8 / SLOW_LINK_BIT_S
        if not all(fixed["ci_lo"] > FACTOR * max(r["spread_s"], r["wire_s_at_1_gbit"]) for r in pairs):
            continue
        where = "; ".join(f"at {r['world_size']} ranks, {r['intra_step_s'] * 1e3:.1f} ms within one node and "
                          f"{r['inter_step_s'] * 1e3:.1f} ms across nodes, and {r['grads_bytes'] / 1e3:.1f} KB of "
                          f"gradients would cross a 1 Gbit/s link in {r['wire_s_at_1_gbit'] * 1e3:.2f} ms" for r in pairs)
        text = (f"{model}: DDP costs {fixed['value'] * 1e3:.1f} ms a step [95% CI {fixed['ci_lo'] * 1e3:.1f}, "
                f"{fixed['ci_hi'] * 1e3:.1f}] that the one-rank run does not pay, whether or not the ranks cross "
                f"nodes ({where}): this overhead is not communication, and a faster network will not remove it. "
                f"Look for work the DDP runs do besides the all-reduce (extra forward passes, per-tensor syncs, "
                f"probes, logging on every step).")
        rule = (f"the performance model's per-step DDP cost d (step less the non-DDP compute, no no_sync probe) has "
                f"its 95% interval above {FACTOR:g}x both |inter - intra| (mean steps at one world size) and a ring "
                f"all-reduce of the gradients at 1 Gbit/s, at every world size measured both ways")
        out.append(guideline(f"overhead-not-comm-{model}", "comm", "advice", text, rule,
                             {"ddp_fixed_s": fixed, "world_sizes": pairs}))
    return out
