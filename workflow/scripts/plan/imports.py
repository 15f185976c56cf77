"""Measurements made elsewhere (the config's `import:` section), read and checked at plan time.

A study of imported runs is planned like any other: its config says what was measured (the
experiments, topologies, batch and samples), and every planned point must match exactly one run of
the source and every run one point, or the plan stops with an error naming the file, the row and
the column. Nothing is written before that. import_records.py then writes one ordinary record per
point, marked `source: imported`, from the run it matched.

Two formats:
  seed-suite  a folder with runs.csv (one row per run: its configuration) and <run>.csv (one row per
              epoch), as the seed paper's suite writes them (workflow/report/reference/seed-paper-a100-runs/README.md)
  table       one CSV any harness can export, one row per run or per epoch (docs/import.md)

Pure Python (csv), no pandas: the planner imports it.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from kan.contract import record
from kan.contract.point import Point

from .schema import ConfigError

FORMATS = ("seed-suite", "table")
# the experiments a run can belong to, and the seed suite's names for them
EXPERIMENTS = ("strong", "weak", "comm", "model_size")
SEED_EXPERIMENTS = {"strong_scaling": "strong", "weak_scaling": "weak", "communication_overhead_analysis": "comm",
                    "model_scaling": "model_size"}
# the generic table: (column, kind, required); kinds: int (> 0), num (finite > 0), num0 (finite >= 0),
# bool, text, widths ("2x64x1")
TABLE_COLUMNS = (
    ("run", "text", False), ("experiment", "text", True), ("ddp", "bool", False), ("nodes", "int", True),
    ("gpus_per_node", "int", True), ("batch_per_rank", "int", True), ("samples", "int", True),
    ("epochs", "int", False), ("widths", "widths", False), ("epoch", "int0", False), ("step_time_s", "num", False),
    ("epoch_time_s", "num", False), ("samples_per_s", "num", False), ("loss", "num0", False),
    ("peak_memory_gib", "num", False), ("num_params", "int", False), ("hardware", "text", False),
    ("repeat", "int0", False), ("model", "text", False), ("comm_time_s", "num0", False),
)


@dataclass
class Epoch:
    epoch: int
    step_s: float | None  # mean optimizer step of the epoch
    epoch_s: float | None  # wall time of the epoch
    loss: float | None  # training loss (the source has no held-out set)
    peak_gib: float | None
    comm_s: float | None = None  # exposed communication of a step, as the source timed it


@dataclass
class Run:
    """One imported run: where it came from, what it measured, and its epochs (or one summary row)."""
    name: str
    where: str  # "file" or "file, row N": what an error names
    experiment: str
    ddp: bool
    nodes: int
    gpus_per_node: int
    batch_per_rank: int
    samples: int
    epochs: int
    widths: tuple[int, ...] | None
    rows: list[Epoch] = field(default_factory=list)
    num_params: int | None = None  # every parameter, frozen ones too (as kanscale's records count them)
    hardware: str = ""
    trainable_params: int | None = None  # those DDP all-reduces; None: all of num_params
    repeat: int = 0  # which run of its configuration (the table's repeat column; a point's rep)
    model_name: str | None = None  # the source's name for the model (the table's model column)

    @property
    def grads_bytes(self) -> int | None:
        n = self.trainable_params or self.num_params
        return 4 * n if n else None

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def key(self) -> tuple:
        return (self.experiment, self.ddp, self.nodes, self.gpus_per_node, self.batch_per_rank, self.samples,
                self.repeat)


def _bad(where: str, column: str, value, allowed: str) -> ConfigError:
    return ConfigError(f"{where}, column {column}: {value!r} is not {allowed}")


def _value(where: str, column: str, text: str | None, kind: str):
    """The cell parsed as `kind`, None when empty; a ConfigError naming the file, row and column."""
    text = (text or "").strip()
    if not text:
        return None
    if kind == "text":
        return text
    if kind in ("int", "int0"):
        try:
            v = int(text)
        except ValueError:
            raise _bad(where, column, text, "a whole number") from None
        if v < (0 if kind == "int0" else 1):
            raise _bad(where, column, text, "a whole number >= 0" if kind == "int0" else "a whole number >= 1")
        return v
    if kind in ("num", "num0"):
        try:
            v = float(text)
        except ValueError:
            raise _bad(where, column, text, "a number") from None
        if not math.isfinite(v) or v < 0 or (kind == "num" and v == 0):
            raise _bad(where, column, text, "a finite number > 0" if kind == "num" else "a finite number >= 0")
        return v
    if kind == "bool":
        low = text.lower()
        if low not in ("true", "false", "1", "0", "ddp", "single"):
            raise _bad(where, column, text, "true or false (or ddp / single)")
        return low in ("true", "1", "ddp")
    if kind == "widths":
        try:
            ws = tuple(int(w) for w in text.lower().replace(",", "x").split("x"))
        except ValueError:
            raise _bad(where, column, text, "widths like 2x64x1") from None
        if len(ws) < 2 or min(ws) < 1:
            raise _bad(where, column, text, "widths like 2x64x1")
        return ws
    raise AssertionError(kind)


def _read_csv(path: Path, required: tuple[str, ...], known: tuple[str, ...] | None = None) -> list[dict]:
    """Rows of a CSV as dicts; a missing file, a missing or repeated column is a ConfigError."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        if not header:
            raise ConfigError(f"{path}: empty file (no header row)")
        dup = sorted({h for h in header if header.count(h) > 1})
        if dup:
            raise ConfigError(f"{path}: the header repeats column {dup[0]!r}")
        missing = [c for c in required if c not in header]
        if missing:
            raise ConfigError(f"{path}: no column {missing[0]!r} (the columns are {', '.join(header)})")
        if known is not None:
            unknown = [h for h in header if h not in known]
            if unknown:
                raise ConfigError(f"{path}: unknown column {unknown[0]!r}; allowed: {', '.join(known)}")
        rows = []
        for i, cells in enumerate(reader, start=2):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise ConfigError(f"{path}, row {i}: {len(cells)} cells, the header has {len(header)}")
            rows.append({"_row": i, **dict(zip(header, cells))})
    if not rows:
        raise ConfigError(f"{path}: no data rows")
    return rows


