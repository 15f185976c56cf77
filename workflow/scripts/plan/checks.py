"""The rules of a study config that JSON Schema cannot say well, as (config key, message): one
experiment at least, exactly one batch for strong scaling, no placement listed twice, limits
kept, every point buildable (a point its dataclasses reject is named with its experiment), and
with CUDA graphs asked for, every implementation's training step capturable (kan/probes/capture.py).
"""

from __future__ import annotations

from kan.contract import factory
from kan.contract.point import EXPERIMENTS
from kan.contract.data_config import SKLEARN
from kan.contract.expect_spec import expectation_problems

from . import factories
from .config_keys import lr_candidates, study_parts
from .points import (CAPTURE_SAFE_HOOKS, DDP_DEFAULTS, TRAINING_EXPERIMENTS, ddp_left_out, enabled, plan_points,
                     repeat_plan, world)


def semantic_problems(cfg: dict) -> list[tuple[str, str]]:
    """(config key, message) of every problem of a schema-valid config (defaults filled), each once."""
    out = _shape_problems(cfg)
    if out:
        return out
    problems: list = []
    parts = study_parts(cfg, problems)
    if not problems:
        problems.extend(_limit_problems(cfg, parts["limits"]))
        if not problems:
            plan_points(cfg, parts, problems)
        if not problems:
            problems.extend(capture_problems(cfg, parts["models"]))
    # the same problem at several points (a point and its repeats, its non-DDP baseline): say it once
    seen, unique = set(), []
    for key, msg in problems:
        if msg not in seen:
            seen.add(msg)
            unique.append((key, msg))
    return unique


def _shape_problems(cfg: dict) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    exps = cfg["experiments"]
    if not any(enabled(exps, name) for name in TRAINING_EXPERIMENTS):
        out.append(("experiments", f"no training experiment enabled; give at least one of "
                                   f"{', '.join(TRAINING_EXPERIMENTS)}"))
    strong = enabled(exps, "strong")
    if strong:
        has_g, has_r = "global_batch" in strong, "batch_per_rank" in strong
        if has_g == has_r:
            out.append(("experiments.strong", "give exactly one of global_batch (fixed global batch) "
                                              "or batch_per_rank (fixed per-rank batch, the paper's way)"))
        elif has_g:
            for i, topo in enumerate(strong["topologies"]):
                if strong["global_batch"] % world(topo):
                    out.append(("experiments.strong.global_batch",
                                f"{strong['global_batch']} is not divisible by the world size {world(topo)} of "
                                f"topologies[{i}]; use a multiple of every world size"))
    out.extend(_nccl_only_problems(cfg))
    out.extend(_graph_problems(cfg))
    out.extend(_comparison_problems(cfg))
    t = cfg["training"]
    if t["lr_reference_batch"] is not None and t["lr_scaling"] == "none":
        out.append(("training.lr_reference_batch", f"{t['lr_reference_batch']} is the batch lr is scaled from: "
                                                   "only with lr_scaling linear or sqrt"))
    for name in EXPERIMENTS:
        e = enabled(exps, name)
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
    out.extend(expectation_problems(cfg["report"]["expect"]))
    out.extend(target_problems(cfg))
    if enabled(exps, "batch") and cfg["report"]["target"] is None:
        out.append(("experiments.batch", "the critical batch is fitted to the samples to a held-out target: set "
                                         "report.target (and training.eval_every_samples)"))
    if lr_candidates(cfg) and t["eval_every_samples"] == 0:
        out.append(("training.lr", "tuned rates are judged on held-out data: set training.eval_every_samples above 0 "
                                   "(it is 0 = off)"))
    if len(cfg["model"]["widths"]) < 3:
        out.append(("model.widths", f"{cfg['model']['widths']} needs a hidden layer (input, hidden..., output): "
                                    f"the model_size experiment sweeps the hidden width"))
    return out


