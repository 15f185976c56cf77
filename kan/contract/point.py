"""What one measurement point is: typed, validated, defined once.

The workflow's `plan` package expands the study config into `Point`s; the launcher passes a point to
`python -m kan.train` as flags (`Point.to_argv`), the trainer parses exactly them back
(`add_point_arguments` / `point_from_args`), the record stores it as JSON (`Point.to_json`). Every
field has its unit and default stated here, the trainer's own contract; where the study config sets
a field, the schema states the same default and bounds (tests/unit/test_config.py proves it).

A point's id is a readable stem plus a short hash of every field that changes what is measured
(`Point.measured`): changing the grid size gives new ids, so old records are never overwritten by a
different measurement under the same name. Elsewhere in kan/contract/: what changes no measurement
(time limit, memory, timeouts, limits) in study_settings.py, re-exported here; the field checks in
fields.py; the model (`model:`) in model_config.py, the dataset (`data:`) in data_config.py, the
command-line bridge in point_args.py.
No torch import here: the workflow and the launcher need this module in processes that start fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field

from .capture_hooks import capture_refusal
from .data_config import DataConfig
from .fields import PointError, as_tuple, default, flag, flag_value, from_dict, meta, plain, validate
from ..lr import LR_SCALINGS, scaled_lr
from .model_config import BASES, IMPLS, ModelConfig  # noqa: F401  (callers import them here)
from .study_settings import LaunchSettings, Limits, parse_limits  # noqa: F401  (LaunchSettings: callers import it here)

# readiness: one implementation's two-rank DDP-readiness check (kan/probes/readiness.py), not a measurement
EXPERIMENTS = ("strong", "weak", "comm", "model_size", "allreduce", "ddp", "batch", "readiness")
# what a point may be besides the config's experiments: lr_tune = one candidate rate of the one-rank
# sweep that `training.lr: tuned` runs before the scaling points (workflow/scripts/plan/points.py)
POINT_EXPERIMENTS = (*EXPERIMENTS, "lr_tune")
# DDP's gradient communication hooks (torch.distributed.algorithms.ddp_comm_hooks); none = DDP's own
COMM_HOOKS = ("none", "fp16", "bf16", "powersgd")
NCCL_ALGOS = ("", "Ring", "Tree")
LAUNCHERS = ("torchrun", "srun")
DEVICES = ("auto", "cpu", "cuda")
# seeds are offset by the epoch and +1 (held-out data); keep seed + offsets inside int64
MAX_SEED = 2**62
POINT_VERSION = 1


# ---- the dataclasses ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How a point trains and what it times."""

    samples: int = field(default=100_000, metadata=meta(
        "data set size, all ranks together", "samples", lo=1, limit="max_samples"))
    epochs: int = field(default=40, metadata=meta("passes over the data set", lo=1, limit="max_epochs"))
    batch_per_rank: int = field(default=512, metadata=meta("mini-batch per rank", "samples", lo=1))
    # None only on a tuned point (lr_tuned_from) before the sweep has chosen its rate: such a point
    # cannot be trained (Point.to_argv refuses it); the workflow gives it the chosen rate
    # (workflow/scripts/launch/tuned.py) before its launcher starts. Annotated float: the flag parser
    # and the field checks (kan/contract/fields.py) read a set rate, and TrainConfig.checkable stands one in
    lr: float = field(default=1e-3, metadata=meta(
        "Adam learning rate (a tuned point: unset until the lr sweep has chosen it)", gt=0.0))
    noise: float = field(default=0.01, metadata=meta("std of the label noise", lo=0.0))
    seed: int = field(default=0, metadata=meta("seed of data, shuffling and initial weights", lo=0, hi=MAX_SEED))
    max_steps: int = field(default=0, metadata=meta("cap on training steps (0 = none); a step-time point's cap", lo=0))
    # a step-time point (step_stop.py: the step time to a tolerance, not the whole work); quiet at 0
    step_tolerance_pct: float = field(default=0.0, metadata=meta(
        "stop once the mean step's 95% interval is within +- this % of it (0 = train the whole work)", "%", lo=0.0, hi=50.0))
    warmup_steps: int = field(default=5, metadata=meta("steps excluded from timing statistics", lo=0))
    comm_probe_every: int = field(default=2, metadata=meta(
        "every k-th step runs under no_sync() to measure exposed communication (0 = never; 1 is not allowed)",
        lo=0))
    loss_every_steps: int = field(default=10, metadata=meta(
        "the training loss curve gets one entry every this many steps (for time-to-target)", "steps", lo=1))
    eval_every_samples: int = field(default=0, metadata=meta(
        "held-out loss (and accuracy) every this many samples seen, off the clock (0 = off)", "samples", lo=0))
    ddp: bool = field(default=True, metadata=meta(
        "train under DistributedDataParallel; false = the single-process non-DDP baseline (world size 1)"))
    bucket_cap_mb: float = field(default=25.0, metadata=meta(
        "DDP gradient bucket size (DDP's default 25 MB); small values give several buckets", "MB", gt=0.0))
    # DDP's own settings (the ddp experiment); left out of a point's id at their defaults
    comm_hook: str = field(default="none", metadata=meta(
        "DDP gradient communication hook: none = DDP's all-reduce; fp16 / bf16 = gradients sent in 16 "
        "bits; powersgd = low-rank PowerSGD with error feedback", choices=COMM_HOOKS))
    powersgd_rank: int = field(default=1, metadata=meta("PowerSGD's matrix approximation rank", lo=1, hi=1024))
    powersgd_start_iter: int = field(default=2, metadata=meta(
        "PowerSGD compresses from this step on (plain all-reduce before; PowerSGD needs >= 2)", "steps", lo=2))
    static_graph: bool = field(default=False, metadata=meta("DDP static_graph=True (the graph never changes)"))
    gradient_as_bucket_view: bool = field(default=False, metadata=meta(
        "DDP gradient_as_bucket_view=True (gradients are views into the buckets: one copy less)"))
    nccl_algo: str = field(default="", metadata=meta(
        "NCCL_ALGO for the ranks (CUDA + NCCL only; empty = NCCL chooses)", choices=NCCL_ALGOS))
    cuda_graphs: bool = field(default=False, metadata=meta(
        "capture the whole step (forward, loss, backward with DDP's all-reduce, capturable Adam) once as a "
        "CUDA graph and replay it (CUDA only; kan/graphs.py)"))
    # the rate for growing global batches (kan/lr.py: the rules and their arithmetic, e.g. 512 per
    # rank x 8 ranks = 4096 global against the one-rank 512: linear = lr x 8); left out of a point's
    # id, JSON and command line at their defaults
    lr_scaling: str = field(default="none", metadata=meta(
        "how the rate follows the global batch: none = lr; linear = lr x global / reference batch; "
        "sqrt = lr x its square root", choices=LR_SCALINGS))
    lr_reference_batch: int = field(default=0, metadata=meta(
        "the global batch at which lr is the rate (set with lr_scaling linear or sqrt only; 0 = none)",
        "samples", lo=0))
    lr_warmup_samples: int = field(default=0, metadata=meta(
        "the rate ramps linearly from ~0 to the scaled rate over this many samples seen by all ranks "
        "(0 = no ramp)", "samples", lo=0))
    # training.lr: tuned: where this point's rate comes from, the grid of the config's
    # training.lr_candidates that the one-rank sweep chose from (lr_tuning.json); its id hashes them
    # instead of lr (unknown when the study is planned); empty = lr as given
    lr_tuned_from: tuple[float, ...] = field(default=(), metadata=meta(
        "the rates lr was tuned from (empty = not tuned; set by the plan for training.lr: tuned)", gt=0.0))

    def __post_init__(self) -> None:
        c = self.lr_tuned_from  # 1 in YAML and 1.0 on the command line: one float, one id
        if isinstance(c, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in c):
            object.__setattr__(self, "lr_tuned_from", tuple(float(x) for x in c))
        if self.lr is None:  # a tuned point before its rate is chosen: checked as the same point at a rate
            if not self.tuned:
                raise PointError("training.lr", "is unset; only a tuned point (training.lr: tuned) waits for its rate")
            self.checkable()
            return
        validate(self, "training.", None)
        if self.comm_probe_every == 1:
            raise PointError("training.comm_probe_every", "1 would never run a synchronised step; use 0 (no probe) or >= 2")
        if why := capture_refusal(self.cuda_graphs, self.comm_hook):  # the planner leaves it out; a trainer refuses
            raise PointError("training.comm_hook", why)
        if not self.ddp and {k: v for k, v in self.changed_ddp_settings().items() if k != "cuda_graphs"}:
            raise PointError("training.comm_hook", f"the non-DDP baseline has no DDP settings: {self.changed_ddp_settings()}")

    def checkable(self) -> TrainConfig:
        """This config, or where its rate is unset (a tuned point before the sweep has chosen), the
        same at the default rate: every other field is checked as a set rate would have it."""
        return self if self.lr is not None else dataclasses.replace(self, lr=default(TrainConfig, "lr"))

    def changed_ddp_settings(self) -> dict:
        """DDP's own settings that differ from their defaults (what the ddp experiment varies)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name in DDP_SETTINGS and getattr(self, f.name) != f.default}

    @property
    def ddp_label(self) -> str:
        """DDP's settings in a few words (the ddp experiment's tables and point ids): the hook (with
        PowerSGD's rank), then what differs from DDP's defaults, e.g. 'fp16', 'powersgd-rank2 bucket-1',
        'none static view'."""
        hook = self.comm_hook + (f"-rank{self.powersgd_rank}" if self.comm_hook == "powersgd" else "")
        parts = [hook]
        if self.bucket_cap_mb != default(TrainConfig, "bucket_cap_mb"):
            parts.append(f"bucket-{self.bucket_cap_mb:g}")
        if self.static_graph:
            parts.append("static")
        if self.gradient_as_bucket_view:
            parts.append("view")
        if self.nccl_algo:
            parts.append(self.nccl_algo.lower())
        if self.cuda_graphs:
            parts.append("graphs")
        return " ".join(parts)

    def measured(self) -> dict:
        """The training settings as the id's hash sees them: DDP's own settings only where they differ
        from their defaults (so every point measured before they existed keeps its id); PowerSGD's
        rank and start only with the PowerSGD hook."""
        d, changed = plain(self), self.changed_ddp_settings()
        for k in DDP_SETTINGS:
            if k not in changed or (k.startswith("powersgd_") and self.comm_hook != "powersgd"):
                d.pop(k)
        if not self.eval_every_samples:  # off: every point measured before it existed keeps its id
            d.pop("eval_every_samples")
        for k in QUIET_TRAIN:  # likewise the rate's rule and the step tolerance at their defaults
            if d[k] == default(TrainConfig, k):
                d.pop(k)
        d.pop("lr" if self.tuned else "lr_tuned_from")  # tuned: the candidates name the rate
        return d

    @property
    def tuned(self) -> bool:
        """Whether this point trains at the rate the lr sweep chooses (training.lr: tuned): the one
        test of "tuned" for a point, wherever it is asked."""
        return bool(self.lr_tuned_from)


# quiet: in a point's id, JSON and command line only where they differ from their defaults
DDP_SETTINGS = ("comm_hook", "powersgd_rank", "powersgd_start_iter", "static_graph", "gradient_as_bucket_view",
                "nccl_algo", "cuda_graphs")
QUIET_TRAIN = ("lr_scaling", "lr_reference_batch", "lr_warmup_samples", "step_tolerance_pct")
OPTIONAL_TRAIN = (*DDP_SETTINGS, "eval_every_samples", *QUIET_TRAIN, "lr_tuned_from")
# the name the id's hash gives lr_tuned_from (its name before a rename: tuned points keep their ids)
TUNED_FROM_HASH_KEY = "lr_candidates"


@dataclass(frozen=True, kw_only=True)
class AllreduceConfig:
    """The all-reduce sweep of an `allreduce` point (like nccl-tests' all_reduce_perf)."""

    sizes_bytes: tuple[int, ...] = field(default=tuple(4096 * 4**i for i in range(8)), metadata=meta(
        "float32 buffer sizes to all-reduce (default 4 KiB, 16 KiB, .. 64 MiB)", "bytes",
        lo=4, limit="max_allreduce_bytes"))
    iters: int = field(default=20, metadata=meta("timed all-reduces per size", lo=1, hi=100_000))
    warmup: int = field(default=5, metadata=meta("untimed all-reduces per size before timing", lo=0, hi=10_000))

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes_bytes", as_tuple(self.sizes_bytes))
        validate(self, "allreduce.", None)
        if not self.sizes_bytes:
            raise PointError("allreduce.sizes_bytes", "needs at least one size")
        if any(s % 4 for s in self.sizes_bytes):
            raise PointError("allreduce.sizes_bytes", f"must be multiples of 4 bytes (float32), "
                                                      f"got {list(self.sizes_bytes)}")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where the ranks run and how they are started; part of what is measured."""

    nodes: int = field(default=1, metadata=meta("nodes (torchrun agents / Slurm nodes)", lo=1, limit="max_nodes"))
    gpus_per_node: int = field(default=1, metadata=meta(
        "ranks per node (GPUs, or CPU processes)", lo=1, limit="max_ranks_per_node"))
    launcher: str = field(default="torchrun", metadata=meta(
        "torchrun = one agent per node; srun = one Slurm task per rank (Slurm only)", choices=LAUNCHERS))
    device: str = field(default="auto", metadata=meta(
        "auto = CUDA when a usable device is visible, else CPU (gloo)", choices=DEVICES))
    threads_per_rank: int = field(default=1, metadata=meta("torch (and numba) threads per rank", lo=1, hi=1024))
    # the emulated cluster (workflow/scripts/launch/netemu.py): a multi-node point's nodes are network
    # namespaces on one host, each node's egress limited to link_mbit; 0 = no emulation
    link_mbit: float = field(default=0.0, metadata=meta(
        "emulated inter-node link rate (0 = not emulated)", "Mbit/s", lo=0, hi=100_000))
    link_burst_kb: float = field(default=32.0, metadata=meta("emulated link's tbf burst", "KiB", gt=0, hi=65536))
    link_latency_us: float = field(default=0.0, metadata=meta(
        "emulated link's added one-way delay (netem; 0 = none)", "us", lo=0, hi=1_000_000))

    def __post_init__(self) -> None:
        validate(self, "placement.", None)
        if self.link_mbit and self.nodes < 2:
            raise PointError("placement.link_mbit", "an emulated link joins nodes: only points of 2 or more nodes")

    @property
    def emulated(self) -> bool:
        return self.link_mbit > 0

    def measured(self) -> dict:
        """The placement as the id's hash sees it: the link fields only where a link is emulated, so
        every point measured before emulation existed keeps its id."""
        d = plain(self)
        if not self.emulated:
            for k in ("link_mbit", "link_burst_kb", "link_latency_us"):
                d.pop(k)
        return d

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measurement point = one job = one record."""

    study: str = field(default="study", metadata=meta("study name (results/<study>/)"))
    experiment: str = field(default="strong", metadata=meta("which scaling experiment", choices=POINT_EXPERIMENTS))
    rep: int = field(default=0, metadata=meta("repeat index", lo=0, limit="max_repeats"))
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    placement: Placement = field(default_factory=Placement)
    allreduce: AllreduceConfig | None = None  # only for experiment "allreduce"
    data: DataConfig = field(default_factory=DataConfig)
    limits: Limits = field(default_factory=Limits, compare=False)

    def __post_init__(self) -> None:
        validate(self, "", self.limits)
        if not re.fullmatch(r"[A-Za-z0-9_]+", self.study):
            raise PointError("study", f"{self.study!r} must be letters, digits and _ only (it names folders)")
        for name in ("model", "train", "placement", "allreduce"):
            sub = getattr(self, name)
            if sub is not None:
                sub = sub.checkable() if name == "train" else sub
                validate(sub, f"{'training' if name == 'train' else name}.", self.limits)
        self.data.check_widths(self.model.widths)
        if (self.experiment == "allreduce") != (self.allreduce is not None):
            raise PointError("experiment", "an allreduce point needs allreduce settings, and only it has them")
        p, t = self.placement, self.train
        if not t.ddp and p.world_size != 1:
            raise PointError("training.ddp", f"the non-DDP baseline runs one rank, the placement has {p.world_size}")
        if self.experiment != "allreduce":
            self._check_steps()
            if (t.lr_scaling == "none") != (t.lr_reference_batch == 0):
                raise PointError("training.lr_reference_batch" if t.lr_reference_batch else "training.lr_scaling",
                                 f"lr_scaling {t.lr_scaling} with lr_reference_batch {t.lr_reference_batch}: "
                                 "linear and sqrt scale lr from a reference global batch (>= 1), none has none")

    @property
    def tuning_key(self) -> str:
        """What this point looks its tuned rate up by: the `tuning_key` of a choice in
        results/<study>/lr_tuning.json (which names the choice by its model's display name). The
        model's label, and its data where they are not the default (every Feynman equation gets its
        own rate); no widths: the sweep's rate serves every width of the implementation."""
        return self.model.label + (f" on {self.data.label}" if self.data.measured() else "")

    @property
    def lr_effective(self) -> float | None:
        """The rate this point trains with after its warm-up: training.lr scaled to its global batch
        (kan/lr.py); None while a tuned point's rate is unset."""
        t = self.train
        if t.lr is None:
            return None
        return scaled_lr(t.lr, t.lr_scaling, t.batch_per_rank * self.placement.world_size, t.lr_reference_batch)

    def _check_steps(self) -> None:
        """Plan-time checks that would otherwise fail a whole job: every rank gets a full batch and at
        least one synchronised step is timed after warm-up (partial batches are never timed)."""
        t, world = self.train, self.placement.world_size
        if t.samples < world:
            raise PointError("training.samples", f"{t.samples} samples cannot feed {world} ranks")
        per_rank = -(-t.samples // world)  # ceil: the sampler pads to a multiple of the world size
        if t.batch_per_rank > per_rank:
            raise PointError("training.batch_per_rank", f"{t.batch_per_rank} is more than the {per_rank} samples "
                                                        f"per rank ({t.samples} samples / {world} ranks)")
        steps_per_epoch = -(-per_rank // t.batch_per_rank)
        full_per_epoch = per_rank // t.batch_per_rank
        total = t.epochs * steps_per_epoch
        if t.max_steps:
            total = min(total, t.max_steps)
        k = t.comm_probe_every if t.ddp else 0
        for s in range(t.warmup_steps, total):
            if s % steps_per_epoch < full_per_epoch and not (k and s % k == k - 1):
                return  # the first timed synchronised step
        raise PointError("training.warmup_steps",
                         f"no timed step would remain: {total} steps in all ({t.epochs} epoch{'' if t.epochs == 1 else 's'} x {steps_per_epoch}"
                         f" steps{f', max_steps {t.max_steps}' if t.max_steps else ''}) and the first "
                         f"{t.warmup_steps} are warm-up; give more samples or epochs, or fewer warm-up steps")

    # ---- identity ----
    def measured(self) -> dict:
        """Every field that changes what this point measures (the id's hash covers exactly these)."""
        d = {"experiment": self.experiment, "placement": self.placement.measured()}
        if self.allreduce is not None:
            d["allreduce"] = plain(self.allreduce)
        else:
            d["model"] = self.model.measured()
            d["train"] = self.train.measured()
            if "lr_tuned_from" in d["train"]:
                d["train"][TUNED_FROM_HASH_KEY] = d["train"].pop("lr_tuned_from")
            if self.data.measured():  # the default data are left out: old points keep their ids
                d["data"] = self.data.measured()
        return d

    @property
    def id(self) -> str:
        return self._name(f"r{self.rep}")

    @property
    def family(self) -> str:
        """The id without the repeat: every repeat of this point shares it (adaptive repeats add to a family)."""
        return self._name("")

    def _name(self, rep: str) -> str:
        digest = hashlib.sha1(json.dumps(self.measured(), sort_keys=True).encode()).hexdigest()[:8]
        p = self.placement
        where = f"n{p.nodes}g{p.gpus_per_node}" + (f"l{p.link_mbit:g}" if p.emulated else "")
        if self.experiment == "allreduce":
            return "-".join(filter(None, ("allreduce", where, rep, digest)))
        model = self.model.label + ("" if self.train.ddp else "_noddp")
        widths = "x".join(map(str, self.model.widths))
        setting = self.train.ddp_label.replace(" ", "_").replace(".", "p") if self.experiment == "ddp" else ""
        if self.experiment == "lr_tune":  # one sweep point per candidate rate: the rate in its name
            setting = f"lr{self.train.lr:g}".replace(".", "p")
        if self.experiment == "batch":  # one point per global batch (one rank: batch_per_rank is it)
            setting = f"b{self.train.batch_per_rank}"
        return "-".join(filter(None, (self.experiment, model, widths, where, setting, rep, digest)))

    # ---- JSON ----
    def to_json(self) -> dict:
        # the emulated link's and DDP's own settings only where they are set (as in the id's hash):
        # this JSON is the measure rule's params, and a changed params string makes Snakemake run a
        # point again, so a study recorded before these fields existed is not measured twice
        d = plain(self)
        d["placement"] = self.placement.measured()
        if d.get("train") is not None:
            d["train"] = {k: v for k, v in d["train"].items()
                          if k not in OPTIONAL_TRAIN or k in self.train.measured()}
        d["data"] = self.data.measured()
        if not d["data"]:
            d.pop("data")
        if d.get("model") is not None and not self.model.impl_sha256:
            d["model"].pop("impl_sha256")
        d["id"] = self.id
        d["point_version"] = POINT_VERSION
        return d

    @classmethod
    def from_json(cls, d: dict) -> Point:
        d = dict(d)
        d.pop("id", None)
        version = d.pop("point_version", POINT_VERSION)
        if version != POINT_VERSION:
            raise PointError("point_version", f"{version} is not {POINT_VERSION}")
        kw = {}
        for f in (f for f in dataclasses.fields(cls) if f.name in d):
            v = d.pop(f.name)
            sub = _SUBCONFIGS.get(f.name)
            if sub is not None and v is not None:
                if not isinstance(v, dict):
                    raise PointError(f.name, f"must be a mapping, got {v!r}")
                if f.name == "train" and TUNED_FROM_HASH_KEY in v:  # a record from before the rename
                    v = {("lr_tuned_from" if k == TUNED_FROM_HASH_KEY else k): x for k, x in v.items()}
                v = from_dict(sub, v, SECTION[f.name])
            kw[f.name] = v
        if d:
            raise PointError(next(iter(d)), f"unknown point field(s): {', '.join(sorted(d))}")
        return cls(**kw)

    # ---- CLI ----
    def to_argv(self) -> list[str]:
        """`python -m kan.train` flags for this point (parsed back by point_from_args); a tuned point
        whose rate is unset has none: PointError."""
        if self.allreduce is None and self.train.lr is None:
            raise PointError("training.lr", f"{self.id} is tuned and its rate unset: the lr sweep chose none for "
                                            f"{self.tuning_key} yet (results/{self.study}/lr_tuning.json)")
        argv = [f"--study={self.study}", f"--experiment={self.experiment}", f"--rep={self.rep}"]
        for name in ("model", "train", "placement", "allreduce", "data"):
            sub = getattr(self, name)
            if sub is None:
                continue
            for f in dataclasses.fields(sub):
                v = getattr(sub, f.name)
                if name == "data" and f.name not in self.data.measured():
                    continue  # the default data: the command line of every older point stays as it was
                if name == "model" and f.name == "impl_sha256" and not v:
                    continue
                if name == "train" and f.name in (*QUIET_TRAIN, "lr_tuned_from") and f.name not in self.train.measured():
                    continue  # likewise the rate's rule at its defaults
                if isinstance(v, bool):
                    argv.append(f"--{flag(f)}" if v else f"--no-{flag(f)}")
                elif isinstance(v, tuple):
                    argv.append(f"--{flag(f)}={','.join(map(flag_value, v))}")
                else:
                    argv.append(f"--{flag(f)}={flag_value(v)}")
        lim = [f"{f.name}={getattr(self.limits, f.name)}" for f in dataclasses.fields(Limits)
               if getattr(self.limits, f.name) != f.default]
        if lim:
            argv.append(f"--limits={','.join(lim)}")
        return argv


_SUBCONFIGS = {"model": ModelConfig, "train": TrainConfig, "placement": Placement, "allreduce": AllreduceConfig,
               "limits": Limits, "data": DataConfig}
# the config's section for each point part (errors name the config key)
SECTION = {"model": "model", "train": "training", "placement": "placement", "allreduce": "allreduce",
           "limits": "limits", "launch": "launch", "data": "data"}
