"""Study plan: read and validate the config once, then build every measurement point from it.

    load_config(path)          a YAML file, strictly (duplicate keys are errors), validated
    validate_config(cfg, ...)  JSON Schema with defaults filled, integers that are integers, finite
                               numbers, then the rules the schema cannot say; ConfigError names the
                               file (or "--config" for command-line values), the key and what is allowed
    build_points(cfg)          {id: kan.config.Point}: experiments x models x topologies x repeats
    launch_settings(cfg)       kan.config.LaunchSettings (time limit, memory, timeouts: not in the id)
    retry_token(path)          the Snakemake param that re-runs failed and corrupt records

Pure Python, imported by the workflow (common.smk), `make plan` and the tests. The fields of a
point are defined once, in kan/config.py; this module only maps config keys onto them.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import re
import math
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators

from kan import record as records
from scaling.repeats import RepeatPlan
from scaling.expectations import expectation_problems
from kan.config import (AllreduceConfig, LaunchSettings, Limits, ModelConfig, Placement, Point, PointError,
                        TrainConfig)

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"
EXPERIMENTS = ("strong", "weak", "comm", "model_size", "allreduce", "ddp")
TRAINING_EXPERIMENTS = ("strong", "weak", "comm", "model_size", "ddp")
DDP_LISTS = ("comm_hook", "bucket_cap_mb", "static_graph", "gradient_as_bucket_view", "nccl_algo")

# config key -> (dataclass, field): where a config value lands in a point (tests check the schema's
# defaults and bounds against these fields; errors raised by the dataclasses are re-labelled with
# the config key)
CONFIG_FIELDS = {
    "model.grid_size": (ModelConfig, "grid_size"), "model.spline_order": (ModelConfig, "spline_order"),
    "model.grid_range": (ModelConfig, "grid_range"), "model.widths": (ModelConfig, "widths"),
    **{f"training.{f}": (TrainConfig, f) for f in ("epochs", "lr", "noise", "seed", "warmup_steps",
                                                    "comm_probe_every", "max_steps", "loss_every_steps",
                                                    "bucket_cap_mb")},
    "device": (Placement, "device"), "launcher": (Placement, "launcher"),
    "cpu_threads_per_rank": (Placement, "threads_per_rank"),
    "resources.runtime_min": (LaunchSettings, "runtime_min"),
    "resources.mem_mb_per_rank": (LaunchSettings, "mem_mb_per_rank"),
    "resources.cpus_per_rank": (LaunchSettings, "cpus_per_rank"),
    "resources.exclusive": (LaunchSettings, "exclusive"),
    "resources.warm_start": (LaunchSettings, "warm_start"),
    "request_gpus": (LaunchSettings, "request_gpus"), "gpu_type": (LaunchSettings, "gpu_type"),
    "timeouts.rdzv_join_s": (LaunchSettings, "rdzv_join_s"), "timeouts.rdzv_read_s": (LaunchSettings, "rdzv_read_s"),
    "timeouts.pg_s": (LaunchSettings, "pg_timeout_s"),
    **{f"limits.{f}": (Limits, f) for f in ("max_nodes", "max_ranks_per_node", "max_width", "max_grid_size",
                                             "max_samples", "max_epochs", "max_repeats", "max_allreduce_bytes")},
    "experiments.allreduce.iters": (AllreduceConfig, "iters"),
    "experiments.allreduce.warmup": (AllreduceConfig, "warmup"),
    "experiments.allreduce.sizes_bytes": (AllreduceConfig, "sizes_bytes"),
}
# a dataclass's own error key (e.g. placement.threads_per_rank) -> the config key it came from
_FIELD_KEY = {f"{cls.__name__}.{name}": key for key, (cls, name) in CONFIG_FIELDS.items()}
_PREFIX = {ModelConfig: "model.", TrainConfig: "training.", Placement: "placement.", LaunchSettings: "launch.",
           Limits: "limits.", AllreduceConfig: "allreduce."}


class ConfigError(ValueError):
    """A bad study config; the message names the file, the key and what is allowed."""


# ---- reading YAML strictly ----------------------------------------------------------------------

class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last silently)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def read_yaml(path: str | Path) -> dict:
    """A config file as a mapping; ConfigError (naming the file) for a missing, unreadable, malformed,
    empty or non-mapping file and for a duplicate key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the config file: {e}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if data is None:
        raise ConfigError(f"{path}: the config file is empty; it needs at least `experiments:` with one "
                          f"experiment (see config/local.yaml)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys (study:, model:, experiments: ...), "
                          f"got a {type(data).__name__}")
    return data


