"""Atomic writes (temp file in the same folder, then rename), reading the tables back, and the
command line of the workflow's steps (`step_args`)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from kan.contract.atomic import write_text  # noqa: F401  (re-exported: the scripts' one import)

TABLES = ("points", "strong", "weak", "comm", "model_size", "ddp", "allreduce_sizes", "anatomy")
JSON_TABLES = ("fits", "model")


def write_csv(df: pd.DataFrame, path: str | Path) -> None:
    write_text(path, df.to_csv(index=False))


def json_safe(obj):
    """NaN and infinities as None (JSON null: unknown), numpy scalars as Python numbers."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(obj, path: str | Path) -> None:
    write_text(path, json.dumps(json_safe(obj), indent=1, default=str, allow_nan=False))


def read_json(path: str | Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_csv(path: str | Path) -> pd.DataFrame:
    """A CSV as a frame; an absent or zero-byte file (a producer that wrote nothing) as an empty one."""
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def read_tables(paths: dict[str, str | Path]) -> dict:
    """{name: DataFrame} for the CSV tables, plus the parsed JSON of 'fits' and 'model' when given."""
    out = {}
    for name, path in paths.items():
        out[name] = read_json(path) if name in JSON_TABLES else read_csv(path)
    return out


def step_args(description: str, argv: list[str] | None = None) -> tuple[dict, dict, dict]:
    """(inputs, params, outputs) of one workflow step, from its command line:

        --in NAME=PATH  (repeated)   --param NAME=JSON  (repeated)   --out NAME=PATH  (repeated)

    The rules run every script through a quoted `shell:` command instead of Snakemake's `script:`,
    which starts the interpreter by its unquoted path and so breaks in a checkout whose path has a
    space (snakemake issue 2645); one argument may hold 128 KiB on Linux, so no list of record
    paths travels this way (the scripts find the records in their folders)."""
    ap = argparse.ArgumentParser(description=description)
    for flag in ("--in", "--param", "--out"):
        ap.add_argument(flag, action="append", default=[], metavar="NAME=" + ("JSON" if flag == "--param" else "PATH"))
    a = ap.parse_args(argv)

    def pairs(items: list[str], flag: str, parse) -> dict:
        out = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep or not name:
                ap.error(f"{flag} {item!r}: expected NAME=VALUE")
            try:
                out[name] = parse(value)
            except ValueError as e:
                ap.error(f"{flag} {name}: not JSON ({e})")
        return out

    return pairs(a.__dict__["in"], "--in", str), pairs(a.param, "--param", json.loads), pairs(a.out, "--out", str)
