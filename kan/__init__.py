"""kanscale's KAN implementation and training entry point (`python -m kan.train`).

The model classes are loaded on first use (PEP 562), so that `kan.config`, `kan.record` and
`kan.env` import without torch: the launcher and the workflow use them in processes that must
start fast.
"""

__all__ = ["KAN", "KANLinear", "MLP", "build_model"]


def __getattr__(name: str):
    if name == "KANLinear":
        from .layers import KANLinear

        return KANLinear
    if name in ("KAN", "MLP", "build_model"):
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module 'kan' has no attribute {name!r}")
