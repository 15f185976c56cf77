"""What network a point trains (the config's `model:` section): one of the built-in implementations
or your own factory (kan/contract/factory.py), its widths, grid and basis. No torch import at module level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import factory
from .fields import PointError, as_tuple, meta, plain, validate

# pykan: the seed paper's implementation (pykan 0.2.8), run in its own environment through
# workflow/scripts/pykan_train.py with this package's loop and record; besides these, an impl may be
# a factory 'package.module:function' or 'path/file.py:function' (kan/contract/factory.py)
IMPLS = factory.BUILTIN
BASES = ("bspline", "rbf", "chebyshev")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The network a point trains."""

    impl: str = field(default="kanscale", metadata=meta(
        "kanscale = our KAN; mlp = Linear+SiLU with the same widths; mlp_matched = MLP with the KAN's "
        "parameter count; pykan = the seed paper's pykan 0.2.8 (B-spline only); or your own factory "
        "'package.module:function' / 'path/file.py:function' (kan/contract/factory.py)", choices=IMPLS,
        open_choices=True))
    basis: str = field(default="bspline", metadata=meta("KAN basis functions", choices=BASES))
    widths: tuple[int, ...] = field(default=(2, 64, 1), metadata=meta(
        "layer widths, input first; the input width is the data dimension", lo=1, limit="max_width"))
    grid_size: int = field(default=10, metadata=meta("grid intervals per input", lo=1, limit="max_grid_size"))
    spline_order: int = field(default=3, metadata=meta("B-spline order (3 = cubic)", lo=0, hi=7))
    grid_range: tuple[float, ...] = field(default=(-2.0, 2.0), metadata=meta(
        "lo,hi of the uniform grid (the data lie in [-2, 2])"))
    impl_sha256: str = field(default="", metadata=meta(
        "a file factory's content hash, resolved at plan time (new code, new points)"))

    def __post_init__(self) -> None:
        for name in ("widths", "grid_range"):
            object.__setattr__(self, name, as_tuple(getattr(self, name)))
        validate(self, "model.", None)
        if problem := factory.impl_problem(self.impl, self.impl_sha256):
            raise PointError(*problem)
        if len(self.widths) < 2:
            raise PointError("model.widths", f"needs an input and an output width, got {list(self.widths)}")
        if len(self.grid_range) != 2 or not self.grid_range[1] > self.grid_range[0]:
            raise PointError("model.grid_range", f"must be [lo, hi] with hi > lo, got {list(self.grid_range)}")
        if self.impl == "pykan" and self.basis != "bspline":
            raise PointError("model.basis", f"pykan has B-spline edges only, got {self.basis!r}")

    @property
    def label(self) -> str:
        """Readable model name: kanscale_bspline, mlp, mlp_matched, pykan; a factory's, e.g. tiny_kan_build."""
        return factory.label(self.impl) if self.impl != "kanscale" else f"{self.impl}_{self.basis}"

    def measured(self) -> dict:
        """The fields that change what the model computes (a plain MLP has no grid or basis; pykan has
        one basis)."""
        d = plain(self)
        if self.impl == "mlp":
            for k in ("basis", "grid_size", "spline_order", "grid_range"):
                d.pop(k)
        if self.impl == "pykan":
            d.pop("basis")
        if not self.impl_sha256:  # left out where there is none: built-in points keep their ids
            d.pop("impl_sha256")
        return d
