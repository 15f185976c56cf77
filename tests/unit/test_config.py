"""Config validation: defaults filled, and every bad input gets one line naming the file (or
--config) and the key; every schema key has a description, and a default or bound stated both in the
schema and in code (kan.contract.point's dataclasses) agrees, with no literal fallback for a schema default."""

import ast
import copy
import dataclasses
import fnmatch
import re
from pathlib import Path

import pytest
import yaml

import plan
from kan.contract.point import BASES, EXPERIMENTS, IMPLS, ModelConfig, Placement, Point, TrainConfig

MINIMAL = {"experiments": {"strong": {"global_batch": 64, "topologies": [{"nodes": 1, "gpus_per_node": 2}]}}}


def test_defaults_filled():
    cfg = plan.validate_config(copy.deepcopy(MINIMAL))
    assert cfg["model"]["impl"] == ["kanscale"]
    assert cfg["model"]["grid_size"] == 10
    assert cfg["training"]["epochs"] == 40
    assert cfg["timeouts"]["rdzv_join_s"] == 60
    assert cfg["experiments"]["strong"]["samples"] == 100000
    assert cfg["experiments"]["strong"]["enabled"] is True
    assert cfg["experiments"]["strong"]["non_ddp_baseline"] is True
    assert cfg["resources"]["exclusive"] is True


def _strong(**over):
    return {"experiments": {"strong": {"samples": 1000, "global_batch": 64,
                                       "topologies": [{"nodes": 1, "gpus_per_node": 2}], **over}}}


# (patch merged into MINIMAL, key the one-line message must name, text it must contain)
BAD = [
    ({"launcher": "mpirun"}, "launcher", "'torchrun', 'srun'"),
    ({"model": {"basis": ["fourier"]}}, "model.basis[0]", "'bspline', 'rbf', 'chebyshev'"),
    ({"model": {"impl": ["pykan2"]}}, "model.impl[0]", "'kanscale', 'mlp', 'mlp_matched'"),
    ({"model": {"impl": ["pykan"], "basis": ["rbf"]}}, "model.basis", "allowed for pykan: 'bspline'"),
    ({"devcie": "cpu"}, "<top level>", "allowed keys:"),
    ({"training": {"epochs": 0}}, "training.epochs", "minimum of 1"),
    ({"training": {"comm_probe_every": 1}}, "training.comm_probe_every", "not allowed"),
    ({"training": {"lr_scaling": "cubic"}}, "training.lr_scaling", "'none', 'linear', 'sqrt'"),
    ({"training": {"lr_reference_batch": 0, "lr_scaling": "linear"}}, "training.lr_reference_batch", "minimum of 1"),
    ({"training": {"lr_reference_batch": 256}}, "training.lr_reference_batch", "only with lr_scaling linear"),
    ({"training": {"lr_warmup_samples": -1}}, "training.lr_warmup_samples", "minimum of 0"),
    (_strong(topologies=[{"nodes": 0, "gpus_per_node": 1}]), "experiments.strong.topologies[0].nodes", "minimum of 1"),
    ({"experiments": {"weak": {"batch_per_rank": 8}}}, "experiments.weak", "'topologies' is a required property"),
    ({"device": "tpu"}, "device", "'auto', 'cpu', 'cuda'"),
    ({"study": "my study"}, "study", "does not match"),
    ({"model": {"grid_size": 10.0}}, "model.grid_size", "not an integer"),
    ({"repeats": 2.5}, "repeats", "not an integer"),
    ({"training": {"lr": float("nan")}}, "training.lr", "not a finite number"),
    ({"training": {"noise": float("inf")}}, "training.noise", "not a finite number"),
    ({"model": {"grid_range": [float("-inf"), 2.0]}}, "model.grid_range[0]", "not a finite number"),
    ({"training": {"seed": 2**63}}, "training.seed", "maximum"),
    ({"training": {"seed": -1}}, "training.seed", "minimum"),
    (_strong(topologies=[{"nodes": 100000, "gpus_per_node": 1}], global_batch=100000, samples=10**6),
     "experiments.strong.topologies[0].nodes", "limits.max_nodes"),
    ({"model": {"widths": [2, 10000000, 1]}}, "model.widths[1]", "limits.max_width"),
    (_strong(samples=100, global_batch=512, topologies=[{"nodes": 1, "gpus_per_node": 1}]),
     "experiments.strong (1x1)", "more than the 100 samples per rank"),
    (_strong(samples=3, global_batch=4, topologies=[{"nodes": 1, "gpus_per_node": 4}], non_ddp_baseline=False),
     "experiments.strong (1x4)", "3 samples cannot feed 4 ranks"),
    (_strong(topologies=[{"nodes": 1, "gpus_per_node": 2}, {"nodes": 1, "gpus_per_node": 2}]),
     "experiments.strong.topologies[1]", "same placement as topologies[0]"),
    ({"model": {"widths": [2, 16, 2]}}, "model.widths", "1 target"),
    ({"model": {"widths": [2, 1]}}, "model.widths", "is too short"),
    ({**_strong(samples=256, global_batch=64), "training": {"warmup_steps": 1000, "epochs": 1}},
     "experiments.strong (1x2)", "no timed step would remain"),
    ({"experiments": {**MINIMAL["experiments"], "model_size": {"hidden_widths": [8, 70000]}}},
     "experiments.model_size.hidden_widths[1]", "limits.max_width"),
    ({"repeats": 0}, "repeats", "minimum of 1"),
    (_strong(batch_per_rank=32), "experiments.strong", "give exactly one of global_batch"),
    (_strong(global_batch=63), "experiments.strong.global_batch", "not divisible by the world size 2"),
    ({"model": {"grid_range": [2.0, -2.0]}}, "model.grid_range", "hi > lo"),
    ({"resources": {"runtime_min": 0}}, "resources.runtime_min", "minimum of 1"),
    ({"gpu_type": "a100;rm"}, "gpu_type", "does not match"),
    ({"experiments": {**MINIMAL["experiments"], "allreduce": {"sizes_bytes": [4096, 1001]}}},
     "experiments.allreduce.sizes_bytes[1]", "multiple of 4"),
    ({"limits": {"max_width": 0}}, "limits.max_width", "minimum of 1"),
    ({"experiments": {"strong": {"enabled": False, "global_batch": 64,
                                 "topologies": [{"nodes": 1, "gpus_per_node": 1}]}}}, "experiments",
     "no training experiment enabled"),
]


