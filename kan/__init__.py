"""kanscale's KAN implementation and training entry point (`python -m kan.train`)."""

from kan.layers import KANLinear
from kan.models import KAN, MLP, build_model

__all__ = ["KAN", "KANLinear", "MLP", "build_model"]