# ---- schema validation --------------------------------------------------------------------------

def _is_integer(checker, v) -> bool:  # 1.0 is not an integer here: the trainer takes only integers
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(checker, v) -> bool:  # NaN and +-inf are not numbers of any study
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _with_defaults(cls):
    """A validator that fills in schema defaults (deep-copied) while it validates, and whose integer
    and number types are strict."""
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    checker = cls.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    return validators.extend(cls, {"properties": set_defaults}, type_checker=checker)


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
    if kind in ("oneOf", "anyOf") and err.context:
        # the branch written for this kind of value (a mapping, a number) says what is wrong with it
        branches = schema[kind]
        fits = [e for e in err.context if _fits_type(branches[e.schema_path[0]].get("type"), value)]
        if fits:
            return _message(min(fits, key=lambda e: len(e.schema_path)))
        kinds = [f"a mapping with keys {', '.join(b.get('properties', {}))}" if b.get("type") == "object"
                 else f"{b.get('type')}" + (f" >= {b['minimum']}" if "minimum" in b else "") for b in branches]
        return f"{where}: {value!r} is not allowed; allowed: {' or '.join(kinds)}"
    if kind == "type" and isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value!r} is not a finite number"
    if kind == "type" and schema.get("type") == "integer" and isinstance(value, float):
        return f"{where}: {value!r} is not an integer (write {int(value)} if you mean it)" \
            if value.is_integer() else f"{where}: {value!r} is not an integer"
    return f"{where}: {err.message}"  # jsonschema's own text already shows the value and the bound


def _fits_type(kind, value) -> bool:
    """Whether a oneOf branch of type `kind` is the one meant for `value` (2.5 is meant for an integer
    branch: its message says "not an integer")."""
    kinds = kind if isinstance(kind, list) else [kind]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return any({"integer": number, "number": number,
                "object": isinstance(value, dict), "array": isinstance(value, list),
                "string": isinstance(value, str), "boolean": isinstance(value, bool),
                "null": value is None}.get(k, False) for k in kinds)


def _source_of(key_path: list, sources: dict) -> str:
    """The file, or "--config" when the value (or a mapping above it) was given on the command line."""
    node = sources.get("overrides") or {}
    for part in key_path:
        if not isinstance(node, dict) or part not in node:
            return sources["file"]
        node = node[part]
        if not isinstance(node, dict):
            return "--config"
    return "--config" if key_path else sources["file"]


def _key_path(key: str) -> list[str]:
    """'experiments.strong (1x2).topologies[0]' -> ['experiments', 'strong', 'topologies']"""
    return [part for part in re.split(r"[.\[]", re.sub(r" \(.*?\)|\d+\]", "", key)) if part]