@pytest.mark.parametrize("patch, key, text", BAD, ids=[b[1] for b in BAD])
def test_bad_config_one_line_naming_file_and_key(patch, key, text):
    cfg = copy.deepcopy(MINIMAL)
    cfg.update(copy.deepcopy(patch))
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="config/x.yaml")
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"config/x.yaml: {key}:"), msg
    assert text in msg, msg


def test_values_from_the_command_line_are_blamed_on_it():
    cfg = copy.deepcopy(MINIMAL)
    cfg["training"] = {"epochs": 0}
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="config/x.yaml", overrides={"training": {"epochs": 0}})
    assert str(e.value).startswith("--config: training.epochs:"), e.value
    cfg = copy.deepcopy(MINIMAL)
    cfg["model"] = {"grid_size": 0}
    with pytest.raises(plan.ConfigError) as e:  # a file value with an unrelated --config value
        plan.validate_config(cfg, source="config/x.yaml", overrides={"study": "other"})
    assert str(e.value).startswith("config/x.yaml: model.grid_size:"), e.value


@pytest.mark.parametrize("text, problem", [
    ("", "the config file is empty"),
    ("- strong\n- weak\n", "must be a mapping of keys"),
    ("3\n", "must be a mapping of keys"),
    ("model: [unclosed\n", "not valid YAML"),
    ("study: a\nstudy: b\n", "duplicate key 'study'"),
    ("model:\n  grid_size: 5\n  grid_size: 6\n", "duplicate key 'grid_size'"),
])
def test_bad_files_are_named(tmp_path, text, problem):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(plan.ConfigError) as e:
        plan.load_config(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}:") and problem in msg and "\n" not in msg, msg


def test_missing_file_is_named(tmp_path):
    with pytest.raises(plan.ConfigError, match="missing.yaml: config file not found"):
        plan.load_config(tmp_path / "missing.yaml")


def test_several_problems_are_listed_one_per_line():
    cfg = copy.deepcopy(MINIMAL)
    cfg.update({"launcher": "mpirun", "device": "tpu"})
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="c.yaml")
    lines = str(e.value).splitlines()
    assert lines[0] == "2 problems in the study config:"
    assert [ln.strip().split(":")[1].strip() for ln in lines[1:]] == ["device", "launcher"]


