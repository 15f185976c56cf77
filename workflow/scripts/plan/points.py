"""The study's measurement points: experiments x models x topologies (x emulated links) x repeats,
each a kan.contract.point.Point keyed by its id. The order is stable, and ids depend only on the points'
fields, so a study planned again (or by an older version of this package) names the same points.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json

from kan.contract import factory
# the capture rule is the trainer's own, so planner and trainer refuse alike
from kan.contract.capture_hooks import CAPTURE_SAFE_HOOKS, capture_conflict  # noqa: F401
from kan.contract.point import EXPERIMENTS, AllreduceConfig, Placement, Point, PointError, TrainConfig
from kan.contract.fields import default
from kan.contract.repeats import RepeatPlan

from .config_keys import config_kwargs, lr_candidates, study_parts
from .schema import ConfigError

TRAINING_EXPERIMENTS = tuple(e for e in EXPERIMENTS if e not in ("allreduce", "readiness"))
# the ddp experiment's lists: every combination of their items is one setting
DDP_LISTS = ("comm_hook", "bucket_cap_mb", "static_graph", "gradient_as_bucket_view", "nccl_algo", "cuda_graphs")
# DDP's defaults (the trainer's): the `none` setting every other one is judged against
# (scaling/tables/ddp_table.py); the schema's lists default to exactly these (tests/unit/test_config.py)
DDP_DEFAULTS = {name: default(TrainConfig, name) for name in DDP_LISTS}


def enabled(exps: dict, name: str) -> dict | None:
    """The experiment's section if the config has it and it is enabled (validated: `enabled` is there)."""
    e = exps.get(name)  # an experiment left out of the config is not measured
    return e if e and e["enabled"] else None


def readiness_enabled(cfg: dict) -> bool:
    return factory.readiness_on(cfg["experiments"]["readiness"]["enabled"], cfg["model"]["impl"])


# the experiments whose points may be step-time points (training.step_tolerance_pct): they measure a
# step; the batch, lr_tune and ddp experiments measure the steps or the time to a target, the
# readiness check a few steps of its own, and so always train their whole work
STEP_TIME_EXPERIMENTS = ("strong", "weak", "comm", "model_size")


def world(topo: dict) -> int:
    return topo["nodes"] * topo["gpus_per_node"]


def training_rows(cfg: dict) -> list[tuple[str, list[int] | None, dict, int, int, bool]]:
    """(experiment, widths, topology, samples, batch_per_rank, ddp) of every training placement."""
    exps, base = cfg["experiments"], list(cfg["model"]["widths"])
    rows = []
    one = {"nodes": 1, "gpus_per_node": 1}
    s = enabled(exps, "strong")
    if s:
        for topo in s["topologies"]:
            bpr = s["batch_per_rank"] if "batch_per_rank" in s else s["global_batch"] // world(topo)
            rows.append(("strong", base, topo, s["samples"], bpr, True))
        if s["non_ddp_baseline"]:
            # strong has exactly one of the two (plan/checks.py): no schema default for either
            bpr = s["batch_per_rank"] if "batch_per_rank" in s else s["global_batch"]
            rows.append(("strong", base, one, s["samples"], bpr, False))
    w = enabled(exps, "weak")
    if w:
        for topo in w["topologies"]:
            rows.append(("weak", base, topo, w["samples_per_rank"] * world(topo), w["batch_per_rank"], True))
        if w["non_ddp_baseline"]:
            rows.append(("weak", base, one, w["samples_per_rank"], w["batch_per_rank"], False))
    c = enabled(exps, "comm")
    if c:
        for topo in c["topologies"]:
            rows.append(("comm", base, topo, c["samples"], c["batch_per_rank"], True))
    b = enabled(exps, "batch")
    if b:
        for batch in b["global_batches"]:
            rows.append(("batch", base, one, b["samples"], batch, True))
    m = enabled(exps, "model_size")
    if m:
        for h in m["hidden_widths"]:
            widths = [base[0]] + [h] * (len(base) - 2) + [base[-1]]
            rows.append(("model_size", widths, m["topology"], m["samples"], m["batch_per_rank"], True))
    return rows