# the seed suite: runs.csv's columns, and each run's per-epoch columns (workflow/report/reference/seed-paper-a100-runs/README.md)
SEED_RUN_COLUMNS = ("run", "test_type", "mode", "gpu_count", "node_count", "gpus_per_node", "k", "grid_size",
                    "width", "batch_size", "epochs", "dataset_size")
SEED_EPOCH_COLUMNS = ("epoch", "loss", "epoch_time", "avg_batch_time", "max_allocated_gb")


def read_seed_suite(folder: Path, hardware: str) -> list[Run]:
    index = folder / "runs.csv"
    runs = []
    for r in _read_csv(index, SEED_RUN_COLUMNS):
        where = f"{index}, row {r['_row']}"
        test = r["test_type"].strip()
        if test not in SEED_EXPERIMENTS:
            raise _bad(where, "test_type", test, "one of " + ", ".join(SEED_EXPERIMENTS))
        mode = r["mode"].strip()
        if mode not in ("single", "ddp"):
            raise _bad(where, "mode", mode, "single or ddp")
        num = {c: _value(where, c, r[c], "int") for c in SEED_RUN_COLUMNS[3:]}
        for c, v in num.items():
            if v is None:
                raise ConfigError(f"{where}, column {c}: empty")
        if num["gpus_per_node"] * num["node_count"] != num["gpu_count"]:
            raise ConfigError(f"{where}, column gpu_count: {num['gpu_count']} is not node_count x gpus_per_node "
                              f"({num['node_count']} x {num['gpus_per_node']})")
        run = Run(name=r["run"].strip(), where=where, experiment=SEED_EXPERIMENTS[test], ddp=mode == "ddp",
                  nodes=num["node_count"], gpus_per_node=num["gpus_per_node"], batch_per_rank=num["batch_size"],
                  samples=num["dataset_size"], epochs=num["epochs"], widths=(2, num["width"], 1),
                  hardware=hardware)
        run.num_params, run.trainable_params = pykan_params((2, num["width"], 1), num["grid_size"], num["k"])
        path = folder / f"{run.name}.csv"
        for e in _read_csv(path, SEED_EPOCH_COLUMNS):
            w = f"{path}, row {e['_row']}"
            run.rows.append(Epoch(epoch=_required(w, "epoch", e, "int0"), step_s=_required(w, "avg_batch_time", e, "num"),
                                  epoch_s=_required(w, "epoch_time", e, "num"), loss=_value(w, "loss", e["loss"], "num0"),
                                  peak_gib=_value(w, "max_allocated_gb", e["max_allocated_gb"], "num")))
        _check_epochs(run, path)
        runs.append(run)
    return runs


