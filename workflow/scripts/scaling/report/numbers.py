"""A guideline's cited numbers (its `numbers` mapping in guidelines.json) as small readable tables
for the report, never as raw JSON.

Scalars go into one two-column table (quantity, value); a list of mappings is a table of its own, a
row per mapping. Mappings with the same keys go into one table together, a row per mapping and a
column per key: the per-world-size mappings of a guideline (efficiency, its CI, placement, ok repeats
by world size) become one table with the world sizes as columns. Fractions (efficiencies, thresholds
of efficiency rules, a decision's level) read as percentages; a guideline decided at another level
than 95% labels its intervals at that level.
"""

from __future__ import annotations

import math

from ..common.columns import mem_kind_label
from ..common.fmt import sig, zero_width

# how a key reads; the rest: underscores as spaces
LABELS = {
    "threshold": "threshold", "threshold_pct": "threshold", "baseline_world_size": "baseline world size (ranks)",
    "chosen_world_size": "chosen world size (ranks)", "world_sizes_measured": "world sizes measured",
    "world_size": "world size (ranks)", "placement": "placement", "placement_class": "link class",
    "loss_pct": "throughput loss", "loss_pct_ci": "95% CI", "inter_samples_per_s": "multi-node samples/s",
    "intra_samples_per_s": "one-node samples/s", "n_ok": "ok repeats", "intra_n_ok": "one-node ok repeats",
    "keep_within_node": "keep within one node", "num_points_over": "points over", "num_points_under": "points under",
    "num_points_unsure": "points undecided", "best_batch": "best per-rank batch",
    "falls_off_at_batch": "falls off at batch", "min_good_batch": "smallest good batch",
    "mem_kind": "memory kind", "bytes_per_param": "bytes per parameter", "bytes_per_param_ci": "95% CI",
    "fixed_gib": "fixed part (GiB)", "r2": "R²", "residual_se_gib": "residual (GiB)",
    "largest_params": "largest measured parameters", "efficiency_threshold": "efficiency threshold",
    "gpu_hours": "cost (hours)", "global_batch": "global batch", "batch_per_rank": "per-rank batch",
    "batch_rule": "batch rule",
    # the KAN-against-its-baseline verdict: "mlp" there is the study's MLP baseline (mlp_matched or mlp)
    "ratio_kan_over_mlp": "KAN's time ÷ the baseline's", "ci": "95% CI", "kan": "KAN", "mlp": "MLP baseline",
}
# mapping keys by what their keys are: the header of the first column
BY = {"_by_world_size": "world size", "_by_width": "hidden width"}
ROW_LABELS = {
    "efficiency_by_world_size": "efficiency", "efficiency_ci_by_world_size": "95% CI",
    "placement_by_world_size": "placement", "n_ok_by_world_size": "ok repeats",
    "peak_mem_gib_by_width": "peak memory (GiB)", "params_per_gb_by_width": "parameters per GB",
    "compute_samples_per_s_per_rank": "compute-only samples/s per rank", "relative_to_best": "share of the best",
    "relative_to_best_ci": "95% CI", "exposed_comm_pct_mean_ci": "exposed comm % [95% CI]",
    "max_params_fitting_gb": "parameters that fit (by GB)",
}
FRACTION_KEYS = ("efficiency", "relative_to_best")
FRACTION_SCALARS = ("threshold", "efficiency_threshold", "decision_level")


def label(key: str) -> str:
    if key in LABELS:
        return LABELS[key]
    if key in ROW_LABELS:
        return ROW_LABELS[key]
    for sfx in BY:
        if key.endswith(sfx):
            return key[: -len(sfx)].replace("_", " ")
    return key.replace("_", " ")


def _is_fraction(key: str) -> bool:
    return key in FRACTION_SCALARS or any(k in key for k in FRACTION_KEYS)


def value_text(v, key: str = "") -> str:
    """One cell: numbers rounded, fractions as %, [lo, hi] pairs, yes/no, '–' for unknown."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if key == "mem_kind":
        return ", ".join(mem_kind_label(k, table=True) for k in (v if isinstance(v, list) else [v])) or "–"
    if isinstance(v, (int, float)):
        if _is_fraction(key) and abs(v) <= 10:
            return f"{100 * v:.1f}%"
        if "_pct" in key:
            return f"{v:.1f}%"
        if isinstance(v, int) or float(v).is_integer():
            return f"{int(v):,}"
        return sig(v) if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, (list, tuple)):
        nums = all(isinstance(x, (int, float, type(None))) for x in v)
        if nums and len(v) == 2 and _is_fraction(key) and v[0] is not None:
            v = [max(v[0], 0.0), v[1]]  # a share or an efficiency is never below 0: its interval neither
        cells = [value_text(x, key) for x in v]
        if len(cells) == 2 and nums:
            return "–" if v[0] is None and v[1] is None else f"[{cells[0]}, {cells[1]}]"
        if len(cells) == 3 and nums:  # value [lo, hi]; an interval of no width says nothing
            return cells[0] if zero_width(v[1], v[2], v[0]) else f"{cells[0]} [{cells[1]}, {cells[2]}]"
        return ", ".join(cells) or "–"
    if isinstance(v, dict):
        return "; ".join(f"{label(k)} {value_text(x, k)}" for k, x in v.items()) or "–"
    return str(v)


def _is_records(v) -> bool:
    """A list of mappings (the held-out points, the other placements of a time-to-target answer)."""
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def numbers_tables(numbers: dict | None) -> list[dict]:
    """[{'headers': [...], 'rows': [[...], ...]}] of one guideline's numbers."""
    numbers = numbers or {}
    records = {k: v for k, v in numbers.items() if _is_records(v)}
    scalars = [[label(k), value_text(v, k)] for k, v in numbers.items() if not isinstance(v, dict) and k not in records]
    out = [{"headers": ["quantity", "value"], "rows": scalars}] if scalars else []
    for k, v in records.items():  # a row per item: joined into one cell they made a line 9,000 px long
        keys = list(dict.fromkeys(c for item in v for c in item))
        out.append({"headers": [label(k)] + [label(c) for c in keys],
                    "rows": [[str(i + 1)] + [value_text(item.get(c), c) for c in keys] for i, item in enumerate(v)]})
    groups: dict[tuple, list[tuple[str, dict]]] = {}
    for k, v in numbers.items():
        if isinstance(v, dict) and v:
            groups.setdefault(tuple(v), []).append((k, v))
    for keys, members in groups.items():
        first = members[0][0]
        head = next((h for sfx, h in BY.items() if first.endswith(sfx)), "")
        rows = [[label(k)] + [value_text(v[c], k) for c in keys] for k, v in members]
        out.append({"headers": [head] + [label(c) if not c.isdigit() else c for c in keys], "rows": rows})
    level = numbers.get("decision_level")
    if isinstance(level, float) and 0 < level < 1 and round(level, 3) != 0.95:
        # the intervals a decision rests on are at its level (a Bonferroni share of 95% when several
        # world sizes decide): the guideline's text says 98.3% CI, so its table must too
        ci = f"{100 * level:.1f}% CI"
        for t in out:
            t["headers"] = [h.replace("95% CI", ci) for h in t["headers"]]
            t["rows"] = [[c.replace("95% CI", ci) if j == 0 else c for j, c in enumerate(r)] for r in t["rows"]]
    return out

