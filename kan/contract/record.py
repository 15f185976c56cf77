"""A point's record: one versioned JSON file, one atomic writer, one validating reader.

    write(path, record)          temp file in the same folder + fsync + rename (+ fsync of the folder)
    read(path, point_id=None)    parse + check; raises InvalidRecord(reason) for anything that is not
                                 a whole, current, well-formed record of that point
    state(path, point_id=None)   what a record file says: missing, corrupt (and why), or its status
    failure(point, status, why)  the record of a point that did not measure (trainer and launcher)

An invalid record is never data: the workflow re-runs its point and the report lists it as
`corrupt` with the reason until then. Statuses:

    ok         measured
    failed     an error (the reason is the first real cause)
    oom        an out-of-memory exception, an allocator failure, or an observed OOM kill
    timeout    the point ran into its time limit
    cancelled  the launcher was told to stop (SIGTERM/SIGINT/SIGHUP, scancel)
    killed     a rank or the launcher's child died from a signal that was not an OOM kill

No torch import (the launcher and the workflow read records).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

RECORD_VERSION = 2
STATUSES = ("ok", "failed", "oom", "timeout", "cancelled", "killed")
NOT_OK = STATUSES[1:]
# what an out-of-memory error says (torch's CUDA allocator; the CPU allocator), lower case: the trainer
# classifies its exception with it, the launcher a rank's error file or log (launch/failure.py)
OOM_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory")

# what an ok record must hold: (dotted key, kind) with kind "pos" (finite > 0), "num?" (finite or null:
# a diverged loss is data), "int>0", "list" (non-empty list)
_REQUIRED_TRAIN = (
    ("world_size", "int>0"), ("timing.step_time_s", "pos"), ("timing.train_time_s", "pos"),
    ("timing.num_steps", "int>0"), ("throughput.samples_per_s", "pos"), ("model.num_params", "int>0"),
    ("memory.peak_bytes", "int>0"), ("loss.final_train", "num?"), ("loss.curve", "list"), ("ranks", "list"),
)
# a run measured elsewhere (workflow/scripts/import_records.py) has its step and time, not always its
# memory, parameters or loss: what it lacks stays null and the analysis says so
_REQUIRED_IMPORTED = (
    ("world_size", "int>0"), ("timing.step_time_s", "pos"), ("timing.train_time_s", "pos"),
    ("timing.num_steps", "int>0"), ("throughput.samples_per_s", "pos"), ("ranks", "list"),
)
_REQUIRED_ALLREDUCE = (("world_size", "int>0"), ("allreduce.sizes", "list"), ("ranks", "list"))
_REQUIRED_READINESS = (("world_size", "int>0"), ("readiness.checks", "list"), ("ranks", "list"))


class InvalidRecord(ValueError):
    """A record that must not be used: the message says why."""


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _finite(obj):
    """JSON has no NaN or infinity: they become null (a diverged loss, an undefined ratio)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write(path: str | Path, record: dict) -> None:
    """Readers see the old file or the whole new one, never half of one, also after a crash.
    Non-finite numbers are written as null."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_finite(record), f, indent=1, default=str, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the rename is still atomic
    finally:
        os.close(fd)


def _get(rec: dict, dotted: str):
    cur = rec
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise KeyError(dotted)
        cur = cur[part]
    return cur


def _kind_ok(v, kind: str) -> bool:
    real = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if kind == "pos":
        return real and v > 0
    if kind == "num?":
        return real or v is None
    if kind == "int>0":
        return isinstance(v, int) and not isinstance(v, bool) and v > 0
    if kind == "list":
        return isinstance(v, list) and len(v) > 0
    raise AssertionError(kind)


def check(rec, point_id: str | None = None) -> dict:
    """`rec` if it is a valid record (of `point_id`, when given), else InvalidRecord(reason)."""
    if not isinstance(rec, dict):
        raise InvalidRecord(f"not a JSON object but {type(rec).__name__}")
    version = rec.get("record_version")
    if version != RECORD_VERSION:
        raise InvalidRecord(f"record_version {version!r}, expected {RECORD_VERSION}")
    status = rec.get("status")
    if status not in STATUSES:
        raise InvalidRecord(f"status {status!r} is not one of {', '.join(STATUSES)}")
    point = rec.get("point")
    if not isinstance(point, dict) or not isinstance(point.get("id"), str):
        raise InvalidRecord("no point (with an id)")
    if point_id is not None and point["id"] != point_id:
        raise InvalidRecord(f"the record is of point {point['id']!r}, not {point_id!r}")
    if not isinstance(rec.get("finished_utc"), str):
        raise InvalidRecord("no finished_utc")
    if status != "ok":
        if not isinstance(rec.get("reason"), str) or not rec["reason"]:
            raise InvalidRecord(f"status {status} without a reason")
        return rec
    required = {"allreduce": _REQUIRED_ALLREDUCE, "readiness": _REQUIRED_READINESS}.get(point.get("experiment"),
                                                                                     _REQUIRED_TRAIN)
    if (rec.get("source") or {}).get("kind") == "imported":
        required = _REQUIRED_IMPORTED
    for key, kind in required:
        try:
            v = _get(rec, key)
        except KeyError:
            raise InvalidRecord(f"ok record without {key}") from None
        if not _kind_ok(v, kind):
            raise InvalidRecord(f"ok record with a bad {key}: {v!r}")
    return rec


def read(path: str | Path, point_id: str | None = None) -> dict:
    """The record at `path`, checked; InvalidRecord for a missing, empty, truncated or malformed file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InvalidRecord("no record") from None
    except OSError as e:
        raise InvalidRecord(f"unreadable: {e}") from None
    if not text.strip():
        raise InvalidRecord("empty file")
    try:
        rec = json.loads(text)
    except ValueError as e:
        raise InvalidRecord(f"not valid JSON (truncated?): {e}") from None
    return check(rec, point_id)


def state(path: str | Path, point_id: str | None = None) -> tuple[str, dict | str | None]:
    """("missing", None) | ("corrupt", reason) | (status, record) of a point's record file (its point
    id: the file's name unless given). The planner and the tables classify a record only here."""
    path = Path(path)
    if not path.exists():
        return "missing", None
    try:
        return (rec := read(path, point_id=point_id or path.stem))["status"], rec
    except InvalidRecord as e:
        return "corrupt", str(e)


def failure(point: dict, status: str, reason: str, **extra) -> dict:
    """The record of a point that did not measure. `point` is Point.to_json() (at least an id)."""
    if status not in NOT_OK:
        raise ValueError(f"a failure record needs a status in {NOT_OK}, got {status!r}")
    return {
        "record_version": RECORD_VERSION,
        "point": point,
        "status": status,
        "reason": reason or "no reason given",
        "finished_utc": now_utc(),
        **extra,
    }
