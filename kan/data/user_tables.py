"""A table of features and a target (data.kind file or sklearn), read and checked, split and
standardised. The plan reads and checks a table ONCE (workflow/scripts/plan/data_section.py), before it
writes anything; the trainer reads the same file again (its path absolute in the point) and checks
its content hash against the planned one. No torch here.

    read_table(data)          -> Table; DataError naming the file and the column for a bad table
    content_hash(data)        sha256 of the file's bytes (of the arrays for a sklearn dataset)
    split(n, fraction, seed)  (train rows, held-out rows): one seeded permutation, no rank involved
    standardise(train, *xs)   every array with the training rows' mean and std
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..contract.data_config import DataConfig


class DataError(ValueError):
    """A table that cannot be trained on; the message names the file and the column."""


class Table(NamedTuple):
    x: np.ndarray            # (rows, features) float64
    y: np.ndarray            # (rows,) float64 (regression) or int64 class index (classification)
    features: tuple[str, ...]
    classes: tuple           # the class labels in index order (() for regression)
    source: str              # the file (or sklearn dataset) the errors name


def _columns(path: Path) -> dict[str, np.ndarray]:
    """Every column of a CSV, Parquet or NPZ file (NPZ: each 1-d array is a column)."""
    suffix = path.suffix.lower()
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            cols = {k: z[k] for k in z.files}
        bad = [k for k, v in cols.items() if v.ndim != 1]
        if bad:
            raise DataError(f"{path}: column {bad[0]!r}: an NPZ table needs one 1-d array per column, "
                            f"got shape {cols[bad[0]].shape}")
        if len({len(v) for v in cols.values()}) > 1:
            raise DataError(f"{path}: the NPZ arrays have different lengths "
                            f"({', '.join(f'{k}: {len(v)}' for k, v in cols.items())})")
        return cols
    import pandas as pd

    if suffix == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except ImportError as e:  # pandas reads Parquet through pyarrow or fastparquet, neither a dependency
            raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow), which is not "
                            f"installed here; or save the table as CSV or NPZ ({e})") from None
    elif suffix in (".csv", ".txt"):
        _check_header(path)
        frame = pd.read_csv(path)
    else:
        raise DataError(f"{path}: unknown table format {suffix!r}; allowed: .csv, .parquet, .npz")
    return {str(c): frame[c].to_numpy() for c in frame.columns}


def _check_header(path: Path) -> None:
    """DataError for a CSV header that names a column twice (pandas would call the second 'a' 'a.1')."""
    import csv

    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        header = next(csv.reader(f), [])
    seen = set()
    for i, name in enumerate(header):
        if name in seen:
            raise DataError(f"{path}: column {name!r} is named twice in the header (columns {header.index(name) + 1} "
                            f"and {i + 1}); give each column its own name")
        seen.add(name)


def _sklearn(name: str) -> tuple[dict[str, np.ndarray], str]:
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    cols = {str(n): bunch.data[:, i] for i, n in enumerate(bunch.feature_names)}
    cols["target"] = bunch.target
    return cols, "target"


def read_table(data: DataConfig) -> Table:
    """The table `data` names, checked: the file and its columns exist, features are numeric and
    finite, the target has no missing value, a classification target has 2 classes or more."""
    if data.kind == "sklearn":
        cols, target, source = *_sklearn(data.name), f"sklearn.datasets.load_{data.name}"
    else:
        path = Path(data.path)
        source = str(path)
        if not path.is_file():
            raise DataError(f"{path}: data file not found (data.path)")
        try:
            cols = _columns(path)
        except DataError:
            raise
        except Exception as e:  # a malformed file: the reader's own words
            raise DataError(f"{path}: cannot read the table: {type(e).__name__}: {e}") from None
        target = data.target
    if target not in cols:
        raise DataError(f"{source}: column {target!r} (data.target) is not in the table; its columns: "
                        f"{', '.join(cols)}")
    features = data.features or tuple(c for c in cols if c != target)
    missing = [c for c in features if c not in cols]
    if missing:
        raise DataError(f"{source}: column {missing[0]!r} (data.features) is not in the table; its columns: "
                        f"{', '.join(cols)}")
    if not features:
        raise DataError(f"{source}: no feature column beside the target {target!r}")
    xs = []
    for c in features:
        xs.append(_numeric(source, c, cols[c]))
    classification = data.classification
    y_raw = cols[target]
    if classification:
        if any(_missing(v) for v in y_raw):
            raise DataError(f"{source}: column {target!r} (the target) has a missing value")
        classes, y = np.unique(y_raw, return_inverse=True)
        if len(classes) < 2:
            raise DataError(f"{source}: column {target!r} (the target) has a single class {classes[0]!r}; "
                            f"classification needs at least 2")
        y = y.astype(np.int64)
    else:
        y, classes = _numeric(source, target, y_raw), ()
    return Table(np.stack(xs, axis=1), y, tuple(features), tuple(c.item() if hasattr(c, "item") else c
                                                                 for c in classes), source)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _numeric(source: str, column: str, values: np.ndarray) -> np.ndarray:
    try:
        out = values.astype(np.float64)
    except (TypeError, ValueError):
        bad = next((v for v in values if not _is_number(v)), values[0])
        raise DataError(f"{source}: column {column!r} has a non-numeric value {bad!r}") from None
    if not np.isfinite(out).all():
        row = int(np.flatnonzero(~np.isfinite(out))[0])
        raise DataError(f"{source}: column {column!r} has a NaN or infinite value (row {row + 1})")
    return out


def _is_number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def content_hash(data: DataConfig) -> str:
    """sha256 of the file's bytes, or of a sklearn dataset's arrays (its version's content)."""
    h = hashlib.sha256()
    if data.kind == "sklearn":
        t = read_table(data)
        h.update(np.ascontiguousarray(t.x).tobytes())
        h.update(np.ascontiguousarray(t.y).tobytes())
    else:
        with open(data.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def num_held_out(num_rows: int, fraction: float) -> int:
    """Held-out rows of a table: round(fraction x rows), at least 1 and leaving 1 to train on."""
    return min(max(1, round(fraction * num_rows)), num_rows - 1)


def split(num_rows: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows): one permutation seeded by `seed` alone, so every rank (and
    the plan) gets the same split."""
    order = np.random.default_rng(seed).permutation(num_rows)
    k = num_held_out(num_rows, fraction)
    return np.sort(order[k:]), np.sort(order[:k])


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """`train` and `others` shifted and scaled by the training rows' mean and std (a constant column
    is only shifted)."""
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return [(a - mean) / std for a in (train, *others)]