# ---- one source of truth: the schema states every default, bound and description -----------------

def schema_keys(schema: dict) -> dict[str, dict]:
    """{key: schema node} of every key of the schema: nested properties, both forms of a oneOf
    (repeats: an integer, or the mapping whose keys are repeats.min ...), the properties of array
    items (report.expect[].metric) and the shared $defs ($defs.topology.nodes)."""
    out: dict[str, dict] = {}

    def walk(node: dict, key: str) -> None:
        if key:
            out[key] = node
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, f"{key}.{name}" if key else name)
        for branch in node.get("oneOf", []) + node.get("anyOf", []):
            for name, sub in (branch.get("properties") or {}).items():
                walk(sub, f"{key}.{name}")
        items = node.get("items")
        if isinstance(items, dict) and items.get("properties"):
            for name, sub in items["properties"].items():
                walk(sub, f"{key}[].{name}")

    for name, sub in schema["$defs"].items():
        walk(sub, f"$defs.{name}")
    walk(schema, "")
    return out


def _resolve(schema: dict, node: dict) -> dict:
    """A node with its $ref's bounds (the node's own keys win)."""
    if "$ref" not in node:
        return node
    target = schema
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return {**_resolve(schema, target), **{k: v for k, v in node.items() if k != "$ref"}}


# config keys whose value reaches a dataclass field through the points' expansion (plan/points.py),
# not as is (those are plan.CONFIG_FIELDS): (dataclass, field, what the schema states twice with it).
# "default": the default and the bounds; "bounds": the bounds only (a comm point's samples default
# is not the trainer's); "maximum": only the upper bound (a link rate of 0 means "not emulated" to
# Placement, and is no rate in the config).
EXPANDED_FIELDS = {
    "study": (Point, "study", "default"),
    "model.impl": (ModelConfig, "impl", "default"), "model.basis": (ModelConfig, "basis", "default"),
    **{f"experiments.ddp.{f}": (TrainConfig, f, "default")
       for f in ("comm_hook", "bucket_cap_mb", "static_graph", "gradient_as_bucket_view", "nccl_algo",
                 "powersgd_rank", "powersgd_start_iter", "cuda_graphs")},
    "network.rates_mbit": (Placement, "link_mbit", "maximum"),
    "network.burst_kb": (Placement, "link_burst_kb", "default"),
    "network.latency_us": (Placement, "link_latency_us", "default"),
    "$defs.topology.nodes": (Placement, "nodes", "bounds"),
    "$defs.topology.gpus_per_node": (Placement, "gpus_per_node", "bounds"),
    "$defs.batch_size": (TrainConfig, "batch_per_rank", "bounds"),
    **{f"experiments.{e}.batch_per_rank": (TrainConfig, "batch_per_rank", "default")
       for e in ("weak", "comm", "model_size", "ddp")},
    "experiments.strong.samples": (TrainConfig, "samples", "default"),
    **{f"experiments.{e}.samples": (TrainConfig, "samples", "bounds") for e in ("comm", "model_size", "ddp", "batch")},
    "experiments.weak.samples_per_rank": (TrainConfig, "samples", "bounds"),
    # null = the experiment's one-rank global batch, resolved per point (plan.points.lr_reference); 0
    # means "no reference" to TrainConfig and is no batch in the config
    "training.lr_reference_batch": (TrainConfig, "lr_reference_batch", "maximum"),
    # the candidates of lr: tuned reach the points as TrainConfig.lr (one per sweep point) and as
    # lr_tuned_from (what a tuned point's id hashes); () there means "not tuned"
    "training.lr_candidates": (TrainConfig, "lr_tuned_from", "bounds"),
}
# keys whose default and bounds only the schema states: code reads them from the validated config
# (test_no_literal_fallback_for_a_schema_default proves it has no second copy)
SCHEMA_ONLY = ("$defs.topologies", "$defs.topology", "repeats", "repeats.*", "rerun_failed", "partial",
               "model", "training", "experiments", "experiments.*.enabled", "experiments.*.topologies",
               "experiments.*.non_ddp_baseline", "experiments.strong", "experiments.weak", "experiments.comm",
               "experiments.model_size", "experiments.model_size.hidden_widths", "experiments.batch",
               "experiments.batch.global_batches",
               "experiments.model_size.topology", "experiments.ddp", "experiments.ddp.topology",
               "experiments.strong.global_batch", "experiments.strong.batch_per_rank", "experiments.allreduce",
               "plan", "plan.*", "limits", "resources", "timeouts", "network", "network.emulate", "report",
               "report.*",
               # runs measured elsewhere: read by plan/imports.py, each matched to a point, never a point's field
               "import", "import.*",
               # data.path becomes an absolute path, data.equations one DataConfig per equation (plan/data_section.py)
               "data", "data.path", "data.equations",
               # how points are grouped into Slurm allocations, read by plan/packs.py, not a point's field
               "resources.pack", "resources.pack.*",
               # the readiness check's own steps and batch (plan/points.py sets its points' fields from them)
               "experiments.readiness", "experiments.readiness.*",
               # the plan's limit on a factory's check (plan/factories.py), not a point's field
               "model.factory_check_timeout_s")