def target_problems(cfg: dict) -> list[tuple[str, str]]:
    """report.target on a metric the study can produce: a held-out curve (training.eval_every_samples
    > 0), accuracy only on classification data, and exactly one of value and from_reference."""
    target = cfg["report"]["target"]
    if target is None:
        return []
    out = []
    metric, d = target["metric"], cfg["data"]
    if ("value" in target) == ("from_reference" in target):
        out.append(("report.target", "give exactly one of value (the target itself) and from_reference (a factor of "
                                     "the world-1 point's final held-out value)"))
    if cfg["training"]["eval_every_samples"] == 0:
        out.append(("report.target", f"a held-out target ({metric}) needs held-out evaluations: set "
                                     f"training.eval_every_samples above 0 (it is 0 = off)"))
    classification = _classification(cfg)
    if metric == "val_accuracy" and not classification:
        out.append(("report.target.metric", f"val_accuracy needs classification data, and data.kind {d['kind']} "
                                            f"{('(' + d['name'] + ') ') if d['kind'] == 'sklearn' else ''}is "
                                            f"regression; use metric val_loss"))
    if metric == "val_accuracy" and target.get("value") is not None and target["value"] > 1:
        out.append(("report.target.value", f"{target['value']:g} is no accuracy: a val_accuracy target is a fraction "
                                           f"in (0, 1]"))
    return out


def _classification(cfg: dict) -> bool:
    d = cfg["data"]
    return (SKLEARN.get(d["name"]) if d["kind"] == "sklearn" else d["task"] if d["kind"] == "file"
            else "regression") == "classification"


def _capture_key(cfg: dict) -> str | None:
    """The config key that asks for a captured step on a GPU study, or None."""
    if cfg["device"] == "cpu":
        return None  # refused on its own (_graph_problems)
    if cfg["training"]["cuda_graphs"]:
        return "training.cuda_graphs"
    ddp = enabled(cfg["experiments"], "ddp")
    if ddp and True in ddp["cuda_graphs"]:
        return f"experiments.ddp.cuda_graphs[{ddp['cuda_graphs'].index(True)}]"
    return None


def capture_problems(cfg: dict, models: list) -> list[tuple[str, str]]:
    """With a captured step asked for, each implementation whose training step cannot be captured
    as a CUDA graph (kan/probes/capture.py on the meta device, every kernel path a GPU may take), naming it
    and the operators: a point of it would fail at capture, after its start-up. Your own factories
    are checked, in the factory check's child process (plan/factories.py); the built-in models pass
    on every basis and kernel path (tests/unit/test_capture.py), so a study of them starts no child
    (one costs ~5 s: torch's import); pykan runs in its own environment, unchecked."""
    key = _capture_key(cfg)
    if key is None or not factories.BUILD["enabled"]:
        return []
    loss = "cross_entropy" if _classification(cfg) else "mse"
    todo = list({m.impl: m for m in models if factory.is_factory(m.impl)}.values())
    if not todo:
        return []
    found = factories.capture_checks([{"impl": m.impl, "settings": factory.settings(m), "loss": loss} for m in todo],
                                     cfg["model"]["factory_check_timeout_s"])
    out = []
    for m, r in zip(todo, found):
        if "error" in r:
            out.append(("model.impl", r["error"]))
            continue
        if r["pass"] is False:
            out.append((key, f"true, and model.impl {m.impl!r} {r['detail']}; fix: {r['fix']}; allowed: false, or a "
                             f"model without these operators (docs/your-model.md, CUDA graphs)"))
    return out


def _comparison_problems(cfg: dict) -> list[tuple[str, str]]:
    """Comparisons the config makes impossible: each of their points would run and measure nothing
    that is compared (one rank sends nothing; DDP's defaults against themselves)."""
    exps, out = cfg["experiments"], []
    ddp = enabled(exps, "ddp")
    if ddp and world(ddp["topology"]) == 1:
        out.append(("experiments.ddp.topology", "1 x 1 is one rank: DDP's settings change how gradients travel between "
                                                "ranks, and one rank sends none; give 2 or more ranks"))
    if ddp and all(ddp[k] == [v] for k, v in DDP_DEFAULTS.items()):
        out.append(("experiments.ddp", f"every list holds only DDP's defaults ({', '.join(f'{k}: {[v]}' for k, v in DDP_DEFAULTS.items())}), "
                                       "so there is nothing to compare with them; list another setting (e.g. comm_hook: "
                                       "[none, fp16]) or leave the experiment out"))
    allreduce = enabled(exps, "allreduce")
    for i, topo in enumerate((allreduce or {}).get("topologies") or []):
        if world(topo) == 1:
            out.append((f"experiments.allreduce.topologies[{i}]", "1 x 1 is one rank: an all-reduce of one rank moves "
                                                                  "nothing; give 2 or more ranks"))
    return out