def lr_reference(cfg: dict, experiment: str) -> dict:
    """TrainConfig's lr_reference_batch for an experiment's points: training.lr_reference_batch, else
    the global batch of the experiment's one-rank point (strong's global_batch, or the batch per
    rank); for the batch experiment and a tuned rate, the study's reference batch (sweep_setting);
    none without lr_scaling (so ids stay as they were). The rate itself is
    kan.contract.point.Point.lr_effective, where the world size is known."""
    t = cfg["training"]
    if t["lr_reference_batch"] is not None:
        return {"lr_reference_batch": t["lr_reference_batch"]}  # with lr_scaling none: Point refuses it
    if t["lr_scaling"] == "none":
        return {}
    if experiment == "batch" or lr_candidates(cfg):
        # many global batches at one rank, or a rate tuned at the sweep's batch: every point scales
        # from the study's reference batch, where the rate was chosen
        return {"lr_reference_batch": sweep_setting(cfg)[2]}
    e = cfg["experiments"][experiment]
    return {"lr_reference_batch": e["global_batch"] if "global_batch" in e else e["batch_per_rank"]}


def sweep_setting(cfg: dict) -> tuple[str, int, int]:
    """(experiment, samples, global batch) of the lr sweep's one-rank points: the study's reference
    global batch, strong's (its global_batch, or its batch_per_rank at one rank), else weak's one-rank
    point, else the first other training experiment's batch_per_rank at one rank. The sweep's lr
    reference is that experiment's (lr_reference), so with lr_scaling the chosen rate is the rate at
    the reference batch, and the scaling points scale it as they would a given lr."""
    exps = cfg["experiments"]
    s, w = enabled(exps, "strong"), enabled(exps, "weak")
    if s:
        return "strong", s["samples"], s["global_batch"] if "global_batch" in s else s["batch_per_rank"]
    if w:
        return "weak", w["samples_per_rank"], w["batch_per_rank"]
    name = next((n for n in ("comm", "model_size", "ddp") if enabled(exps, n)), None)
    if name is None:  # the batch experiment alone: its smallest global batch
        b = exps["batch"]
        return "batch", b["samples"], min(b["global_batches"])
    return name, exps[name]["samples"], exps[name]["batch_per_rank"]


def _ddp_product(cfg: dict) -> list[dict]:
    """Every combination of the ddp experiment's lists, in config order (none when it is off)."""
    d = enabled(cfg["experiments"], "ddp")
    if not d:
        return []
    # YAML's 25 is an int; the trainer parses --bucket-cap-mb=25 as 25.0: the same float on both
    # sides, or the record's point id (a hash of the fields) would not be the planned one
    lists = {**{k: d[k] for k in DDP_LISTS}, "bucket_cap_mb": [float(x) for x in d["bucket_cap_mb"]]}
    return [dict(zip(DDP_LISTS, combo)) for combo in itertools.product(*(lists[k] for k in DDP_LISTS))]


def ddp_combinations(cfg: dict) -> list[dict]:
    """TrainConfig fields of every combination of the ddp experiment's lists that can run, in config
    order, and DDP's defaults first when no combination is them: every setting is judged against
    them. A combination that captures the step with a hook not known to be capture-safe is left out
    (ddp_left_out says which and why)."""
    d = enabled(cfg["experiments"], "ddp")
    if not d:
        return []
    fixed = {"powersgd_rank": d["powersgd_rank"], "powersgd_start_iter": d["powersgd_start_iter"]}
    combos = [c for c in _ddp_product(cfg) if capture_conflict(c) is None]
    if DDP_DEFAULTS not in combos:
        combos.insert(0, dict(DDP_DEFAULTS))
    return [{**c, **fixed} for c in combos]


def ddp_left_out(cfg: dict) -> list[tuple[dict, str]]:
    """(setting, why) of each combination of the ddp experiment's lists that is not planned because
    it cannot run under CUDA-graph capture, in config order."""
    return [(c, why) for c in _ddp_product(cfg) if (why := capture_conflict(c)) is not None]


