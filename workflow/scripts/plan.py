"""Study plan: validate the config once (JSON Schema, defaults filled) and build every
measurement point from it in one function. Pure Python, imported by the Snakefile and tests.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"
EXPERIMENTS = ("strong", "weak", "comm", "model_size")


class ConfigError(ValueError):
    """A bad study config; the message names the file, the key and what is allowed."""


def _with_defaults(cls):
    """A validator that also fills in schema defaults (deep-copied) while it validates."""
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(cls, {"properties": set_defaults})


_Validator = _with_defaults(Draft202012Validator)


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _message(err) -> str:
    """One line per error: the key, the bad value and what is allowed."""
    where = _key(err.absolute_path)
    kind, schema, value = err.validator, err.schema, err.instance
    if kind == "enum":
        return f"{where}: {value!r} is not allowed; allowed values: {', '.join(map(repr, schema['enum']))}"
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(value) - set(allowed))
        return f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed keys: {', '.join(allowed)}"
    if kind == "not" and "const" in schema.get("not", {}):
        return f"{where}: {value!r} is not allowed ({schema.get('description', '')})".rstrip(" ()")
    return f"{where}: {err.message}"  # jsonschema's own text already shows the value and the bound


def validate_config(config: dict, source: str = "config", schema: dict | None = None) -> dict:
    """Validate `config` in place (defaults filled) and return it, or raise ConfigError listing
    every problem as '<source>: <key>: <what is wrong and what is allowed>'."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys, got {type(config).__name__}")
    schema = load_schema() if schema is None else schema
    errors = sorted(_Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_message(e) for e in errors]
    if not problems:
        problems = _semantic_problems(config)
    if problems:
        raise ConfigError(f"{source}: invalid study config:\n  " + "\n  ".join(problems))
    return config


def _world(topo: dict) -> int:
    return topo["nodes"] * topo["gpus_per_node"]


def _semantic_problems(cfg: dict) -> list[str]:
    """Rules JSON Schema cannot say well."""
    out = []
    exps = cfg["experiments"]
    if not any(exps.get(name, {}).get("enabled", False) for name in EXPERIMENTS):
        out.append(f"experiments: no experiment enabled; give at least one of {', '.join(EXPERIMENTS)}")
    strong = exps.get("strong")
    if strong and strong["enabled"]:
        has_g, has_r = "global_batch" in strong, "batch_per_rank" in strong
        if has_g == has_r:
            out.append("experiments.strong: give exactly one of global_batch (fixed global batch) "
                       "or batch_per_rank (fixed per-rank batch, the paper's way)")
        elif has_g:
            for i, topo in enumerate(strong["topologies"]):
                if strong["global_batch"] % _world(topo):
                    out.append(f"experiments.strong.global_batch: {strong['global_batch']} is not divisible by the "
                               f"world size {_world(topo)} of topologies[{i}]; use a multiple of every world size")
    lo, hi = cfg["model"]["grid_range"]
    if not hi > lo:
        out.append(f"model.grid_range: [{lo}, {hi}] must have hi > lo")
    return out


def load_config(path: str | Path) -> dict:
    """Read and validate one YAML study config file."""
    path = Path(path)
    try:
        with open(path) as f:
            cfg = yaml.safe_load(f) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return validate_config(cfg, source=str(path))


def point_id(experiment: str, impl: str, basis: str, widths, nodes: int, gpus_per_node: int, rep: int) -> str:
    """The one place a point's id is made; nothing parses ids back."""
    model = impl if impl.startswith("mlp") else f"{impl}_{basis}"
    return f"{experiment}-{model}-{'x'.join(map(str, widths))}-n{nodes}g{gpus_per_node}-r{rep}"