def _nccl_only_problems(cfg: dict) -> list[tuple[str, str]]:
    """DDP settings only NCCL runs, in a study that runs on the CPU (gloo): each would be a point that
    fails when it starts (kan/ddp_wrap.py), so say it now. device auto may find GPUs: left to run time."""
    ddp = enabled(cfg["experiments"], "ddp")
    if cfg["device"] != "cpu" or not ddp:
        return []
    out = []
    if "bf16" in ddp["comm_hook"]:
        out.append((f"experiments.ddp.comm_hook[{ddp['comm_hook'].index('bf16')}]",
                    "bf16 needs NCCL (CUDA GPUs) and this study runs on device cpu, where gloo refuses the bf16 "
                    "hook; take bf16 out (fp16 halves the bytes on gloo too) or run on GPUs (device: cuda or auto)"))
    for i, algo in enumerate(ddp["nccl_algo"]):
        if algo:
            out.append((f"experiments.ddp.nccl_algo[{i}]",
                        f"{algo!r} is NCCL's algorithm and this study runs on device cpu (gloo, no NCCL); leave "
                        f"nccl_algo out or run on GPUs (device: cuda or auto)"))
    return out


def _graph_problems(cfg: dict) -> list[tuple[str, str]]:
    """training.cuda_graphs (or true in the ddp experiment's cuda_graphs list) in a device: cpu study:
    a CUDA graph needs a CUDA device, so every such point would fail when it starts (kan/graphs.py).
    device auto may find GPUs: a point that finds none fails then, naming the key."""
    if cfg["device"] != "cpu":
        return _capture_only_problems(cfg)
    why = ("is a CUDA graph capture and this study runs on device cpu (gloo), where there is no graph to capture; "
           "allowed: false, or run on GPUs (device: cuda or auto)")
    out = [("training.cuda_graphs", f"true {why}")] if cfg["training"]["cuda_graphs"] else []
    ddp = enabled(cfg["experiments"], "ddp")
    if ddp and True in ddp["cuda_graphs"]:
        out.append((f"experiments.ddp.cuda_graphs[{ddp['cuda_graphs'].index(True)}]", f"true {why}"))
    return out


def _capture_only_problems(cfg: dict) -> list[tuple[str, str]]:
    """A ddp experiment whose every combination captures the step with a hook that cannot run under
    capture: nothing it asks for could be measured (a mixed list only loses those combinations,
    which `make plan` names)."""
    ddp = enabled(cfg["experiments"], "ddp")
    if not ddp or ddp["cuda_graphs"] != [True] or any(h in CAPTURE_SAFE_HOOKS for h in ddp["comm_hook"]):
        return []
    hooks = ", ".join(ddp["comm_hook"])
    whys = "; ".join(dict.fromkeys(f"{s['comm_hook']}: {why}" for s, why in ddp_left_out(cfg)))
    return [("experiments.ddp.comm_hook",
             f"[{hooks}] with experiments.ddp.cuda_graphs [true] asks only for settings that cannot run under "
             f"CUDA-graph capture ({whys}); allowed under capture: comm_hook "
             f"{', '.join(CAPTURE_SAFE_HOOKS)}; add false to cuda_graphs or {CAPTURE_SAFE_HOOKS[0]} to comm_hook")]


def _limit_problems(cfg: dict, limits) -> list[tuple[str, str]]:
    """Widths, placements and repeats above the study's limits (kan.contract.point.Limits)."""
    problems = []
    raise_it = "in the study config if your cluster really needs it"
    for i, w in enumerate(cfg["model"]["widths"]):
        if w > limits.max_width:
            problems.append((f"model.widths[{i}]", f"{w} is above limits.max_width = {limits.max_width}; raise "
                                                   f"limits.max_width {raise_it}"))
    for name in EXPERIMENTS:
        e = enabled(cfg["experiments"], name) or {}
        for i, topo in enumerate(e.get("topologies", [])):  # ddp and model_size have one `topology`
            for key, bound in (("nodes", "max_nodes"), ("gpus_per_node", "max_ranks_per_node")):
                if topo[key] > getattr(limits, bound):
                    problems.append((f"experiments.{name}.topologies[{i}].{key}",
                                     f"{topo[key]} is above limits.{bound} = {getattr(limits, bound)}; raise "
                                     f"limits.{bound} {raise_it}"))
    ms = enabled(cfg["experiments"], "model_size")
    for i, h in enumerate(ms["hidden_widths"] if ms else []):
        if h > limits.max_width:
            problems.append((f"experiments.model_size.hidden_widths[{i}]",
                             f"{h} is above limits.max_width = {limits.max_width}; raise limits.max_width {raise_it}"))
    rp = repeat_plan(cfg)
    if rp.max > limits.max_repeats:
        problems.append(("repeats", f"{rp.max} is above limits.max_repeats = {limits.max_repeats}"))
    return problems