_BOUNDS = (("lo", "minimum"), ("gt", "exclusiveMinimum"), ("hi", "maximum"))


def _field(cls, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def disagreements(schema: dict) -> list[str]:
    """Every default, bound or choice stated both in the schema and in code that differs, one line
    each (an empty list: the two agree)."""
    keys = schema_keys(schema)
    table = {key: (cls, name, "direct") for key, (cls, name) in plan.CONFIG_FIELDS.items()} | EXPANDED_FIELDS
    out = []
    for key, (cls, name, what) in table.items():
        node, f = _resolve(schema, keys[key]), _field(cls, name)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        code = list(default) if isinstance(default, tuple) else default
        if node.get("type") == "array" and not isinstance(code, list):
            code = [code]  # a list of the field's values (the ddp experiment's), by default only the field's own
        if key == "resources.runtime_min":
            code = None  # null = the dataclass default, or derived (plan.derive_runtime)
        if what in ("direct", "default") and node.get("default") != code:
            out.append(f"{key}: default {node.get('default')!r} in the schema, {code!r} in {cls.__name__}.{name}")
        items = _resolve(schema, node["items"]) if node.get("type") == "array" else node
        pairs = _BOUNDS[2:] if what == "maximum" else _BOUNDS
        for meta_key, schema_key in pairs:
            stated, bound = f.metadata.get(meta_key), items.get(schema_key)
            if stated is not None and stated != bound:
                out.append(f"{key}: {schema_key} {bound!r} in the schema, {meta_key}={stated!r} in "
                           f"{cls.__name__}.{name}")
        # model.impl: the built-ins are one branch of anyOf (the other is your own factory)
        items = next((b for b in items.get("anyOf", ()) if "enum" in b), items)
        if f.metadata.get("choices") and tuple(items.get("enum", ())) != f.metadata["choices"]:
            out.append(f"{key}: enum {items.get('enum')} in the schema, {f.metadata['choices']} in {cls.__name__}.{name}")
    if set(schema["properties"]["experiments"]["properties"]) != set(EXPERIMENTS):
        out.append(f"experiments: {sorted(schema['properties']['experiments']['properties'])} in the schema, "
                   f"kan.contract.point.EXPERIMENTS = {EXPERIMENTS}")
    return out


def test_every_schema_key_has_a_description():
    missing = [key for key, node in schema_keys(plan.load_schema()).items() if not node.get("description")]
    assert not missing, f"schema keys without a description: {missing}"


def test_every_schema_key_is_stated_once_or_agrees():
    """Each key is either mapped onto the code that also states its default or bounds (and agrees
    with it), or stated in the schema alone."""
    schema = plan.load_schema()
    mapped = set(plan.CONFIG_FIELDS) | set(EXPANDED_FIELDS)
    unclassified = [key for key in schema_keys(schema)
                    if key not in mapped and not any(fnmatch.fnmatchcase(key, pat) for pat in SCHEMA_ONLY)]
    assert not unclassified, f"schema keys neither mapped onto code nor SCHEMA_ONLY: {unclassified}"
    assert disagreements(schema) == []


@pytest.mark.parametrize("key, change, reported", [
    ("network.burst_kb", {"default": 64}, "network.burst_kb: default 64"),
    ("experiments.ddp.comm_hook", {"default": ["fp16"]}, "experiments.ddp.comm_hook: default ['fp16']"),
    ("experiments.ddp.bucket_cap_mb", {"default": [50]}, "experiments.ddp.bucket_cap_mb: default [50]"),
    ("training.epochs", {"minimum": 2}, "training.epochs: minimum 2"),
    ("limits.max_width", {"default": 100}, "limits.max_width: default 100"),
    ("network.rates_mbit", {"items": {"type": "number", "maximum": 5}}, "network.rates_mbit: maximum 5"),
    ("model.impl", {"items": {"enum": ["kanscale", "mlp"]}}, "model.impl: enum"),
    ("$defs.topology.nodes", {"minimum": 0}, "$defs.topology.nodes: minimum 0"),
])
def test_a_default_stated_twice_that_differs_is_reported(key, change, reported):
    schema = copy.deepcopy(plan.load_schema())
    schema_keys(schema)[key].update(change)
    assert any(line.startswith(reported) for line in disagreements(schema)), disagreements(schema)


def test_a_dataclass_default_that_differs_from_the_schema_is_reported(monkeypatch):
    monkeypatch.setattr(_field(Placement, "link_burst_kb"), "default", 16.0)
    monkeypatch.setattr(_field(TrainConfig, "comm_hook"), "default", "fp16")
    lines = disagreements(plan.load_schema())
    assert any(line.startswith("network.burst_kb: default 32 in the schema, 16.0") for line in lines), lines
    assert any(line.startswith("experiments.ddp.comm_hook: default ['none']") for line in lines), lines


def _defaulted_names(schema: dict) -> set[str]:
    return {key.rsplit(".", 1)[-1] for key, node in schema_keys(schema).items() if "default" in node}


def _config_receiver(node: ast.expr) -> bool:
    """Whether `node` is a mapping named cfg or config, or a section of one (cfg["report"])."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("cfg", "config")


def _literal(node: ast.expr) -> bool:
    return (isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set)) or (isinstance(node, ast.Constant)
            and node.value is not None) or (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)))


def literal_fallbacks(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of every `.get("<name>", <literal>)` and `cfg[...].get("<name>") or <literal>`
    for a key `name` the schema defaults: a second copy of its default."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            call, rest = node.values[0], node.values[1:]
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "get"
                    and _config_receiver(call.func.value) and len(call.args) == 1
                    and isinstance(call.args[0], ast.Constant) and call.args[0].value in names and _literal(rest[0])):
                out.append((node.lineno, ast.unparse(node)))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value in names
                and _literal(node.args[1])):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_the_fallback_scan_finds_a_second_default():
    names = _defaulted_names(plan.load_schema())
    found = literal_fallbacks('a = cfg["network"].get("burst_kb", 32)\nb = config["report"].get("compare") or []\n'
                              'c = rec.get("burst_kb")\nd = x.get("not_a_schema_key", 1)\ne = cfg.get("alpha", None)\n',
                              names)
    assert [line for line, _ in found] == [1, 2], found


def test_no_literal_fallback_for_a_schema_default(root):
    """Code reads a defaulted key from the validated config (plan.validate_config fills every
    default in), never `.get(key, <its default again>)`: the schema is the one place that states it.
    Rule files are Python with Snakemake's keywords: scanned as text."""
    names = _defaulted_names(plan.load_schema())
    found = []
    for path in sorted([*(root / "workflow").rglob("*.py"), *(root / "kan").rglob("*.py")]):
        found += [f"{path.relative_to(root)}:{line}: {code}" for line, code in literal_fallbacks(path.read_text(), names)]
    pattern = re.compile(r"""\.get\(\s*["'](\w+)["']\s*(?:,\s*[^)\s]|\)\s+or\s+[\[{"'\d])""")
    for path in sorted([root / "Snakefile", *(root / "workflow" / "rules").glob("*.smk")]):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(root)}:{i}: {line.strip()}" for m in pattern.finditer(line)
                      if m.group(1) in names]
    assert not found, "literal fallbacks for keys the schema defaults:\n  " + "\n  ".join(found)


