"""The grammar of `report.expect` (the analysis's scaling/decide/expectations.py says what an expectation means and how it
is judged): its metrics, selectors and allowed keys, and the problems of a config's list. No table and
no pandas here: the planner checks a config with it at load time, before anything runs, and every
snakemake start imports the planner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .placements import PLACEMENTS

SELECTORS = ("model", "world_size", "nodes", "gpus_per_node", "placement", "hidden_width", "batch_per_rank")
INTEGER_SELECTORS = ("world_size", "nodes", "gpus_per_node", "hidden_width", "batch_per_rank", "size_bytes")
# the experiments whose tables carry exposed communication (the `experiment` selector of exposed_comm_pct)
COMM_EXPERIMENTS = ("strong", "weak", "comm")


@dataclass(frozen=True)
class Metric:
    """One checkable quantity: where it lives and how it reads."""
    table: str  # strong, weak, comm, model_size, allreduce_sizes, or "model" (model.json)
    column: str  # value column; CI in <ci>_ci_lo / <ci>_ci_hi unless exact
    ci: str | None  # stem of the CI columns, None: the metric has no interval by nature
    unit: str  # "fraction" (shown as %), "%", or a unit name
    text: str  # what it is, for the report and the error messages
    extra: tuple[str, ...] = ()  # selectors beyond SELECTORS


METRICS = {
    "strong_efficiency": Metric("strong", "efficiency", "efficiency", "fraction",
                                "strong-scaling efficiency vs the DDP baseline (0.7 = 70%)"),
    "strong_efficiency_vs_nonddp": Metric("strong", "efficiency_vs_nonddp", "efficiency_vs_nonddp", "fraction",
                                          "strong-scaling efficiency vs the non-DDP 1-rank run (0.7 = 70%)"),
    "strong_speedup": Metric("strong", "speedup", "speedup", "×", "strong-scaling speedup vs the DDP baseline"),
    "strong_samples_per_s": Metric("strong", "samples_per_s_mean", "samples_per_s", "samples/s",
                                   "strong-scaling throughput, all ranks"),
    "time_to_target_s": Metric("strong", "time_to_target_s", "time_to_target_s", "s",
                               "training time until the target loss"),
    "weak_efficiency": Metric("weak", "weak_efficiency", "weak_efficiency", "fraction",
                              "weak-scaling efficiency vs the DDP baseline (0.7 = 70%)"),
    "weak_samples_per_s_per_rank": Metric("weak", "samples_per_s_per_rank_mean", "samples_per_s_per_rank",
                                          "samples/s", "weak-scaling throughput per rank"),
    "exposed_comm_pct": Metric("+".join(COMM_EXPERIMENTS), "exposed_comm_pct_mean", "exposed_comm_pct", "%",
                               "exposed communication, % of a step (DDP points with world size > 1)",
                               ("experiment",)),
    "inter_node_loss_pct": Metric("comm", "inter_vs_intra_loss_pct", "inter_vs_intra_loss_pct", "%",
                                  "throughput lost by a multi-node placement vs one node at equal world size"),
    "peak_mem_gib": Metric("model_size", "peak_mem_gib_mean", "peak_mem_gib", "GiB",
                           "peak memory of the model-size sweep"),
    "allreduce_busbw_gbps": Metric("allreduce_sizes", "busbw_gbps", None, "GB/s",
                                   "all-reduce bus bandwidth (CI from the time's CI)", ("size_bytes",)),
    "model_loo_mape_pct": Metric("model", "loo_mape_pct", None, "%",
                                 "performance model's leave-one-world-size-out error (MAPE)"),
}
# allowed keys of an expectation besides its selectors; the schema lists the same (a test checks)
KEYS = ("metric", "min", "max", "name")


def allowed_keys(metric: str) -> tuple[str, ...]:
    return KEYS + SELECTORS + METRICS[metric].extra


def expectation_problems(expect, key: str = "report.expect") -> list[tuple[str, str]]:
    """Grammar problems of `expect` as (config key, message), [] when it is valid. Called when the
    config is loaded, so a typo fails before any point runs."""
    if expect is None:
        return []
    if not isinstance(expect, list):
        return [(key, f"must be a list of expectations (mappings with metric and min/max), got "
                      f"{type(expect).__name__}")]
    out = []
    for i, e in enumerate(expect):
        where = f"{key}[{i}]"
        if not isinstance(e, dict):
            out.append((where, f"must be a mapping like {{metric: strong_efficiency, world_size: 8, min: 0.7}}, "
                               f"got {e!r}"))
            continue
        metric = e.get("metric")
        if metric not in METRICS:
            what = "missing" if metric is None else f"{metric!r} is not a known metric"
            out.append((f"{where}.metric", f"{what}; allowed metrics: {', '.join(METRICS)}"))
            continue
        allowed = allowed_keys(metric)
        extra = [k for k in e if k not in allowed]
        if extra:
            out.append((where, f"unknown key(s) {', '.join(map(repr, extra))} for metric {metric}; allowed keys: "
                               f"{', '.join(allowed)}"))
        out += _bound_problems(where, metric, e)
        out += _selector_problems(where, e)
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bound_problems(where: str, metric: str, e: dict) -> list[tuple[str, str]]:
    out = []
    if "min" not in e and "max" not in e:
        out.append((where, f"give min, max or both (the bounds {metric} must keep)"))
    for b in ("min", "max"):
        if b in e and not _is_number(e[b]):
            out.append((f"{where}.{b}", f"{e[b]!r} is not a finite number"))
        elif b in e and METRICS[metric].unit == "fraction" and abs(e[b]) > 2:
            out.append((f"{where}.{b}", f"{metric} is a fraction (0.7 = 70%), got {e[b]!r}; write "
                                        f"{e[b] / 100:g} if you mean {e[b]:g}%"))
    if _is_number(e.get("min")) and _is_number(e.get("max")) and e["min"] > e["max"]:
        out.append((where, f"min {e['min']!r} is above max {e['max']!r}: no value can pass"))
    return out


def _selector_problems(where: str, e: dict) -> list[tuple[str, str]]:
    out = []
    for k in INTEGER_SELECTORS:
        if k in e and not (isinstance(e[k], int) and not isinstance(e[k], bool) and e[k] >= 1):
            out.append((f"{where}.{k}", f"{e[k]!r} is not a positive integer"))
    if "placement" in e and e["placement"] not in PLACEMENTS:
        out.append((f"{where}.placement", f"{e['placement']!r} is not a link class; allowed: "
                                          f"{', '.join(PLACEMENTS)}"))
    if "experiment" in e and e["experiment"] not in COMM_EXPERIMENTS:
        out.append((f"{where}.experiment", f"{e['experiment']!r} is not allowed; allowed: {', '.join(COMM_EXPERIMENTS)}"))
    for k in ("model", "name"):
        if k in e and not isinstance(e[k], str):
            out.append((f"{where}.{k}", f"{e[k]!r} is not a string"))
    return out


def validate_expectations(expect, key: str = "report.expect") -> list:
    """`expect` unchanged, or ValueError with one line per problem."""
    problems = expectation_problems(expect, key)
    if problems:
        raise ValueError("\n".join(f"{k}: {m}" for k, m in problems))
    return expect or []