def allreduce_topologies(cfg: dict) -> list[dict]:
    """The allreduce experiment's placements: its own list, else every distinct multi-rank topology of
    the enabled training experiments (a one-rank all-reduce moves nothing)."""
    a = enabled(cfg["experiments"], "allreduce")
    if not a:
        return []
    if "topologies" in a:  # no schema default: left out = every training topology
        return [t for t in a["topologies"] if world(t) > 1]
    seen, out = set(), []
    d = enabled(cfg["experiments"], "ddp")
    for topo in [t for _, _, t, _, _, _ in training_rows(cfg)] + ([d["topology"]] if d else []):
        key = (topo["nodes"], topo["gpus_per_node"])
        if world(topo) > 1 and key not in seen:
            seen.add(key)
            out.append(topo)
    return out


def links(cfg: dict, topo: dict) -> list[dict]:
    """Placement fields of the emulated links a topology is measured over: one per configured rate
    for a point of 2 or more nodes when network.emulate is on, else none ([{}])."""
    net = cfg["network"]
    if not net["emulate"] or topo["nodes"] < 2:
        return [{}]
    return [{"link_mbit": float(r), "link_burst_kb": float(net["burst_kb"]),
             "link_latency_us": float(net["latency_us"])} for r in net["rates_mbit"]]


