"""The trainer's command line for a point: one flag per field of kan.contract.point.Point, parsed back into
the same Point (Point.to_argv writes them)."""

from __future__ import annotations

import argparse
import dataclasses
import typing

from .point import SECTION, AllreduceConfig, ModelConfig, Placement, Point, PointError, TrainConfig
from .data_config import DataConfig
from .fields import flag, parser_for
from .study_settings import parse_limits

PARTS = (("model", ModelConfig), ("train", TrainConfig), ("placement", Placement), ("allreduce", AllreduceConfig),
         ("data", DataConfig))


def add_point_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per Point field, grouped like the config; types are checked by the dataclasses, so a
    bad value fails with the flag's name (see point_from_args)."""
    g = parser.add_argument_group("point")
    g.add_argument("--study", default=Point.study)
    g.add_argument("--experiment", default="strong")
    g.add_argument("--rep", default="0")
    g.add_argument("--limits", default="", help="overrides of Limits, e.g. max_width=100000")
    for name, cls in PARTS:
        grp = parser.add_argument_group(SECTION[name])
        for f in dataclasses.fields(cls):
            dest = f"{name}__{f.name}"
            help_ = f.metadata["help"] + (f" [{f.metadata['unit']}]" if f.metadata["unit"] else "")
            help_ = help_.replace("%", "%%")  # argparse formats help with %: "95% interval" is a literal
            if f.type in ("bool", bool):
                grp.add_argument(f"--{flag(f)}", dest=dest, action=argparse.BooleanOptionalAction, default=None,
                                 help=help_)
            else:
                grp.add_argument(f"--{flag(f)}", dest=dest, default=None, metavar=f.name.upper(), help=help_)


def point_from_args(args: argparse.Namespace) -> Point:
    """The Point the flags describe; defaults from the dataclasses. Raises PointError whose `flag`
    names the offending command-line flag."""
    hints = {cls: typing.get_type_hints(cls) for _, cls in PARTS}
    parts: dict = {}
    flag_of = {}
    for name, cls in PARTS:
        kw = {}
        for f in dataclasses.fields(cls):
            flag_of[f"{SECTION[name]}.{f.name}"] = f"--{flag(f)}"
            raw = getattr(args, f"{name}__{f.name}")
            if raw is None:
                continue
            if isinstance(raw, bool):
                kw[f.name] = raw
                continue
            try:
                kw[f.name] = parser_for(hints[cls][f.name])(raw)
            except ValueError:
                raise PointError(f"{SECTION[name]}.{f.name}", f"cannot parse {raw!r}", f"--{flag(f)}") from None
        parts[name] = kw
    try:
        rep = int(args.rep)
    except ValueError:
        raise PointError("rep", f"must be an integer, got {args.rep!r}", "--rep") from None
    try:
        limits = parse_limits(args.limits)
        allreduce = AllreduceConfig(**parts["allreduce"]) if args.experiment == "allreduce" else None
        return Point(study=args.study, experiment=args.experiment, rep=rep, model=ModelConfig(**parts["model"]),
                     train=TrainConfig(**parts["train"]), placement=Placement(**parts["placement"]),
                     allreduce=allreduce, limits=limits, data=DataConfig(**parts["data"]))
    except PointError as e:
        base = e.key.split("[")[0]
        e.flag = e.flag or flag_of.get(base) or f"--{base.split('.')[-1].replace('_', '-')}"
        raise

