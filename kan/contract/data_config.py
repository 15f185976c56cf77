"""What a point trains on (the config's `data:` section, one dataset per point).

    synthetic  the seed paper's f(x) = sum_i x_i^2 + noise on [-2, 2]^d (kan/data/datasets.py); the default
    feynman    one equation of the AI Feynman database (kan/data/feynman.py), sampled with the point's seed
    file       the user's table: CSV, Parquet or NPZ (kan/data/user_tables.py), a target column and features
    sklearn    a real dataset shipped inside scikit-learn's wheel (no download)

At its defaults this section is left out of a point's id, JSON and command line, so every point
measured before it existed keeps its id. A file's (or sklearn dataset's) content hash is resolved at
plan time (workflow/scripts/plan/data_section.py) and is part of the id: new data, new points. No numpy or
torch import at module level.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .fields import PointError, as_tuple, meta, plain, validate

KINDS = ("synthetic", "feynman", "file", "sklearn")
TASKS = ("regression", "classification")
# scikit-learn's bundled datasets (sklearn.datasets.load_<name>): files inside the wheel
SKLEARN = {"diabetes": "regression", "breast_cancer": "classification", "wine": "classification",
           "iris": "classification"}


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """The dataset of a point and its held-out split."""

    kind: str = field(default="synthetic", metadata=meta("where the data come from", flag="data-kind",
                                                         choices=KINDS))
    equation: str = field(default="", metadata=meta("feynman: the equation's name (kan/data/feynman.py)",
                                                    flag="data-equation"))
    path: str = field(default="", metadata=meta("file: absolute path of the CSV, Parquet or NPZ table",
                                                flag="data-path"))
    features: tuple[str, ...] = field(default=(), metadata=meta(
        "file: the feature columns (empty = every column but the target)", flag="data-features"))
    target: str = field(default="", metadata=meta("file: the target column", flag="data-target"))
    task: str = field(default="regression", metadata=meta(
        "file: regression (MSE) or classification (cross-entropy, accuracy)", flag="data-task", choices=TASKS))
    name: str = field(default="", metadata=meta("sklearn: the dataset's name", flag="data-name"))
    val_fraction: float = field(default=0.2, metadata=meta(
        "share of the data held out for validation (seeded split, the same on every rank)", flag="data-val-fraction",
        gt=0.0, hi=0.9))
    sha256: str = field(default="", metadata=meta(
        "file / sklearn: content hash of the table, resolved at plan time", flag="data-sha256"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", as_tuple(self.features))
        validate(self, "data.", None)
        own = {"feynman": ("equation",), "file": ("path", "target", "features", "task"),
               "sklearn": ("name",)}.get(self.kind, ())
        stray = [k for k in ("equation", "path", "target", "features", "name")
                 if k not in own and getattr(self, k)]
        if stray or (self.task != "regression" and self.kind != "file"):
            raise PointError(f"data.{(stray or ['task'])[0]}", f"data.kind {self.kind} has no such key "
                                                               f"(its keys: {', '.join(own) or 'val_fraction'})")
        if self.kind == "feynman":
            from ..data.feynman import EQUATIONS

            if self.equation not in EQUATIONS:
                raise PointError("data.equation", f"{self.equation!r} is not one of {', '.join(EQUATIONS)}")
        if self.kind == "file" and not (self.path and self.target):
            raise PointError("data.path" if not self.path else "data.target", "data.kind file needs path and target")
        if self.kind == "sklearn" and self.name not in SKLEARN:
            raise PointError("data.name", f"{self.name!r} is not one of {', '.join(SKLEARN)}")
        if self.kind == "file" and self.target in self.features:
            raise PointError("data.features", f"the target {self.target!r} cannot also be a feature")

    @property
    def classification(self) -> bool:
        return (SKLEARN[self.name] if self.kind == "sklearn" else self.task) == "classification"

    def measured(self) -> dict:
        """The fields that differ from their defaults (what the id's hash, the JSON and the command
        line carry): {} for the default synthetic data, so old points keep their ids."""
        return {f.name: v for f in dataclasses.fields(self)
                if (v := plain(self)[f.name]) != (list(f.default) if isinstance(f.default, tuple) else f.default)}

    def output_width(self, num_classes: int | None = None) -> int:
        """The model's last width this data needs (classes for classification, else 1)."""
        return num_classes if self.classification else 1

    def check_widths(self, widths: tuple[int, ...]) -> None:
        """The input and output widths against what this data has, where that is known without reading
        a table (synthetic, feynman; a table's are checked at plan time against the file)."""
        if self.kind in ("synthetic", "feynman") and widths[-1] != 1:
            raise PointError("model.widths", f"the last width is the output and the task ({self.label}) has 1 target, "
                                             f"got {widths[-1]}")
        if self.kind == "feynman":
            from ..data.feynman import num_inputs

            if widths[0] != num_inputs(self.equation):
                raise PointError("model.widths", f"the input width {widths[0]} must be the {num_inputs(self.equation)} "
                                                 f"inputs of Feynman equation {self.equation} (data.equations)")

    @property
    def label(self) -> str:
        """The data in a few words: 'sum of x_i^2', 'feynman I.6.2', 'file houses.csv:price', 'sklearn wine'."""
        if self.kind == "synthetic":
            return "sum of x_i^2"
        if self.kind == "feynman":
            return f"feynman {self.equation}"
        if self.kind == "file":
            return f"file {self.path.rsplit('/', 1)[-1]}:{self.target}"
        return f"sklearn {self.name}"


def is_default_section(section: dict) -> bool:
    """Whether a validated config's `data:` section describes the default data (the seed paper's
    synthetic task): the report's config echo then leaves it out, as the point ids do."""
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items() if k in fields}
    return not section["path"] and not section["equations"] and DataConfig(**kw).measured() == {}