def pykan_params(widths: tuple[int, ...], grid: int, k: int) -> tuple[int, int]:
    """(all, trainable) parameters of pykan 0.2.8's MultKAN at its defaults, as the seed suite built it.
    Per edge: grid + k spline coefficients, scale_base, scale_sp and the symbolic branch's 4 affine
    ones are trained (grid + k + 6); the spline and symbolic masks are frozen (2 more); per input node the
    grid (grid + 2k + 1 points) and per output node 4 biases and scales are frozen. [2, 32, 1], grid 10,
    k 3: 96 edges x 21 + 34 x 17 + 33 x 4 = 2,726 in all (the paper's count), 96 x 19 = 1,824 trained."""
    edges = sum(a * b for a, b in zip(widths, widths[1:]))
    frozen = edges * 2 + sum(widths[:-1]) * (grid + 2 * k + 1) + sum(widths[1:]) * 4
    trained = edges * (grid + k + 6)
    return trained + frozen, trained


def _required(where: str, column: str, row: dict, kind: str):
    v = _value(where, column, row.get(column), kind)
    if v is None:
        raise ConfigError(f"{where}, column {column}: empty")
    return v


def _check_epochs(run: Run, where) -> None:
    seen = [e.epoch for e in run.rows]
    if len(set(seen)) != len(seen):
        raise ConfigError(f"{where}: epoch {next(x for x in seen if seen.count(x) > 1)} appears twice")
    if len(seen) != run.epochs and run.epochs:
        raise ConfigError(f"{where}: {len(seen)} epochs, its run says {run.epochs} (column epochs)")
    run.rows.sort(key=lambda e: e.epoch)


def read_table(path: Path, hardware: str) -> list[Run]:
    """The generic table: one row per run, or per epoch of a run (rows of one run share `run`)."""
    names = tuple(c for c, _, _ in TABLE_COLUMNS)
    rows = _read_csv(path, tuple(c for c, _, req in TABLE_COLUMNS if req), names)
    runs: dict[str, Run] = {}
    for r in rows:
        where = f"{path}, row {r['_row']}"
        v = {c: _value(where, c, r.get(c), kind) for c, kind, _ in TABLE_COLUMNS}
        for c, _, req in TABLE_COLUMNS:
            if req and v[c] is None:
                raise ConfigError(f"{where}, column {c}: empty (required)")
        if v["experiment"] not in EXPERIMENTS:
            raise _bad(where, "experiment", v["experiment"], "one of " + ", ".join(EXPERIMENTS))
        if v["step_time_s"] is None and v["epoch_time_s"] is None:
            raise ConfigError(f"{where}, column step_time_s: empty, and so is epoch_time_s (one of them is needed)")
        name = v["run"] or f"row{r['_row']}"
        ddp = v["ddp"] if v["ddp"] is not None else v["nodes"] * v["gpus_per_node"] > 1
        repeat = v["repeat"] or 0
        run = runs.get(name)
        if run is None:
            run = runs[name] = Run(name=name, where=where, experiment=v["experiment"], ddp=ddp, nodes=v["nodes"],
                                   gpus_per_node=v["gpus_per_node"], batch_per_rank=v["batch_per_rank"],
                                   samples=v["samples"], epochs=v["epochs"] or 0, widths=v["widths"],
                                   num_params=v["num_params"], hardware=v["hardware"] or hardware, repeat=repeat,
                                   model_name=v["model"])
        elif run.key() != (v["experiment"], ddp, v["nodes"], v["gpus_per_node"], v["batch_per_rank"], v["samples"],
                           repeat):
            raise ConfigError(f"{where}: run {name!r} was described differently in {run.where}")
        epoch = v["epoch"] if v["epoch"] is not None else len(run.rows)
        step = v["step_time_s"]
        if step is None:  # an epoch's mean step from its wall time: steps = ceil(ceil(samples / p) / b)
            steps = math.ceil(math.ceil(run.samples / run.world_size) / run.batch_per_rank)
            step = v["epoch_time_s"] / steps
        if v["comm_time_s"] is not None and v["comm_time_s"] > step:
            raise _bad(where, "comm_time_s", v["comm_time_s"], f"at most the row's step ({step:g} s): the "
                       f"communication a step waits on is part of it")
        run.rows.append(Epoch(epoch=epoch, step_s=step, epoch_s=v["epoch_time_s"], loss=v["loss"],
                              peak_gib=v["peak_memory_gib"], comm_s=v["comm_time_s"]))
    names = {r.model_name for r in runs.values()}
    if len(names) > 1:
        raise ConfigError(f"{path}, column model: {', '.join(sorted(map(str, names)))}: one model per table "
                          f"(a config plans one model's runs); split the table, one config each")
    for run in runs.values():
        if not run.epochs:
            run.epochs = len(run.rows)
        _check_epochs(run, f"{path} (run {run.name})")
    return list(runs.values())