def test_validation_fills_every_section():
    """Every section a consumer reads is there after validation, with its defaults: no fallbacks needed."""
    cfg = plan.validate_config(copy.deepcopy(MINIMAL))
    schema = plan.load_schema()
    for section in ("model", "training", "experiments", "plan", "limits", "resources", "timeouts", "network",
                    "report"):
        defaults = {k for k, v in schema["properties"][section]["properties"].items() if "default" in v}
        assert defaults <= set(cfg[section]), (section, defaults - set(cfg[section]))
    assert cfg["network"] == {"emulate": False, "rates_mbit": [100, 400], "burst_kb": 32, "latency_us": 0}
    assert cfg["repeats"] == 1 and cfg["report"]["alpha"] == 0.05
    adaptive = plan.validate_config({**copy.deepcopy(MINIMAL), "repeats": {"min": 2, "max": 4}})
    assert adaptive["repeats"] == {"min": 2, "max": 4, "looks": 3, "budget_rank_hours": None}
    # one setting besides DDP's defaults (only the defaults compare nothing: refused, test_ddp_plan.py)
    ddp = plan.validate_config({"experiments": {"ddp": {"topology": {"nodes": 1, "gpus_per_node": 2},
                                                        "comm_hook": ["none", "fp16"]}}})
    assert {k: ddp["experiments"]["ddp"][k] for k in plan.DDP_DEFAULTS if k != "comm_hook"} == {
        k: [v] for k, v in plan.DDP_DEFAULTS.items() if k != "comm_hook"}