def build_points(cfg: dict) -> dict[str, dict]:
    """Every measurement point of a validated config, keyed by id, in a stable order.
    Each point is a flat JSON-able dict: all that `kan.train` and the scheduler need."""
    model, train, exps = cfg["model"], cfg["training"], cfg["experiments"]
    base_widths = list(model["widths"])
    # MLP impls have no basis: measure them once, not once per basis
    combos = []
    for impl in model["impl"]:
        for basis in (model["basis"] if impl == "kanscale" else model["basis"][:1]):
            combos.append((impl, basis))

    plan: list[tuple[str, list[int], dict, int, int]] = []  # (experiment, widths, topo, samples, batch_per_rank)
    s = exps.get("strong")
    if s and s["enabled"]:
        for topo in s["topologies"]:
            bpr = s["batch_per_rank"] if "batch_per_rank" in s else s["global_batch"] // _world(topo)
            plan.append(("strong", base_widths, topo, s["samples"], bpr))
    w = exps.get("weak")
    if w and w["enabled"]:
        for topo in w["topologies"]:
            plan.append(("weak", base_widths, topo, w["samples_per_rank"] * _world(topo), w["batch_per_rank"]))
    c = exps.get("comm")
    if c and c["enabled"]:
        for topo in c["topologies"]:
            plan.append(("comm", base_widths, topo, c["samples"], c["batch_per_rank"]))
    m = exps.get("model_size")
    if m and m["enabled"]:
        for h in m["hidden_widths"]:
            widths = [base_widths[0]] + [h] * (len(base_widths) - 2) + [base_widths[-1]]
            plan.append(("model_size", widths, m["topology"], m["samples"], m["batch_per_rank"]))

    points: dict[str, dict] = {}
    res, tmo = cfg["resources"], cfg["timeouts"]
    for experiment, widths, topo, samples, bpr in plan:
        for impl, basis in combos:
            for rep in range(cfg["repeats"]):
                pid = point_id(experiment, impl, basis, widths, topo["nodes"], topo["gpus_per_node"], rep)
                points[pid] = {
                    "id": pid,
                    "study": cfg["study"],
                    "experiment": experiment,
                    "impl": impl,
                    "basis": basis,
                    "widths": widths,
                    "hidden_width": widths[1],
                    "grid_size": model["grid_size"],
                    "spline_order": model["spline_order"],
                    "grid_range": list(model["grid_range"]),
                    "nodes": topo["nodes"],
                    "gpus_per_node": topo["gpus_per_node"],
                    "world_size": _world(topo),
                    "samples": samples,
                    "batch_per_rank": bpr,
                    "global_batch": bpr * _world(topo),
                    "epochs": train["epochs"],
                    "lr": train["lr"],
                    "noise": train["noise"],
                    "seed": train["seed"],
                    "warmup_steps": train["warmup_steps"],
                    "comm_probe_every": train["comm_probe_every"],
                    "max_steps": train["max_steps"],
                    "rep": rep,
                    "launcher": cfg["launcher"],
                    "request_gpus": cfg["request_gpus"],
                    "gpu_type": cfg["gpu_type"],
                    "device": cfg["device"],
                    "threads_per_rank": cfg["cpu_threads_per_rank"],
                    "runtime_min": res["runtime_min"],
                    "mem_mb": res["mem_mb_per_rank"] * topo["gpus_per_node"],
                    "cpus_per_task": res["cpus_per_rank"] * topo["gpus_per_node"],
                    "rdzv_join_s": tmo["rdzv_join_s"],
                    "rdzv_read_s": tmo["rdzv_read_s"],
                    "pg_timeout_s": tmo["pg_s"],
                }
    return points


def retry_token(record_path: str | Path, rerun_failed: bool = True) -> str:
    """A Snakemake param that changes exactly when a point should run again although its record
    exists: Snakemake re-runs a job whose params differ from the ones it last ran with.
    - no record yet, or an ok record: the token the record was written with ("" at first), so
      finished points never re-run;
    - a failed/oom/timeout record (and rerun_failed): a new token naming that failed attempt."""
    try:
        rec = json.loads(Path(record_path).read_text())
    except (OSError, ValueError):
        return ""
    token = str((rec.get("point") or {}).get("retry_token") or "")
    if rerun_failed and rec.get("status") != "ok":
        return f"retry-after-{rec.get('status')}-{rec.get('finished_utc') or rec.get('attempt_id') or 'unknown'}"
    return token