def read_runs(spec: dict) -> list[Run]:
    """The runs of the config's `import:` section (validated by the schema)."""
    path = Path(spec["path"]).expanduser()
    if spec["format"] == "seed-suite":
        if not path.is_dir():
            raise ConfigError(f"path {path} is not a folder (format seed-suite reads runs.csv and <run>.csv)")
        return read_seed_suite(path, spec["hardware"])
    return read_table(path, spec["hardware"])


def point_key(point) -> tuple:
    t, pl = point.train, point.placement
    return (point.experiment, bool(t.ddp), pl.nodes, pl.gpus_per_node, t.batch_per_rank, t.samples, point.rep)


def _describe(key: tuple, widths, repeats: bool) -> str:
    exp, ddp, n, g, b, s, rep = key
    w = "x".join(map(str, widths)) if widths else "?"
    # a weak point's samples grow with its GPUs: the table's samples column is the run's total
    count = f"{s} samples in all ({s // (n * g)} per GPU)" if exp == "weak" else f"{s} samples"
    return (f"{exp}, {n} node{'s' if n != 1 else ''} x {g} GPU{'s' if g != 1 else ''}{'' if ddp else ' without DDP'}, batch {b} per rank, "
            f"{count}, widths {w}" + (f", repeat {rep}" if repeats else ""))


def match(points: dict, runs: list[Run], source: str) -> dict[str, Run]:
    """{point id: its run}: every training point of the plan has exactly one run and every run a point.
    `points`: the planned points (kan.contract.point.Point); `source`: what the errors name."""
    training = {pid: p for pid, p in points.items() if p.experiment in EXPERIMENTS}
    other = sorted({p.experiment for p in points.values() if p.experiment not in EXPERIMENTS})
    if other:
        raise ConfigError(f"{source}: a study of imported runs plans only {', '.join(EXPERIMENTS)} points; "
                          f"turn off experiments {', '.join(other)} (and training.lr: tuned)")
    # each repeat is one run (the table's repeat column, 0 to repeats - 1)
    last_rep = max((p.rep for p in training.values()), default=0)
    repeats = last_rep > 0 or any(r.repeat for r in runs)
    out: dict[str, Run] = {}
    used: dict[int, str] = {}
    for pid, p in training.items():
        found = [r for r in runs if r.key() == point_key(p) and (r.widths is None or r.widths == p.model.widths)]
        if not found:
            raise ConfigError(f"{source}: no imported run for the planned point "
                              f"{_describe(point_key(p), p.model.widths, repeats)} "
                              f"(import.path: {runs[0].where.split(',')[0]})")
        if len(found) > 1:
            raise ConfigError(f"{source}: the planned point {_describe(point_key(p), p.model.widths, repeats)} "
                              f"matches {len(found)} runs: {found[0].where} and {found[1].where}"
                              + ("" if repeats else "; runs of one configuration need a repeat column (0, 1, ...) "
                                 "and the config's repeats as many"))
        out[pid] = found[0]
        used[id(found[0])] = pid
    for r in runs:
        if id(r) not in used:
            more = (f"the config's repeats ({1 + last_rep}) do not reach repeat {r.repeat}" if r.repeat > last_rep
                    else "add its topology, batch and samples to the config's experiments")
            raise ConfigError(f"{r.where}: run {r.name} ({_describe(r.key(), r.widths, repeats)}) matches no planned "
                              f"point; {more}")
    return out


def source_files(spec: dict) -> list[str]:
    """The files an import reads (the import rule's inputs: an edited file imports again)."""
    path = Path(spec["path"])
    if spec["format"] == "table":
        return [str(path)]
    names = [r["run"].strip() for r in _read_csv(path / "runs.csv", ("run",))]
    return [str(path / "runs.csv")] + [str(path / f"{n}.csv") for n in names]


NO_REPEATS = "repeats (one run per point)"
LACKS = ("a held-out set (loss is training loss)", NO_REPEATS, "a no_sync probe (DDP's communication is not "
         "measured apart from the step)", "the step's anatomy")


def _source_comm(rows: list[Epoch], step: float, ddp: bool) -> dict:
    """The record's exposed communication: the source's own timing (column comm_time_s), the median
    over the epochs the step is taken from, used as the exposed communication of the step (the
    communication tables and guidelines read it); the performance model still takes a DDP step's cost
    as its step less the run without DDP, which holds whatever DDP adds."""
    timed = [e.comm_s for e in rows if e.comm_s is not None]
    if not timed or not ddp:
        return {"exposed_s": None, "exposed_pct": None, "method": "not measured: an imported run has no no_sync probe"}
    exposed = float(statistics.median(timed))
    return {"exposed_s": exposed, "exposed_pct": 100 * exposed / step,
            "method": "timed by the source (the table's comm_time_s): exposed communication per step"}


