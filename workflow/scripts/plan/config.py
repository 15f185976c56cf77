"""A study config from its YAML file: read strictly (a key given twice is an error), merged with
--config values, validated (the schema, its defaults filled, then plan/checks.py), and the warnings
a valid config earns. Every ConfigError names the file (or "--config" for command-line values),
the key and what is allowed.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from .checks import semantic_problems
from .factories import notes, resolve_paths
from .imports import match, read_runs
from .points import allreduce_topologies, build_points, repeat_plan, training_rows
from .schema import ConfigError, Validator, load_schema, message


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
                    overrides: dict | None = None, files: list | None = None) -> dict:
    """Validate `config` in place (defaults filled) and return it, or raise ConfigError with one line
    per problem: '<file or --config>: <key>: <what is wrong and what is allowed>'. `overrides` are the
    values given with --config (they are blamed on --config, not on the file). `files`: the config
    files as read, [(path, mapping)], layered in order: model.impl's relative factory paths are
    relative to the file that names them (plan/factories.py; without files, to the working folder)."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys, got {type(config).__name__}")
    sources = {"file": source, "overrides": overrides}
    schema = load_schema() if schema is None else schema
    errors = sorted(Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [f"{_source_of(list(e.absolute_path), sources)}: {message(e)}" for e in errors]
    if not problems:
        resolve_paths(config, files or [])
        problems = [f"{_source_of(_key_path(key), sources)}: {key}: {msg}" for key, msg in semantic_problems(config)]
    if not problems and config.get("import"):
        problems = [f"{_source_of(['import'], sources)}: import: {msg}" for msg in import_problems(config)]
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} problems in the study config:\n  " + "\n  ".join(problems))
    return config


def load_config(path: str | Path, overrides: dict | None = None) -> dict:
    """Read (strictly) and validate one YAML study config file, with --config style overrides."""
    raw = read_yaml(path)
    cfg = copy.deepcopy(raw)
    if overrides:
        _merge(cfg, overrides)
    return validate_config(cfg, source=str(path), overrides=overrides, files=[(path, raw)])


def _merge(base: dict, top: dict) -> None:
    """`top` into `base`, mapping by mapping (as Snakemake merges --config into the config file)."""
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)


def config_warnings(cfg: dict) -> list[str]:
    """What a valid config does that its author may not expect, one line each (the workflow logs
    them at start, `make check` prints them)."""
    m, out = cfg["model"], []
    others = [b for b in m["basis"] if b != "bspline"]
    if "pykan" in m["impl"] and others:
        out.append(f"model.basis {others}: pykan has B-spline edges only, so its points use bspline; "
                   f"{', '.join(others)} run for impl kanscale only")
    out += notes(m["impl"])  # a factory that needs CUDA, checked on meta or not at all here
    if cfg["network"]["emulate"]:
        multi = [t for _, _, t, _, _, _ in training_rows(cfg) if t["nodes"] > 1] + [
            t for t in allreduce_topologies(cfg) if t["nodes"] > 1]
        out.append("network.emulate: points of 2 or more nodes run on an emulated cluster of this host (root, "
                   "Linux, iproute2): under profiles/local, or a test Slurm started with SLURM_LOCAL_EMULATE=1; "
                   "elsewhere they are recorded as failed with the reason"
                   + ("" if multi else "; no topology here has 2 or more nodes, so nothing is emulated"))
    return out


def import_problems(config: dict) -> list[str]:
    """What stops the config's `import:` source from giving every planned point its run (plan/imports.py):
    a bad file (named with its row and column), a point without a run, a run without a point, repeats
    that are not a fixed number (each repeat is one run: nothing is left to measure)."""
    rp = repeat_plan(config)
    if rp.min != rp.max:
        return [f"repeats: {{min: {rp.min}, max: {rp.max}}} asks for repeats measured as needed, but a study of "
                f"imported runs measures nothing: give a number (repeats: N, the runs of each configuration, "
                f"the table's repeat column 0 to N - 1)"]
    try:
        match(build_points(config), read_runs(config["import"]), config["import"]["path"])
    except ConfigError as e:
        return [str(e)]
    return []
