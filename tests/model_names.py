"""The names a study's output files give its models, against the one display name each model has
(scaling/tables/tidy.py model_label): every table and JSON of results/<study>/ (points/ and
attempts/ aside) must name a model by it, so that one model is one key wherever it is looked up.

    names = display_names(results)        # model_label of every planned point (plan/points.json)
    found = model_names(results)          # {name: [file: where]} of every name the outputs use
    stray = {n: w for n, w in found.items() if not names_a_model(n, names)}

What counts as a name: a CSV's `model` column; a JSON field called `model` holding a string; and the
keys of a JSON dict whose every key starts with a word the study's models go by (an implementation,
kanscale's label, a display name's family: kanscale, kanscale_bspline, kan-bspline), such as
lr_tuning.json, critical_batch.json, ddp_readiness.json, fits.json's per-experiment entries.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from kan.contract import factory
from kan.contract.point import Point
from scaling.common.columns import model_family
from scaling.tables.tidy import model_label

SKIPPED = ("points", "attempts")  # the records and their attempts: point ids, not names


def _planned(results: Path) -> list[dict]:
    return json.loads((results / "plan" / "points.json").read_text())


def display_names(results: Path) -> set[str]:
    """model_label of every point the study planned."""
    return {model_label(p) for p in _planned(results)}


def model_words(results: Path) -> set[str]:
    """The first word of any name a model of the study could be given."""
    words = set()
    for p in _planned(results):
        if p["experiment"] == "allreduce":
            continue
        impl = p["model"]["impl"]
        words |= {impl, factory.short_name(impl), Point.from_json(p).model.label, model_family(model_label(p))}
    return words


def _first_word(key: str) -> str:
    return re.split(r"[ \[]", key, maxsplit=1)[0]


def _walk(node, where: str, words: set[str], found: dict[str, list[str]]) -> None:
    if isinstance(node, dict):
        keys = [str(k) for k in node]
        if keys and all(_first_word(k) in words for k in keys):  # a dict keyed by model
            for k in keys:
                found.setdefault(k, []).append(f"{where} (key)")
        for k, v in node.items():
            if k == "model" and isinstance(v, str):
                found.setdefault(v, []).append(f"{where}.model")
            _walk(v, f"{where}.{k}", words, found)
    elif isinstance(node, list):
        for v in node:
            _walk(v, f"{where}[]", words, found)


def model_names(results: Path) -> dict[str, list[str]]:
    """{name: where it was found} over every CSV and JSON of `results` outside points/ and attempts/."""
    words, found = model_words(results), {}
    for path in sorted(results.rglob("*")):
        rel = path.relative_to(results)
        if rel.parts[0] in SKIPPED or not path.is_file():
            continue
        if path.suffix == ".csv":
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    if row.get("model"):
                        found.setdefault(row["model"], []).append(f"{rel}: model column")
        elif path.suffix == ".json":
            _walk(json.loads(path.read_text()), str(rel), words, found)
    return {name: sorted(set(where)) for name, where in found.items()}


def names_a_model(name: str, names: set[str]) -> bool:
    """A display name, or one followed by what it is about ('kan-bspline [2,8,1] 1x2': a placement)."""
    return name in names or any(name.startswith(f"{n} ") for n in names)


def stray_names(results: Path) -> dict[str, list[str]]:
    """The names the outputs give that are no display name of the study's points, with where."""
    names = display_names(results)
    return {n: w for n, w in model_names(results).items() if not names_a_model(n, names)}
