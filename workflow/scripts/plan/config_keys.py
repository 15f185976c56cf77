"""Where a config value lands in a point: config key -> (kan dataclass, field), and the study-wide
dataclasses built from the validated config. The dataclasses check their own fields; their errors
are re-labelled here with the config key the value came from.
"""

from __future__ import annotations

from kan.contract.point import AllreduceConfig, LaunchSettings, Limits, ModelConfig, Placement, PointError, TrainConfig
from kan.contract.data_config import DataConfig

from kan.contract import factory

from . import factories
from .data_section import DATA_FIELDS, datasets

# config key -> (dataclass, field): the value is passed as is (tests check the schema's defaults and
# bounds against these fields)
CONFIG_FIELDS = {
    "model.grid_size": (ModelConfig, "grid_size"), "model.spline_order": (ModelConfig, "spline_order"),
    "model.grid_range": (ModelConfig, "grid_range"), "model.widths": (ModelConfig, "widths"),
    **{f"training.{f}": (TrainConfig, f) for f in ("epochs", "lr", "noise", "seed", "warmup_steps",
                                                    "comm_probe_every", "max_steps", "loss_every_steps",
                                                    "bucket_cap_mb", "eval_every_samples", "lr_scaling",
                                                    "lr_warmup_samples", "cuda_graphs", "step_tolerance_pct")},
    **{f"data.{f}": (DataConfig, f) for f in DATA_FIELDS},
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
# a tuned point's provenance is the config's grid (lr_candidates, below), not a value passed as is
_FIELD_KEY["TrainConfig.lr_tuned_from"] = "training.lr_candidates"
_PREFIX = {ModelConfig: "model.", TrainConfig: "training.", Placement: "placement.", LaunchSettings: "launch.",
           Limits: "limits.", AllreduceConfig: "allreduce.", DataConfig: "data."}


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


def config_kwargs(cfg: dict, cls) -> dict:
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


def study_parts(cfg: dict, problems: list) -> dict:
    """The study-wide dataclasses, each built (and so validated) once from its config section; a bad
    value adds (config key, message) to `problems`."""
    m = cfg["model"]
    limits = _build(Limits, config_kwargs(cfg, Limits), problems)
    parts = {"limits": limits or Limits(), "models": []}
    model_kw = config_kwargs(cfg, ModelConfig)
    for impl in m["impl"]:
        if factory.is_factory(impl):  # your own: one model, given the first basis listed
            mc = _factory_model(impl, {**model_kw, "impl": impl, "basis": m["basis"][0]}, problems,
                                m["factory_check_timeout_s"])
            if mc is not None:
                parts["models"].append(mc)
            continue
        # an MLP has no basis, pykan has B-splines only: one model each, not one per basis
        for basis in (m["basis"] if impl == "kanscale" else ["bspline"]):
            mc = _build(ModelConfig, {**model_kw, "impl": impl, "basis": basis}, problems)
            if mc is not None:
                parts["models"].append(mc)
    parts["train"] = config_kwargs(cfg, TrainConfig)
    parts["lr_candidates"] = lr_candidates(cfg)
    tuned = {"lr_tuned_from": parts["lr_candidates"]} if parts["lr_candidates"] else {}
    if tuned:
        # unset until the sweep chooses it: the workflow gives a tuned point its rate before it runs
        # (launch/tuned.py); each sweep point gets its own candidate (plan/points.py)
        parts["train"]["lr"] = None
    _build(TrainConfig, {**parts["train"], **tuned}, problems)  # checks the training section once
    parts["placement"] = config_kwargs(cfg, Placement)
    _build(Placement, dict(parts["placement"]), problems)
    parts["launch"] = _build(LaunchSettings, config_kwargs(cfg, LaunchSettings), problems)
    parts["data"] = datasets(cfg, problems)  # a table is read and checked here, once
    return parts


def _factory_model(impl: str, kw: dict, problems: list, timeout_s: float) -> ModelConfig | None:
    """A factory's model, checked in a child process given `timeout_s` seconds (plan/factories.py)
    and with its file's content hash."""
    shape = _build(ModelConfig, {**kw, "impl": "kanscale"}, problems)  # the settings' own checks, once
    if shape is None:
        return None
    sha, error = factories.check(impl, factory.settings(shape), timeout_s)
    if error:
        problems.append(("model.impl", error))
        return None
    return _build(ModelConfig, {**kw, "impl_sha256": sha}, problems)


def lr_candidates(cfg: dict) -> tuple[float, ...]:
    """The grid `training.lr: tuned` (or a list of rates) chooses from, as floats; () = lr as given
    (a study is tuned exactly when this is not empty; each of its tuned points has the grid as
    TrainConfig.lr_tuned_from)."""
    lr = cfg["training"]["lr"]
    if isinstance(lr, list):
        return tuple(float(x) for x in lr)
    if lr == "tuned":
        return tuple(float(x) for x in cfg["training"]["lr_candidates"])
    return ()


def launch_settings(cfg: dict) -> LaunchSettings:
    return LaunchSettings(**config_kwargs(cfg, LaunchSettings))


def limits(cfg: dict) -> Limits:
    return Limits(**config_kwargs(cfg, Limits))
