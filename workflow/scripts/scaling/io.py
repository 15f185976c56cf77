"""Atomic writes (temp file in the same folder, then rename) and reading the tables back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd


def write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_csv(df: pd.DataFrame, path: str | Path) -> None:
    write_text(path, df.to_csv(index=False))


def write_json(obj, path: str | Path) -> None:
    write_text(path, json.dumps(obj, indent=1, default=str, allow_nan=False))


def read_json(path: str | Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_tables(paths: dict[str, str | Path]) -> dict:
    """{name: DataFrame} for the CSV tables, plus 'fits' when a fits JSON path is given."""
    out = {}
    for name, path in paths.items():
        if name == "fits":
            out[name] = read_json(path)
        else:
            out[name] = pd.read_csv(path)
    return out
