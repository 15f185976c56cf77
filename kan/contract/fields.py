"""What a field of the point dataclasses (kan/contract/point.py, kan/contract/study_settings.py) is: its metadata (help,
unit, CLI flag, bounds), the checks every dataclass runs on its fields, and a value's JSON and
command-line spelling. No dataclass of a point lives here; they all build on this module.
"""

from __future__ import annotations

import dataclasses
import math
import typing


class PointError(ValueError):
    """A bad point field. `key` is the field's dotted name (model.grid_size), `flag` its CLI flag."""

    def __init__(self, key: str, message: str, flag: str | None = None) -> None:
        super().__init__(f"{key}: {message}")
        self.key, self.message, self.flag = key, message, flag


def meta(help: str, unit: str = "", flag: str | None = None, lo=None, hi=None, gt=None, limit: str | None = None,
         choices: tuple | None = None, open_choices: bool = False) -> dict:
    """Field metadata: help text, unit, CLI flag, bounds (lo/hi inclusive, gt exclusive; `limit` names a
    Limits field, a bound the study config can raise); `open_choices`: the choices are the built-in
    values and the class itself checks any other (model.impl: your own factory)."""
    return {"help": help, "unit": unit, "flag": flag, "lo": lo, "hi": hi, "gt": gt, "limit": limit,
            "choices": choices, "open_choices": open_choices}


def default(cls, name: str):
    """The default of field `name` of dataclass `cls` (where code needs it, it reads it from here)."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


# ---- checks shared by every dataclass ----------------------------------------------------------

def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _check_scalar(key: str, v, typ, meta: dict, limits) -> None:
    if typ is bool:
        if not isinstance(v, bool):
            raise PointError(key, f"must be true or false, got {v!r}")
        return
    if typ is str:
        if not isinstance(v, str):
            raise PointError(key, f"must be a string, got {v!r}")
        if meta["choices"] and not meta["open_choices"] and v not in meta["choices"]:
            raise PointError(key, f"{v!r} is not allowed; allowed values: {', '.join(meta['choices'])}")
        return
    if typ is int and not _is_int(v):
        raise PointError(key, f"must be an integer, got {v!r}")
    if typ is float and not _is_real(v):
        raise PointError(key, f"must be a finite number, got {v!r}")
    lo, hi, gt = meta["lo"], meta["hi"], meta["gt"]
    if gt is not None and not v > gt:
        raise PointError(key, f"must be > {gt}, got {v!r}")
    if lo is not None and v < lo:
        raise PointError(key, f"must be >= {lo}, got {v!r}")
    if hi is not None and v > hi:
        raise PointError(key, f"must be <= {hi}, got {v!r}")
    if meta["limit"] and limits is not None:
        bound = getattr(limits, meta["limit"])
        if v > bound:
            raise PointError(key, f"{v!r} is above limits.{meta['limit']} = {bound}; raise limits.{meta['limit']} "
                                  f"in the study config if your cluster really needs it")


def _elem_type(hint):
    args = typing.get_args(hint)
    return args[0] if args else None


def validate(obj, prefix: str, limits) -> None:
    """Type, finiteness and bounds of every field of a dataclass instance; `limits` (a
    kan.contract.study_settings.Limits, or None) gives the bounds that fields with `limit` name.
    An integer given for a float field becomes that float, in place: YAML's 50 and the command
    line's 50.0 are one value, so one point id (the trainer checks its record against the plan's)."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        if "help" not in f.metadata:
            continue
        if hints[f.name] is float and _is_int(getattr(obj, f.name)):
            object.__setattr__(obj, f.name, float(getattr(obj, f.name)))
        key, v, hint = f"{prefix}{f.name}", getattr(obj, f.name), hints[f.name]
        if typing.get_origin(hint) is tuple:
            if not isinstance(v, tuple):
                raise PointError(key, f"must be a list, got {v!r}")
            elem = _elem_type(hint)
            for i, x in enumerate(v):
                _check_scalar(f"{key}[{i}]", x, elem, f.metadata, limits)
        else:
            _check_scalar(key, v, hint, f.metadata, limits)


def as_tuple(v):
    return tuple(v) if isinstance(v, list) else v


# ---- JSON and command-line spelling -------------------------------------------------------------

def plain(obj) -> dict:
    """A dataclass as JSON-able dict (tuples as lists), nested dataclasses included."""
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            v = plain(v)
        elif isinstance(v, tuple):
            v = list(v)
        out[f.name] = v
    return out


def from_dict(cls, d: dict, section: str):
    """`cls` from a JSON mapping; a key it has no field for is a PointError naming `section`.key."""
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(d) - names)
    if extra:
        raise PointError(f"{section}.{extra[0]}",
                         f"unknown key(s) {', '.join(extra)}; allowed keys: {', '.join(sorted(names))}")
    return cls(**d)


def flag(f: dataclasses.Field) -> str:
    """A field's command-line flag, without the leading --."""
    return f.metadata.get("flag") or f.name.replace("_", "-")


def flag_value(v) -> str:
    """A scalar as a flag's value: floats by repr, so they parse back to the same float."""
    return repr(v) if isinstance(v, float) else str(v)


def parser_for(hint) -> typing.Callable[[str], object]:
    """A flag's text -> the field's type (tuples as comma-separated values)."""
    if typing.get_origin(hint) is tuple:
        elem = parser_for(_elem_type(hint))
        return lambda text: tuple(elem(x) for x in text.split(","))
    if hint is int:
        return int
    if hint is float:
        return float
    return str
