"""The study's data (the config's `data:` section) as kan DataConfigs, read and checked ONCE here,
at plan time, before anything is written: a file or column that is missing, a non-numeric or NaN
value, a single class, input or output widths that do not fit the data, and (plan/points.py) fewer
training rows than one global batch are config errors naming the file, the column and the key.

A file's path is resolved here (absolute, into the point: the trainer reads the same file from any
working directory) and its content hash goes into the point (and so its id): new data, new points.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from kan.data import user_tables
from kan.contract.data_config import DataConfig
from kan.data.feynman import num_inputs
from kan.contract.fields import PointError

# config keys of `data:` that reach DataConfig as they are (the schema's defaults are checked
# against its fields by tests/unit/test_config.py); path and equations are resolved below
DATA_FIELDS = ("kind", "features", "target", "task", "name", "val_fraction")


class Dataset(NamedTuple):
    config: DataConfig
    train_rows: int | None  # a table's rows less the held-out ones (None: drawn, as many as samples)
    source: str


def _kwargs(d: dict) -> dict:
    return {k: tuple(d[k]) if isinstance(d[k], list) else d[k] for k in DATA_FIELDS}


def datasets(cfg: dict, problems: list) -> list[Dataset]:
    """One Dataset per dataset the study trains on (one per Feynman equation, else one); a problem
    adds (config key, message) to `problems` and leaves that dataset out."""
    d, widths = cfg["data"], tuple(cfg["model"]["widths"])
    kw = _kwargs(d)
    if d["equations"] and d["kind"] != "feynman":
        problems.append(("data.equations", f"only data.kind feynman has equations, the kind is {d['kind']}"))
        return []
    if d["path"] and d["kind"] != "file":
        problems.append(("data.path", f"only data.kind file has a path, the kind is {d['kind']}"))
        return []
    if d["kind"] == "feynman":
        if not d["equations"]:
            problems.append(("data.equations", "data.kind feynman needs at least one equation"))
        out = []
        for i, eq in enumerate(d["equations"]):
            if num_inputs(eq) != widths[0]:
                problems.append((f"data.equations[{i}]", f"{eq} has {num_inputs(eq)} inputs but model.widths[0] is "
                                                         f"{widths[0]}; the input width must be the data's"))
                continue
            dc = _build({**kw, "equation": eq}, widths, problems)
            if dc:
                out.append(Dataset(dc, None, f"feynman {eq}"))
        return out
    if d["kind"] == "synthetic":
        dc = _build(kw, widths, problems)
        return [Dataset(dc, None, "synthetic")] if dc else []
    if d["kind"] == "file":
        if not d["path"]:
            problems.append(("data.path", "data.kind file needs a path (a .csv, .parquet or .npz table)"))
            return []
        kw["path"] = str(Path(d["path"]).expanduser().resolve())
    return _table(kw, widths, problems, cfg["training"]["seed"])


def _build(kw: dict, widths: tuple, problems: list) -> DataConfig | None:
    try:
        dc = DataConfig(**kw)
        dc.check_widths(widths)
        return dc
    except PointError as e:
        problems.append((e.key, e.message))
        return None


def _table(kw: dict, widths: tuple, problems: list, seed: int) -> list[Dataset]:
    """A file or sklearn table: read, checked against the model's widths, hashed."""
    dc = _build(kw, widths, problems)
    if dc is None:
        return []
    try:
        table = user_tables.read_table(dc)
    except user_tables.DataError as e:
        problems.append(("data.path" if dc.kind == "file" else "data.name", str(e)))
        return []
    n_in = len(table.features)
    n_out = len(table.classes) if dc.classification else 1
    if widths[0] != n_in:
        problems.append(("model.widths", f"{table.source}: the input width {widths[0]} must be the table's "
                                         f"{n_in} feature columns ({', '.join(table.features)})"))
    if widths[-1] != n_out:
        what = (f"the {n_out} classes of column {dc.target or 'target'!r}" if dc.classification
                else "1 (one regression target)")
        problems.append(("model.widths", f"{table.source}: the output width {widths[-1]} must be {what}"))
    if len(table.y) < 2:
        problems.append(("data.path", f"{table.source}: {len(table.y)} row(s): nothing to hold out"))
        return []
    train_rows = len(table.y) - user_tables.num_held_out(len(table.y), dc.val_fraction)
    train, _ = user_tables.split(len(table.y), dc.val_fraction, seed)  # the points' own split
    if dc.classification and len(set(table.y.tolist())) > len(set(table.y[train].tolist())):
        problems.append(("data.val_fraction", f"{table.source}: column {dc.target or 'target'!r}: a class has no "
                                              f"training row after the held-out split; hold out less"))
    dc = DataConfig(**{**kw, "sha256": user_tables.content_hash(dc)})
    return [Dataset(dc, train_rows, table.source)]