def validate_config(config: dict, source: str = "config", schema: dict | None = None,
                    overrides: dict | None = None) -> dict:
    """Validate `config` in place (defaults filled) and return it, or raise ConfigError with one line
    per problem: '<file or --config>: <key>: <what is wrong and what is allowed>'. `overrides` are the
    values given with --config (they are blamed on --config, not on the file)."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys, got {type(config).__name__}")
    sources = {"file": source, "overrides": overrides}
    schema = load_schema() if schema is None else schema
    errors = sorted(_Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [f"{_source_of(list(e.absolute_path), sources)}: {_message(e)}" for e in errors]
    if not problems:
        problems = [f"{_source_of(_key_path(key), sources)}: {key}: {msg}" for key, msg in _semantic_problems(config)]
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} problems in the study config:\n  " + "\n  ".join(problems))
    return config


def config_warnings(cfg: dict) -> list[str]:
    """What a valid config does that its author may not expect, one line each (the workflow logs
    them at start, `make check` prints them)."""
    m, out = cfg["model"], []
    others = [b for b in m["basis"] if b != "bspline"]
    if "pykan" in m["impl"] and others:
        out.append(f"model.basis {others}: pykan has B-spline edges only, so its points use bspline; "
                   f"{', '.join(others)} run for impl kanscale only")
    net = cfg.get("network") or {}
    if net.get("emulate"):
        multi = [t for _, _, t, _, _, _ in _training_rows(cfg) if t["nodes"] > 1] + [
            t for t in allreduce_topologies(cfg) if t["nodes"] > 1]
        out.append("network.emulate: points of 2 or more nodes run on an emulated cluster of this host (root, "
                   "Linux, iproute2): under profiles/local, or a test Slurm started with SLURM_LOCAL_EMULATE=1; "
                   "elsewhere they are recorded as failed with the reason"
                   + ("" if multi else "; no topology here has 2 or more nodes, so nothing is emulated"))
    return out


def _world(topo: dict) -> int:
    return topo["nodes"] * topo["gpus_per_node"]


def _relabel(e: PointError, cls) -> tuple[str, str]:
    """A dataclass error as (config key, message)."""
    base = e.key.split("[")[0]
    name = base[len(_PREFIX[cls]):] if base.startswith(_PREFIX[cls]) else base
    key = _FIELD_KEY.get(f"{cls.__name__}.{name}", e.key)
    return key + e.key[len(base):], e.message


def _build(cls, kwargs: dict, problems: list, **extra):
    try:
        return cls(**kwargs, **extra)
    except PointError as e:
        problems.append(_relabel(e, cls))
        return None


def _kwargs(cfg: dict, cls) -> dict:
    """{field: config value} of every config key that CONFIG_FIELDS maps onto `cls` (a null value
    means the field's default)."""
    out = {}
    for key, (target, name) in CONFIG_FIELDS.items():
        if target is cls:
            node = cfg
            for part in key.split("."):
                node = node[part]
            if node is not None:
                out[name] = tuple(node) if isinstance(node, list) else node
    return out


def _parts(cfg: dict, problems: list) -> dict:
    """The study-wide dataclasses, each built (and so validated) once from its config section."""
    m = cfg["model"]
    limits = _build(Limits, _kwargs(cfg, Limits), problems)
    parts = {"limits": limits or Limits(), "models": []}
    model_kw = _kwargs(cfg, ModelConfig)
    for impl in m["impl"]:
        # an MLP has no basis, pykan has B-splines only: one model each, not one per basis
        for basis in (m["basis"] if impl == "kanscale" else ["bspline"]):
            mc = _build(ModelConfig, {**model_kw, "impl": impl, "basis": basis}, problems)
            if mc is not None:
                parts["models"].append(mc)
    parts["train"] = _kwargs(cfg, TrainConfig)
    _build(TrainConfig, dict(parts["train"]), problems)  # checks the training section once
    parts["placement"] = _kwargs(cfg, Placement)
    _build(Placement, dict(parts["placement"]), problems)
    parts["launch"] = _build(LaunchSettings, _kwargs(cfg, LaunchSettings), problems)
    return parts


def _enabled(exps: dict, name: str) -> dict | None:
    e = exps.get(name)
    return e if e and e.get("enabled", True) else None


def _semantic_problems(cfg: dict) -> list[tuple[str, str]]:
    """Rules JSON Schema cannot say well, as (config key, message)."""
    out: list[tuple[str, str]] = []
    exps = cfg["experiments"]
    if not any(_enabled(exps, name) for name in TRAINING_EXPERIMENTS):
        out.append(("experiments", f"no training experiment enabled; give at least one of "
                                   f"{', '.join(TRAINING_EXPERIMENTS)}"))
    strong = _enabled(exps, "strong")
    if strong:
        has_g, has_r = "global_batch" in strong, "batch_per_rank" in strong
        if has_g == has_r:
            out.append(("experiments.strong", "give exactly one of global_batch (fixed global batch) "
                                              "or batch_per_rank (fixed per-rank batch, the paper's way)"))
        elif has_g:
            for i, topo in enumerate(strong["topologies"]):
                if strong["global_batch"] % _world(topo):
                    out.append(("experiments.strong.global_batch",
                                f"{strong['global_batch']} is not divisible by the world size {_world(topo)} of "
                                f"topologies[{i}]; use a multiple of every world size"))
    for name in EXPERIMENTS:
        e = _enabled(exps, name)
        if not e or "topologies" not in e:
            continue
        seen: dict = {}
        for i, topo in enumerate(e["topologies"]):
            key = (topo["nodes"], topo["gpus_per_node"])
            if key in seen:
                out.append((f"experiments.{name}.topologies[{i}]",
                            f"{topo['nodes']} x {topo['gpus_per_node']} is the same placement as "
                            f"topologies[{seen[key]}]; list each placement once (repeats: measures it again)"))
            seen.setdefault(key, i)
    m = cfg["model"]
    if "pykan" in m["impl"] and "bspline" not in m["basis"]:
        out.append(("model.basis", f"{m['basis']} has no basis pykan has: impl pykan is B-spline only (allowed for "
                                   f"pykan: 'bspline'); add bspline to model.basis, or take pykan out of model.impl"))
    r = cfg["repeats"]
    if isinstance(r, dict) and r["max"] < r["min"]:
        out.append(("repeats.max", f"{r['max']} is below repeats.min = {r['min']}; max is the most repeats a "
                                   f"point may get, min the first look's"))
    lo, hi = cfg["model"]["grid_range"]
    if not hi > lo:
        out.append(("model.grid_range", f"[{lo}, {hi}] must have hi > lo"))
    # report.expect's grammar: a typo in a metric name stops the run before any point is measured
    out.extend(expectation_problems(cfg["report"].get("expect")))
    if len(cfg["model"]["widths"]) < 3:
        out.append(("model.widths", f"{cfg['model']['widths']} needs a hidden layer (input, hidden..., output): "
                                    f"the model_size experiment sweeps the hidden width"))
    if out:
        return out
    problems: list = []
    parts = _parts(cfg, problems)
    if not problems:
        limits = parts["limits"]
        for i, w in enumerate(cfg["model"]["widths"]):
            if w > limits.max_width:
                problems.append((f"model.widths[{i}]", f"{w} is above limits.max_width = {limits.max_width}; raise "
                                                       f"limits.max_width in the study config if your cluster really "
                                                       f"needs it"))
        for name in EXPERIMENTS:
            e = _enabled(exps, name) or {}
            for i, topo in enumerate(e.get("topologies", [])):
                for key, bound in (("nodes", "max_nodes"), ("gpus_per_node", "max_ranks_per_node")):
                    if topo[key] > getattr(limits, bound):
                        problems.append((f"experiments.{name}.topologies[{i}].{key}",
                                         f"{topo[key]} is above limits.{bound} = {getattr(limits, bound)}; raise "
                                         f"limits.{bound} in the study config if your cluster really needs it"))
        ms = _enabled(exps, "model_size")
        for i, h in enumerate(ms["hidden_widths"] if ms else []):
            if h > limits.max_width:
                problems.append((f"experiments.model_size.hidden_widths[{i}]",
                                 f"{h} is above limits.max_width = {limits.max_width}; raise limits.max_width in the "
                                 f"study config if your cluster really needs it"))
        rp = repeat_plan(cfg)
        if rp.max > limits.max_repeats:
            problems.append(("repeats", f"{rp.max} is above limits.max_repeats = {limits.max_repeats}"))
        if not problems:
            _plan_points(cfg, parts, problems)
    # the same problem at several points (a point and its repeats, its non-DDP baseline): say it once
    seen, unique = set(), []
    for key, msg in problems:
        if msg not in seen:
            seen.add(msg)
            unique.append((key, msg))
    return unique


# ---- the points ---------------------------------------------------------------------------------

def _training_rows(cfg: dict) -> list[tuple[str, list[int] | None, dict, int, int, bool]]:
    """(experiment, widths, topology, samples, batch_per_rank, ddp) of every training placement."""
    exps, base = cfg["experiments"], list(cfg["model"]["widths"])
    rows = []
    one = {"nodes": 1, "gpus_per_node": 1}
    s = _enabled(exps, "strong")
    if s:
        for topo in s["topologies"]:
            bpr = s["batch_per_rank"] if "batch_per_rank" in s else s["global_batch"] // _world(topo)
            rows.append(("strong", base, topo, s["samples"], bpr, True))
        if s["non_ddp_baseline"]:
            bpr = s.get("batch_per_rank") or s["global_batch"]
            rows.append(("strong", base, one, s["samples"], bpr, False))
    w = _enabled(exps, "weak")
    if w:
        for topo in w["topologies"]:
            rows.append(("weak", base, topo, w["samples_per_rank"] * _world(topo), w["batch_per_rank"], True))
        if w["non_ddp_baseline"]:
            rows.append(("weak", base, one, w["samples_per_rank"], w["batch_per_rank"], False))
    c = _enabled(exps, "comm")
    if c:
        for topo in c["topologies"]:
            rows.append(("comm", base, topo, c["samples"], c["batch_per_rank"], True))
    m = _enabled(exps, "model_size")
    if m:
        for h in m["hidden_widths"]:
            widths = [base[0]] + [h] * (len(base) - 2) + [base[-1]]
            rows.append(("model_size", widths, m["topology"], m["samples"], m["batch_per_rank"], True))
    return rows


# DDP's defaults: the `none` setting every other one is judged against (scaling/ddp_table.py)
DDP_DEFAULTS = {"comm_hook": "none", "bucket_cap_mb": 25.0, "static_graph": False, "gradient_as_bucket_view": False,
                "nccl_algo": ""}


def ddp_settings(cfg: dict) -> list[dict]:
    """TrainConfig fields of every combination of the ddp experiment's lists, in config order, and
    DDP's defaults first when no combination is them: every setting is judged against them."""
    d = _enabled(cfg["experiments"], "ddp")
    if not d:
        return []
    fixed = {"powersgd_rank": d["powersgd_rank"], "powersgd_start_iter": d["powersgd_start_iter"]}
    # YAML's 25 is an int; the trainer parses --bucket-cap-mb=25 as 25.0: the same float on both
    # sides, or the record's point id (a hash of the fields) would not be the planned one
    lists = {**{k: d[k] for k in DDP_LISTS}, "bucket_cap_mb": [float(x) for x in d["bucket_cap_mb"]]}
    combos = [dict(zip(DDP_LISTS, combo)) for combo in itertools.product(*(lists[k] for k in DDP_LISTS))]
    if DDP_DEFAULTS not in combos:
        combos.insert(0, dict(DDP_DEFAULTS))
    return [{**c, **fixed} for c in combos]


def allreduce_topologies(cfg: dict) -> list[dict]:
    """The allreduce experiment's placements: its own list, else every distinct multi-rank topology of
    the enabled training experiments (a one-rank all-reduce moves nothing)."""
    a = _enabled(cfg["experiments"], "allreduce")
    if not a:
        return []
    if "topologies" in a:
        return [t for t in a["topologies"] if _world(t) > 1]
    seen, out = set(), []
    d = _enabled(cfg["experiments"], "ddp")
    for topo in [t for _, _, t, _, _, _ in _training_rows(cfg)] + ([d["topology"]] if d else []):
        key = (topo["nodes"], topo["gpus_per_node"])
        if _world(topo) > 1 and key not in seen:
            seen.add(key)
            out.append(topo)
    return out


def links(cfg: dict, topo: dict) -> list[dict]:
    """Placement fields of the emulated links a topology is measured over: one per configured rate
    for a point of 2 or more nodes when network.emulate is on, else none ([{}])."""
    net = cfg.get("network") or {}
    if not net.get("emulate") or topo["nodes"] < 2:
        return [{}]
    return [{"link_mbit": float(r), "link_burst_kb": float(net.get("burst_kb", 32)),
             "link_latency_us": float(net.get("latency_us", 0))} for r in net.get("rates_mbit", [100, 400])]


def _plan_points(cfg: dict, parts: dict, problems: list | None = None) -> dict[str, Point]:
    points: dict[str, Point] = {}
    placement_base, train_base, limits = parts["placement"], parts["train"], parts["limits"]

    def add(where: str, **kw) -> None:
        try:
            pt = Point(study=cfg["study"], limits=limits, **kw)
        except PointError as e:
            if problems is None:
                raise ConfigError(f"{where}: {e}") from None
            problems.append((where, str(e)))
            return
        points[pt.id] = pt

    for experiment, widths, topo, samples, bpr, ddp in _training_rows(cfg):
        # limits (nodes, ranks per node) are checked by Point, with the point's context
        train = TrainConfig(**train_base, samples=samples, batch_per_rank=bpr, ddp=ddp)
        for link in links(cfg, topo):
            place = Placement(**placement_base, nodes=topo["nodes"], gpus_per_node=topo["gpus_per_node"], **link)
            for mc in parts["models"]:
                model = dataclasses.replace(mc, widths=tuple(widths))
                for rep in range(repeat_plan(cfg).max):
                    add(f"experiments.{experiment} ({topo['nodes']}x{topo['gpus_per_node']}"
                        f"{'' if ddp else ', non-DDP baseline'})", experiment=experiment, rep=rep, model=model,
                        train=train, placement=place)
    d = _enabled(cfg["experiments"], "ddp")
    for setting in ddp_settings(cfg):
        topo = d["topology"]
        train = TrainConfig(**{**train_base, **setting}, samples=d["samples"], batch_per_rank=d["batch_per_rank"])
        for link in links(cfg, topo):
            place = Placement(**placement_base, nodes=topo["nodes"], gpus_per_node=topo["gpus_per_node"], **link)
            for mc in parts["models"]:
                for rep in range(repeat_plan(cfg).max):
                    add(f"experiments.ddp ({train.ddp_label})", experiment="ddp", rep=rep, model=mc, train=train,
                        placement=place)
    a = _enabled(cfg["experiments"], "allreduce")
    if a:
        sweep = AllreduceConfig(**_kwargs(cfg, AllreduceConfig))
        for topo, link in ((t, k) for t in allreduce_topologies(cfg) for k in links(cfg, t)):
            place = Placement(**placement_base, nodes=topo["nodes"], gpus_per_node=topo["gpus_per_node"], **link)
            for rep in range(repeat_plan(cfg).max):
                add(f"experiments.allreduce ({topo['nodes']}x{topo['gpus_per_node']})", experiment="allreduce",
                    rep=rep, placement=place, allreduce=sweep)
    return points


def repeat_plan(cfg: dict) -> RepeatPlan:
    """The study's repeats (fixed, or adaptive with looks) and its deciding intervals' level."""
    return RepeatPlan.from_config(cfg["repeats"], float(cfg["report"].get("alpha", 0.05)))


def initial_points(cfg: dict, points: dict[str, Point]) -> list[str]:
    """The points every study measures: repeats below repeats.min (all of them with fixed repeats)."""
    rp = repeat_plan(cfg)
    return [pid for pid, p in points.items() if p.rep < rp.min]


def build_points(cfg: dict) -> dict[str, Point]:
    """Every measurement point of a validated config, keyed by id, in a stable order."""
    problems: list = []
    parts = _parts(cfg, problems)
    if problems:
        raise ConfigError("; ".join(f"{k}: {m}" for k, m in problems))
    return _plan_points(cfg, parts)


def points_json(points: dict[str, Point]) -> str:
    """The planned points as one JSON text, one point per line (results/<study>/plan/points.json)."""
    return "[\n" + ",\n".join(json.dumps(p.to_json(), sort_keys=True) for p in points.values()) + "\n]\n"


def points_digest(points: dict[str, Point]) -> str:
    return hashlib.sha256(points_json(points).encode()).hexdigest()[:16]


def launch_settings(cfg: dict) -> LaunchSettings:
    return LaunchSettings(**_kwargs(cfg, LaunchSettings))


def limits(cfg: dict) -> Limits:
    return Limits(**_kwargs(cfg, Limits))


def load_config(path: str | Path, overrides: dict | None = None) -> dict:
    """Read (strictly) and validate one YAML study config file, with --config style overrides."""
    cfg = read_yaml(path)
    if overrides:
        _merge(cfg, overrides)
    return validate_config(cfg, source=str(path), overrides=overrides)


def _merge(base: dict, top: dict) -> None:
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)