def test_impl_and_basis_choices_agree():
    schema = plan.load_schema()
    builtin, own = schema_keys(schema)["model.impl"]["items"]["anyOf"]
    assert tuple(builtin["enum"]) == IMPLS and re.fullmatch(own["pattern"], "examples/tiny_kan.py:build")
    assert tuple(schema_keys(schema)["model.basis"]["items"]["enum"]) == BASES
    assert Point().model.grid_size == schema_keys(schema)["model.grid_size"]["default"]


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "config").glob("*.yaml")))
def test_shipped_configs_are_valid(root, name):
    cfg = plan.load_config(root / "config" / name)
    assert plan.build_points(cfg)


def test_paper_config_matches_the_paper(root):
    """config/paper.yaml describes the seed paper's points (arXiv 2609.07740)."""
    cfg = plan.load_config(root / "config" / "paper.yaml")
    pts = [p for p in plan.build_points(cfg).values() if p.rep == 0 and p.experiment != "allreduce"]
    strong = [p for p in pts if p.experiment == "strong" and p.train.ddp]
    assert {p.placement.world_size for p in strong} == {1, 2, 4, 8}
    assert {(p.placement.nodes, p.placement.gpus_per_node) for p in strong} >= {(1, 1), (4, 2)}
    assert all(p.train.batch_per_rank == 512 and p.train.samples == 100000 and p.train.epochs == 40 for p in strong)
    assert all(p.train.samples == 25000 * p.placement.world_size for p in pts if p.experiment == "weak")
    ms = [p for p in pts if p.experiment == "model_size"]
    assert {p.model.impl for p in pts} == {"pykan", "kanscale", "mlp_matched"}  # the paper's, ours, an MLP
    assert sorted(p.model.widths[1] for p in ms if p.model.impl == "pykan") == [32, 64, 128, 256]
    assert all((p.placement.nodes, p.placement.gpus_per_node) == (2, 2) and p.train.samples == 50000 for p in ms)
    assert all(p.model.grid_size == 10 and p.model.spline_order == 3 for p in pts)


def test_pykan_beside_other_bases_runs_bspline_and_says_so():
    """A basis list with bspline keeps the other bases for kanscale; pykan gets bspline, with a warning."""
    cfg = plan.validate_config({**copy.deepcopy(MINIMAL), "model": {"impl": ["pykan", "kanscale"],
                                                                    "basis": ["bspline", "rbf"]}})
    models = {(p.model.impl, p.model.basis) for p in plan.build_points(cfg).values()}
    assert models == {("pykan", "bspline"), ("kanscale", "bspline"), ("kanscale", "rbf")}
    (warning,) = plan.config_warnings(cfg)
    assert "pykan" in warning and "rbf" in warning
    assert plan.config_warnings(plan.validate_config(copy.deepcopy(MINIMAL))) == []


def test_tiny_test_config_valid(root):
    cfg = yaml.safe_load((root / "tests" / "configs" / "tiny.yaml").read_text())
    plan.validate_config(cfg)
