"""A tuned point's rate (training.lr: tuned): the rate the study's one-rank sweep chose for its
implementation, from results/<study>/lr_tuning.json (workflow/scripts/tune_lr.py writes it before
any tuned point runs: the measure rule has it as an input). The point's id hashes its candidates,
not its rate, so the point with the chosen rate is the planned point."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kan.config import Point


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


def resolve(point: Point, path: Path) -> tuple[Point, dict | None]:
    """(the point with its chosen rate, what the record keeps of the choice); an untuned point as it is."""
    if not point.train.tuned:
        return point, None
    try:
        tuning = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TuningError(f"training.lr: tuned, but {path} cannot be read ({e}): the lr sweep has not run") from None
    entry = choice_for(tuning, point.tuning_key)
    if not entry or entry.get("chosen") is None:
        why = (entry or {}).get("why") or f"no entry for {point.tuning_key!r}"
        raise TuningError(f"training.lr: tuned, but the sweep chose no rate for {point.tuning_key}: {why}")
    candidates = sorted(float(c["lr"]) for c in entry.get("candidates", []))
    if candidates and candidates != sorted(point.train.lr_candidates):
        raise TuningError(f"{path} was chosen from {candidates}, the point from {list(point.train.lr_candidates)}: "
                          "run the workflow again to sweep the new candidates")
    chosen = float(entry["chosen"])
    point = dataclasses.replace(point, train=dataclasses.replace(point.train, lr=chosen))
    return point, {"chosen": chosen, "why": entry.get("why", ""), "source": str(path)}