def plan_points(cfg: dict, parts: dict, problems: list | None = None) -> dict[str, Point]:
    """Every point of a validated config from its study-wide dataclasses (plan/config_keys.py
    study_parts); a point its dataclasses reject raises ConfigError, or, given `problems`, adds
    (where, message) to it and is left out."""
    points: dict[str, Point] = {}
    placement_base, train_base, limits = parts["placement"], parts["train"], parts["limits"]
    num_reps = repeat_plan(cfg).max

    def add(where: str, **kw) -> None:
        try:
            _check_rows(kw)
            pt = Point(study=cfg["study"], limits=limits, **kw)
        except PointError as e:
            if problems is None:
                raise ConfigError(f"{where}: {e}") from None
            problems.append((where, str(e)))
            return
        points[pt.id] = pt

    def placements(topo: dict):
        for link in links(cfg, topo):
            yield Placement(**placement_base, nodes=topo["nodes"], gpus_per_node=topo["gpus_per_node"], **link)

    def _check_rows(kw: dict) -> None:
        """A table's training rows against one global batch (drawn data have as many as samples)."""
        ds = kw.pop("dataset", None)
        if ds is None:
            return
        kw["data"] = ds.config
        batch = kw["train"].batch_per_rank * kw["placement"].world_size
        if ds.train_rows is not None and ds.train_rows < batch:
            raise PointError("data.path", f"{ds.source}: {ds.train_rows} training rows (the held-out "
                                          f"{ds.config.val_fraction:g} left out) are fewer than one global batch "
                                          f"of {batch} ({kw['train'].batch_per_rank} per rank x "
                                          f"{kw['placement'].world_size} ranks)")

    candidates = parts["lr_candidates"]
    tuned = {"lr_tuned_from": candidates} if candidates else {}
    if candidates:  # training.lr: tuned: the one-rank sweep, one point per candidate rate
        ref_exp, samples, batch = sweep_setting(cfg)
        one = Placement(**placement_base, nodes=1, gpus_per_node=1)
        for lr in candidates:
            train = TrainConfig(**{**train_base, "lr": lr, "step_tolerance_pct": 0.0}, samples=samples, batch_per_rank=batch, ddp=True,
                                **lr_reference(cfg, ref_exp))
            for ds in parts["data"]:
                for mc in parts["models"]:
                    for rep in range(num_reps):
                        add(f"training.lr: tuned (the sweep's point at lr {lr:g})", experiment="lr_tune", rep=rep,
                            model=mc, train=train, placement=one, dataset=ds)
    for experiment, widths, topo, samples, bpr, ddp in training_rows(cfg):
        # limits (nodes, ranks per node) are checked by Point, with the point's context; the batch
        # experiment measures steps to the target, so it trains the whole work (no step tolerance)
        whole = {} if experiment in STEP_TIME_EXPERIMENTS else {"step_tolerance_pct": 0.0}
        train = TrainConfig(**{**train_base, **whole}, samples=samples, batch_per_rank=bpr, ddp=ddp,
                            **lr_reference(cfg, experiment), **tuned)
        for place in placements(topo):
            for ds in parts["data"]:
                for mc in parts["models"]:
                    model = dataclasses.replace(mc, widths=tuple(widths))
                    for rep in range(num_reps):
                        add(f"experiments.{experiment} ({topo['nodes']}x{topo['gpus_per_node']}"
                            f"{'' if ddp else ', non-DDP baseline'})", experiment=experiment, rep=rep, model=model,
                            train=train, placement=place, dataset=ds)
    d = enabled(cfg["experiments"], "ddp")
    for setting in ddp_combinations(cfg):
        train = TrainConfig(**{**train_base, **setting, "step_tolerance_pct": 0.0}, samples=d["samples"], batch_per_rank=d["batch_per_rank"],
                            **lr_reference(cfg, "ddp"), **tuned)
        for place in placements(d["topology"]):
            for ds in parts["data"]:
                for mc in parts["models"]:
                    for rep in range(num_reps):
                        add(f"experiments.ddp ({train.ddp_label})", experiment="ddp", rep=rep, model=mc,
                            train=train, placement=place, dataset=ds)
    if readiness_enabled(cfg):  # one multi-rank check per implementation (kan/probes/readiness.py), no repeats
        r = cfg["experiments"]["readiness"]
        # the study's smallest multi-rank placement (it fits the cluster the study asks for: nodes of
        # one GPU get a 2 x 1 check), else one node x 2 ranks
        multi = sorted({(t["nodes"], t["gpus_per_node"]) for _, _, t, _, _, _ in training_rows(cfg) if world(t) > 1},
                       key=lambda nt: (nt[0] * nt[1], nt[0]))
        nodes, per_node = multi[0] if multi else (1, 2)
        two = Placement(**placement_base, nodes=nodes, gpus_per_node=per_node)
        # its own drawn batches, `steps` of them on every rank (the rate as given, or the first candidate:
        # it trains a few steps only, untuned)
        first = {"lr": candidates[0]} if candidates else {}
        train = TrainConfig(**{**train_base, **first, "samples": two.world_size * r["batch_per_rank"] * r["steps"], "epochs": 1,
                               "batch_per_rank": r["batch_per_rank"], "max_steps": r["steps"], "warmup_steps": 0,
                               "lr_scaling": "none", "lr_warmup_samples": 0, "eval_every_samples": 0,
                               "step_tolerance_pct": 0.0})
        for mc in parts["models"]:  # the data's config only for its widths: nothing is read
            add(f"experiments.readiness ({mc.label})", experiment="readiness", rep=0, model=mc, train=train,
                placement=two, data=parts["data"][0].config)
    if enabled(cfg["experiments"], "allreduce"):
        sweep = AllreduceConfig(**config_kwargs(cfg, AllreduceConfig))
        for topo in allreduce_topologies(cfg):
            for place in placements(topo):
                for rep in range(num_reps):
                    add(f"experiments.allreduce ({topo['nodes']}x{topo['gpus_per_node']})", experiment="allreduce",
                        rep=rep, placement=place, allreduce=sweep)
    return points


def repeat_plan(cfg: dict) -> RepeatPlan:
    """The study's repeats (fixed, or adaptive with looks) and its deciding intervals' level."""
    return RepeatPlan.from_config(cfg["repeats"], float(cfg["report"]["alpha"]))


def initial_points(cfg: dict, points: dict[str, Point]) -> list[str]:
    """The points every study measures: repeats below repeats.min (all of them with fixed repeats)."""
    rp = repeat_plan(cfg)
    return [pid for pid, p in points.items() if p.rep < rp.min]


def build_points(cfg: dict) -> dict[str, Point]:
    """Every measurement point of a validated config, keyed by id, in a stable order."""
    problems: list = []
    parts = study_parts(cfg, problems)
    if problems:
        raise ConfigError("; ".join(f"{k}: {m}" for k, m in problems))
    return plan_points(cfg, parts)


def points_json(points: dict[str, Point]) -> str:
    """The planned points as one JSON text, one point per line (results/<study>/plan/points.json)."""
    return "[\n" + ",\n".join(json.dumps(p.to_json(), sort_keys=True) for p in points.values()) + "\n]\n"


def points_digest(points: dict[str, Point]) -> str:
    return hashlib.sha256(points_json(points).encode()).hexdigest()[:16]
