"""A tuned point's rate (training.lr: tuned): the rate the study's one-rank sweep chose for its
implementation, from results/<study>/lr_tuning.json (workflow/scripts/tune_lr.py writes it before
any tuned point runs: the measure rule has it as an input). The plan leaves a tuned point's rate
unset; the workflow gives it the chosen one here (common_tune.smk's tuned_point, for the point JSON
the launcher gets), and that JSON is the one way the rate reaches the trainer. The point's id hashes
its candidates, not its rate, so the point with the chosen rate is the planned point."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kan.contract.point import Point


class TuningError(ValueError):
    """No rate to train with: the file or the implementation's choice is missing."""


def tuning_path(out: Path) -> Path:
    """results/<study>/lr_tuning.json beside results/<study>/points/<id>.json."""
    return out.parent.parent / "lr_tuning.json"


def choice_for(tuning: dict, key: str) -> dict | None:
    """The sweep's choice for a tuning key (Point.tuning_key): lr_tuning.json names each choice by its
    model's display name and keeps the key inside, which a point of any width shares; a file written
    before that is keyed by the tuning key itself."""
    return next((c for c in tuning.values() if c.get("tuning_key") == key), None) or tuning.get(key)


def chosen_rate(point: Point, path: Path) -> float:
    """The rate the sweep chose for a tuned point; TuningError says why there is none."""
    try:
        tuning = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TuningError(f"training.lr: tuned, but {path} cannot be read ({e}): the lr sweep has not run") from None
    entry = choice_for(tuning, point.tuning_key)
    if not entry or entry.get("chosen") is None:
        why = (entry or {}).get("why") or f"no entry for {point.tuning_key!r}"
        raise TuningError(f"training.lr: tuned, but the sweep chose no rate for {point.tuning_key}: {why}")
    candidates = sorted(float(c["lr"]) for c in entry.get("candidates", []))
    if candidates and candidates != sorted(point.train.lr_tuned_from):
        raise TuningError(f"{path} was chosen from {candidates}, the point from {list(point.train.lr_tuned_from)}: "
                          "run the workflow again to sweep the new candidates")
    return float(entry["chosen"])


def resolve(point: Point, path: Path) -> Point:
    """The point with the rate the sweep chose (TuningError when there is none); an untuned point as
    it is."""
    if not point.train.tuned:
        return point
    return dataclasses.replace(point, train=dataclasses.replace(point.train, lr=chosen_rate(point, path)))


def why_unset(point: Point, path: Path) -> str:
    """Why a tuned point reached its launcher with its rate unset (a failed record's reason)."""
    try:
        chosen_rate(point, path)
    except TuningError as e:
        return str(e)
    return (f"training.lr: tuned, but the point came without the rate {path} chose for {point.tuning_key}: "
            "run the workflow again")
