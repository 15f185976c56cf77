"""What every guideline shares (the rules live beside this module, decide/guidelines.py calls them all).

Deployment guidelines: explicit rules over the scaling tables and the performance model. Each
guideline names its decisive quantity with its deciding interval and has a status:
- "advice": the CI lies on one side of the threshold and every point it rests on has at least
  report.min_repeats ok repeats;
- "inconclusive": the CI straddles the threshold or too few repeats succeeded; `settle` says what
  would decide it (e.g. "run 2 more repeats of 1x2"), and the text gives no advice;
- "not_enough_data": the rule cannot be evaluated at all; the text says what is missing.
A rule only compares points of one experiment. Points whose "nodes" all ran on one host over
loopback are labelled "simulated inter-node (one host)" and never give topology advice; points on
the emulated cluster ("emulated inter-node (one host, R Mbit/s link)") may, stated for that link.

Thresholds come from the config's `report:` section (common/settings.py). The deciding interval is
the CI at the settings' decision_level: 95% with fixed repeats, 1 - alpha / looks with adaptive
repeats (decide/sequential.py), read from the tables' <name>_dlo / <name>_dhi columns.
An inconclusive guideline lists, under `settle_points`, the configurations (tables GROUP keys) whose
repeats would decide it and how many more each needs: what the adaptive looks add.
"""

from __future__ import annotations

import math

from ..common.columns import SIMULATED, is_emulated
from ..common.stats import known, level_label
from ..tables.aggregate import GROUP

MAX_MORE_REPEATS = 50  # beyond this many extra repeats the point is within noise of the threshold


def rounded(x, nd=4):
    """A JSON-able rounded number (None for NaN)."""
    if not known(x):
        return None
    return round(float(x), nd)


class Decide:
    """How a guideline decides: the deciding intervals' level and the repeats a point needs."""

    def __init__(self, min_repeats: int, level: float) -> None:
        self.min_repeats, self.level = min_repeats, level
        self.label = level_label(level)


def key_of(row) -> dict:
    """The configuration a table row stands for (tables/aggregate.py GROUP), as plain JSON values."""
    out = {}
    for c in GROUP:
        v = row.get(c) if hasattr(row, "get") else row[c]
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out[c] = None
        elif c == "ddp":
            out[c] = bool(v)
        elif c in ("nodes", "gpus_per_node", "hidden_width"):
            out[c] = int(v)
        else:
            out[c] = str(v)
    return out


def deciding(row, name: str) -> tuple[float, float]:
    """(lo, hi) of the deciding interval of `name`: its _dlo/_dhi columns, or its 95% CI where a
    table has none (the levels agree then: fixed repeats decide at 95%)."""
    if f"{name}_dlo" in row:
        return float(row[f"{name}_dlo"]), float(row[f"{name}_dhi"])
    return float(row[f"{name}_ci_lo"]), float(row[f"{name}_ci_hi"])


def guideline(gid: str, topic: str, status: str, text: str, rule: str, numbers: dict, settle: str | None = None,
              targets: list | None = None) -> dict:
    """`targets`: (where, more repeats or None, configuration key) of what keeps it undecided."""
    assert status in ("advice", "inconclusive", "not_enough_data"), status
    prefix = {"advice": "", "inconclusive": "Inconclusive: ", "not_enough_data": "Not enough data: "}[status]
    out = {"id": gid, "topic": topic, "status": status, "text": prefix + text, "rule": rule, "numbers": numbers}
    if status == "inconclusive":
        out["settle"] = settle or "more repeats"
        out["settle_points"] = [{"where": w, "more": k, "key": key} for w, k, key in targets or [] if key]
    return out


def topo(row) -> str:
    """'1x2', '2x1 (simulated inter-node (one host))' for ranks that shared one host over loopback,
    or '2x1 (emulated inter-node (one host, 100 Mbit/s link))'."""
    t = f"{int(row['nodes'])}x{int(row['gpus_per_node'])}"
    cls = row.get("placement_class")
    return f"{t} ({cls})" if cls == SIMULATED or is_emulated(cls) else t


def rests_on(g: dict, rows: list[tuple[str, int]]) -> dict:
    """g with the configurations it decided on and their ok repeats (the report: "decided with n")."""
    g["rests_on"] = [{"where": w, "n_ok": int(n)} for w, n in rows]
    return g


def ci_text(value, lo, hi, fmt="{:.1%}", label="95%") -> str:
    txt = fmt.format(value)
    if known(lo) and known(hi):
        txt += f" [{label} CI {fmt.format(lo)}, {fmt.format(hi)}]"
    else:
        txt += " [no CI: one repeat]"
    return txt


def side(value, lo, hi, threshold) -> str:
    """'above' / 'below' when the whole CI is on one side of the threshold, else 'straddles'
    (also when there is no CI: one repeat says nothing about its spread)."""
    if not (known(lo) and known(hi)):
        return "straddles"
    if lo >= threshold:
        return "above"
    if hi < threshold:
        return "below"
    return "straddles"


def more_repeats(n_ok: int, value, lo, hi, threshold, min_repeats: int) -> int | None:
    """Extra repeats that would settle the point: at least up to min_repeats, and for a CI that
    straddles, enough to shrink its half-width h below the gap g = |value - threshold|; the
    half-width falls as 1/sqrt(n), so n_needed = n * (h / g)^2 (ignoring the smaller t quantile:
    it errs towards more repeats). None: the value sits on the threshold."""
    need = max(min_repeats - n_ok, 0)
    if known(lo) and known(hi) and side(value, lo, hi, threshold) == "straddles":
        gap, half = abs(value - threshold), (hi - lo) / 2
        if gap == 0:
            return None
        need = max(need, math.ceil(n_ok * (half / gap) ** 2) - n_ok, 1)
    elif not (known(lo) and known(hi)):
        need = max(need, 2 - n_ok, 1)
    return need


def settle_text(items: list[tuple]) -> str:
    """'run 2 more repeats of 1x2 and 2x1; ...' from (where, more, ...) items: the places that need
    the same number of repeats named together, each once."""
    parts, same_k = [], {}
    for where, k, *_ in items:
        if k is None:
            parts.append(f"{where} sits on the threshold: no number of repeats decides it (it does not matter in practice)")
        elif k > MAX_MORE_REPEATS:
            parts.append(f"{where} is within noise of the threshold (> {MAX_MORE_REPEATS} more repeats needed): "
                         f"reduce the noise (exclusive nodes, longer runs) rather than repeat")
        elif k not in same_k:
            same_k[k] = [where]
            parts.append(k)  # placeholder: the group's text, once every place is known
        elif where not in same_k[k]:
            same_k[k].append(where)
    return "; ".join(p if isinstance(p, str) else
                     f"run {p} more repeat{'s' if p > 1 else ''} of {_and(same_k[p])}" for p in parts)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def ranks(n) -> str:
    """'1 rank', '8 ranks': one notation for a count of ranks in every guideline."""
    n = int(n)
    return f"{n} rank" if n == 1 else f"{n} ranks"