# ---- cost: estimates and derived time limits ----------------------------------------------------

# the rules that turn records into the report (what `make report` may run; never measure_point)
ANALYSIS_RULES = ("write_plan", "collect_measurements", "compute_tables", "fit_model", "compute_guidelines", "plot_figures",
                  "evaluate_expectations", "render_report", "all")
DEFAULT_OVERHEAD_S = 30.0  # start-up + teardown of a point when no measured job says otherwise
ESTIMATE_RULE = ("minutes = (steps x median synced step time of ok records with the same model, placement, "
                 "per-rank batch, device and threads + median job overhead) / 60")


def _step_key(p: Point) -> str:
    """What a step's time depends on (not samples or epochs)."""
    import json

    return json.dumps([p.model.measured(), p.train.batch_per_rank, p.train.ddp, p.placement.nodes,
                       p.placement.gpus_per_node, p.placement.device, p.placement.threads_per_rank],
                      sort_keys=True)


def _num_steps(p: Point) -> int:
    t, world = p.train, p.placement.world_size
    per_epoch = -(-(-(-t.samples // world)) // t.batch_per_rank)
    return min(t.epochs * per_epoch, t.max_steps) if t.max_steps else t.epochs * per_epoch


def measured_steps(folders: list[Path]) -> tuple[dict[str, list[float]], list[float]]:
    """({step key: synced step times of ok training records}, [job overhead seconds]) in `folders`
    (results/<study> folders)."""
    import csv

    times: dict[str, list[float]] = {}
    overheads: list[float] = []
    for folder in folders:
        for path in sorted((folder / "points").glob("*.json")):
            try:
                rec = records.read(path, path.stem)
                pt = Point.from_json(rec["point"])
            except (records.InvalidRecord, PointError, ValueError, TypeError):
                continue
            if rec["status"] != "ok" or pt.experiment == "allreduce":
                continue
            times.setdefault(_step_key(pt), []).append(rec["timing"]["step_time_s"])
            bench = folder / "benchmarks" / f"{path.stem}.tsv"
            try:
                with open(bench) as f:
                    wall = float(list(csv.DictReader(f, delimiter="\t"))[-1]["s"])
                overheads.append(wall - rec["timing"]["train_time_s"])
            except (OSError, KeyError, IndexError, ValueError):
                pass
    return times, overheads


def point_runtimes(cfg: dict, points: dict[str, Point], workdir: Path = Path(".")) -> dict[str, dict]:
    """{id: {runtime_min, source, estimated_min}}: the time limit each point's job asks for. An explicit
    resources.runtime_min wins; else with plan.derive_runtime, safety_factor x the estimate (at least
    min_runtime_min) where there is one; else LaunchSettings' default."""
    pc = cfg["plan"]
    explicit = cfg["resources"]["runtime_min"]
    default = LaunchSettings().runtime_min
    folders = [workdir / "results" / cfg["study"], *(workdir / f for f in pc["estimate_from"])]
    times, overheads = measured_steps(folders)
    overhead = sorted(overheads)[len(overheads) // 2] if overheads else DEFAULT_OVERHEAD_S
    out = {}
    for pid, p in points.items():
        est = None
        ts = times.get(_step_key(p)) if p.experiment != "allreduce" else None
        if ts:
            est = (_num_steps(p) * sorted(ts)[len(ts) // 2] + overhead) / 60
        if explicit is not None:
            out[pid] = {"runtime_min": explicit, "source": "resources.runtime_min", "estimated_min": est}
        elif pc["derive_runtime"] and est is not None:
            minutes = max(pc["min_runtime_min"], math.ceil(pc["safety_factor"] * est))
            out[pid] = {"runtime_min": min(minutes, 10080), "source": f"{pc['safety_factor']:g} x estimate",
                        "estimated_min": est}
        else:
            out[pid] = {"runtime_min": default, "source": "default", "estimated_min": est}
    return out


# ---- re-runs ------------------------------------------------------------------------------------

def record_state(path: str | Path) -> tuple[str, dict | str | None]:
    """("missing", None) | ("corrupt", reason) | (status, record) of a point's record file."""
    path = Path(path)
    if not path.exists():
        return "missing", None
    try:
        rec = records.read(path, point_id=path.stem)
    except records.InvalidRecord as e:
        return "corrupt", str(e)
    return rec["status"], rec


def retry_token(record_path: str | Path, rerun_failed: bool = True) -> str:
    """A Snakemake param that changes exactly when a point should run again although its record
    exists: Snakemake re-runs a job whose params differ from the ones it last ran with.
    - no record yet, or an ok record: the token the record was written with ("" at first), so
      finished points never re-run;
    - an invalid record (empty, truncated, hand-edited, another point's): a token naming its bytes,
      always re-run;
    - a failed/oom/timeout/cancelled/killed record (and rerun_failed): a token naming that attempt."""
    path = Path(record_path)
    state, rec = record_state(path)
    if state == "missing":
        return ""
    if state == "corrupt":
        try:
            digest = hashlib.sha1(path.read_bytes()).hexdigest()[:12]
        except OSError:
            digest = "unreadable"
        return f"retry-after-corrupt-{digest}"
    launch = rec.get("launch") or {}
    if rerun_failed and state != "ok":
        return f"retry-after-{state}-{rec['finished_utc']}-{launch.get('attempt', '')}"
    return str(launch.get("retry_token") or "")