def imported_record(point: Point, run: Run, spec: dict, repeats: int = 1) -> dict:
    """The record of `point` from its run. From the run's epochs (the first left out of the step times
    when there are more: it carries the device's start-up, as the trainer's warm-up steps do):
        timing.step_s        median, p10, p90, mean over the epochs' mean steps; n = epochs used
        timing.step_time_s   that median (the per-epoch spread, not repeats, is all the run has)
        throughput           batch x world size / step; wall: samples x epochs / the epochs' summed time
        memory.peak_bytes    the largest peak the run reports (rank 0's GPU)
        loss.curve           training loss per epoch, at the epoch's end (steps, samples and seconds
                             summed over the epochs before it); no held-out loss: the source has none
    Unknown to an imported run, left null: the no_sync step and exposed communication (no probe), the
    all-reduce bytes, the step's anatomy; and repeats, unless the study has more than one (`repeats`:
    the source's repeat column)."""
    from kan.metrics import summarize  # the trainer's own step statistics (torch: imported here, not by the planner)

    p, b = point.placement.world_size, point.train.batch_per_rank
    rows = run.rows[1:] if len(run.rows) > 1 else run.rows
    steps = summarize([e.step_s for e in rows])
    step = steps["median"]
    steps_per_epoch = math.ceil(math.ceil(run.samples / p) / b)
    epoch_s = [e.epoch_s if e.epoch_s is not None else e.step_s * steps_per_epoch for e in run.rows]
    train_s = sum(epoch_s)
    curve, elapsed = [], 0.0
    for i, (e, secs) in enumerate(zip(run.rows, epoch_s)):
        elapsed += secs
        if e.loss is not None:
            curve.append({"step": (i + 1) * steps_per_epoch, "samples_seen": (i + 1) * steps_per_epoch * b * p,
                          "elapsed_s": elapsed, "train_loss": e.loss})
    peaks = [e.peak_gib for e in run.rows if e.peak_gib is not None]
    params = run.num_params
    lacks = [x for x in LACKS if repeats == 1 or x != NO_REPEATS]  # a repeat column gives repeats
    name = run.model_name or spec.get("model_name") or None
    source = {"kind": "imported", "format": spec["format"], "path": spec["path"], "run": run.name, "model_name": name,
              "where": run.where, "cited": spec["citation"], "hardware": run.hardware or "not stated",
              "lacks": lacks, "step_time_from": f"median of {steps['n']} epochs' mean steps"
                                                     + (" (epoch 0 left out)" if len(run.rows) > 1 else "")}
    final = next((e.loss for e in reversed(run.rows) if e.loss is not None), None)
    comm = _source_comm(rows, step, run.ddp and p > 1)
    return {
        "record_version": record.RECORD_VERSION,
        "point": point.to_json(),
        "status": "ok",
        "reason": None,
        "source": source,
        "provenance": {"imported_from": spec["path"], "cited": spec["citation"]},
        "world_size": p, "num_nodes": point.placement.nodes, "ranks_per_node": point.placement.gpus_per_node,
        "launcher": "imported", "device_type": "cuda", "backend": "nccl" if run.ddp else None,
        "timing": {"step_s": steps,
                   "nosync_step_s": None, "nosync_step_time_s": None, "flat_allreduce_s": None,
                   "step_time_s": step, "per_rank_step_time_s": [step], "train_time_s": train_s,
                   "epoch_time_s": train_s / len(run.rows), "num_steps": steps_per_epoch * len(run.rows),
                   "steps_per_epoch": steps_per_epoch},
        "throughput": {"samples_per_s": b * p / step, "samples_per_s_per_rank": b / step,
                       "samples_per_s_wall": run.samples * len(run.rows) / train_s},
        "comm": {**comm, "bytes_per_step": None, "bytes_per_step_source": "not known for an imported run"},
        "memory": {"kind": "cuda_max_allocated" if peaks else "not stated",
                   "peak_bytes": int(max(peaks) * 2**30) if peaks else None, "peak_gib": max(peaks) if peaks else None,
                   "grads_bytes": run.grads_bytes, "weights_bytes": 4 * params if params else None},
        "model": {"num_params": params},
        "loss": {"final_train": final, "test": None, "curve": curve, "kind": "training loss per epoch"},
        "ranks": [{"hostname": "imported", "device": "cuda", "device_name": run.hardware or "not stated"}],
        "num_hosts": point.placement.nodes,
        "finished_utc": record.now_utc(),
    }
