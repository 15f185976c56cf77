"""What `make plan` prints: first what a study asks for and what it can cost at most, then one line
per experiment x placement. The per-point table is long (config/paper.yaml: 285 points), so
study.py prints it only on request; results/<study>/plan.csv always holds it.

Pure: everything here reads the plan rows (study.plan_rows, the columns of plan.csv) and the
points. A row's gpu_hours is nodes x GPUs per node x its time limit: what Slurm may charge if the
job runs until it is killed, not what it costs. Measured times give the estimate (runtimes.py).
"""

from __future__ import annotations

from kan.contract.point import Point

# the order a reader asks in: what is done, what is under way, what is left, what went wrong
STATE_ORDER = ("ok", "running", "pending", "not submitted", "not requested")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def placement_words(nodes: int, ranks_per_node: int, gpus: bool) -> str:
    """'2 nodes x 4 GPUs'; on a CPU-only cluster (resources.request_gpus: false) '1 node x 4 ranks'."""
    return f"{plural(nodes, 'node')} x {plural(ranks_per_node, 'GPU' if gpus else 'rank')}"


def states_words(states: list[str]) -> str:
    """'3 ok, 12 pending': counts in STATE_ORDER, then the failed kinds (failed, oom, corrupt, ...)."""
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    order = [s for s in STATE_ORDER if s in counts] + sorted(s for s in counts if s not in STATE_ORDER)
    return ", ".join(f"{counts[s]} {s}" for s in order)


def limit_words(minutes: list[int]) -> str:
    lo, hi = min(minutes), max(minutes)
    return f"{lo} min" if lo == hi else f"{lo}-{hi} min"


def hours_words(rows: list[dict], gpus: bool, factor: int = 1) -> str:
    """'444.0 GPU-hours (285.0 node-hours)' of the rows at their time limits, each run `factor` times."""
    gpu_h = factor * sum(r["gpu_hours"] for r in rows)
    node_h = factor * sum(r["node_hours"] for r in rows)
    if not gpus:
        return f"{node_h:,.1f} node-hours (no GPUs requested)"
    return f"{gpu_h:,.1f} GPU-hours ({node_h:,.1f} node-hours)"


def cost_lines(rows: list[dict], todo: list[dict], retries: int, profile: str, gpus: bool) -> list[str]:
    """The most the study can cost: every job at its time limit, then every retry of the jobs still
    to run too (the profile's retries: a job that fails runs again, up to 1 + retries times)."""
    lines = [f"at most {hours_words(rows, gpus)} if every job ran to its time limit"
             + (f"; the {len(todo)} still to run: at most {hours_words(todo, gpus)}" if len(todo) != len(rows) else "")]
    if retries:
        lines.append(f"with retries: {retries} ({profile}): at most {hours_words(todo, gpus, 1 + retries)} "
                     f"if every job still to run ran {1 + retries} times to its time limit")
    else:
        lines.append(f"retries: 0 ({profile}): a failed job does not run again, so that is also the worst case")
    return lines


def _about(hours: float) -> str:
    """Two significant digits: an expectation from other runs' medians is no sharper (20, 0.021)."""
    return f"{float(f'{hours:.2g}'):,g}"


def estimate_lines(rows: list[dict], rule: str, sources: list[str], empty: list[str], gpus: bool) -> list[str]:
    """What the jobs still to run are expected to take, by the measured step times of points like
    them (this study's records and plan.estimate_from's), beside the bound of those with none: the
    expected cost is said with its source, and never for a point nothing like it was measured."""
    unit = "GPU-hours" if gpus else "rank-hours"
    todo = [r for r in rows if r["state"] != "ok"]
    known = [r for r in todo if r["estimated_min"] is not None]
    rest = [r for r in todo if r["estimated_min"] is None]
    lines = []
    if known:
        hours = sum(r["world_size"] * r["estimated_min"] / 60 for r in known)  # a rank is a GPU where GPUs are asked
        lines.append(f"expected: about {_about(hours)} {unit} for the {plural(len(known), 'point')} still to run whose "
                     f"step was measured like theirs (from {', '.join(sources)}; rule: {rule})")
    if rest:
        lines.append(f"{'the other ' if known else ''}{plural(len(rest), 'point')} still to run: no step measured like "
                     f"theirs (same model, placement and per-rank batch), so no expected cost, at most "
                     f"{hours_words(rest, gpus)}; plan.estimate_from names other studies' results to use")
    lines += [f"plan.estimate_from: {f} holds no records yet (run that study first: nothing is estimated from it)"
              for f in empty]
    return lines


def largest_line(rows: list[dict], points: dict[str, Point], gpus: bool) -> str:
    """The job that needs the most nodes, then the most GPUs per node (the last such point)."""
    def size(r: dict) -> tuple[int, int]:
        return r["nodes"], points[r["point"]].placement.gpus_per_node

    biggest = max(reversed(rows), key=size)
    return f"largest job: {placement_words(*size(biggest), gpus)} ({biggest['point']})"


def group_lines(rows: list[dict], points: dict[str, Point], gpus: bool) -> list[str]:
    """One line per experiment x placement, experiments in the config's order, placements smallest
    first; the hours are the group's jobs at their time limits (they sum to the first total)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["experiment"], r["nodes"], points[r["point"]].placement.gpus_per_node), []).append(r)
    order = list(dict.fromkeys(r["experiment"] for r in rows))
    unit = "GPU-hours" if gpus else "node-hours"
    table = [("experiment", "placement", "points", "states", "time limit", f"{unit} at most")]
    for (exp, nodes, ranks), rs in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1:])):
        hours = sum(r["gpu_hours" if gpus else "node_hours"] for r in rs)
        table.append((exp, placement_words(nodes, ranks, gpus), str(len(rs)), states_words([r["state"] for r in rs]),
                      limit_words([r["runtime_min"] for r in rs]), f"{hours:,.1f}"))
    return columns(table, right={2, 4, 5})


def columns(table: list[tuple[str, ...]], right: set[int]) -> list[str]:
    """Aligned text columns, two spaces apart; the columns in `right` (numbers) aligned right."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            .rstrip() for row in table]


def left_out_lines(left_out: list[tuple[dict, str]]) -> list[str]:
    """What the ddp experiment's lists ask for that is not planned, one line per reason (at most one
    per kind of hook: two lines), e.g. 'left out of experiments.ddp: 2 settings with comm_hook
    powersgd and cuda_graphs true: PowerSGD synchronises ...'."""
    by_why: dict[str, list[dict]] = {}
    for setting, why in left_out:
        by_why.setdefault(why, []).append(setting)
    lines = []
    for why, settings in by_why.items():
        hooks = ", ".join(dict.fromkeys(s["comm_hook"] for s in settings))
        lines.append(f"left out of experiments.ddp: {plural(len(settings), 'setting')} with comm_hook {hooks} and "
                     f"cuda_graphs true, which cannot run under CUDA-graph capture: {why}")
    return lines
