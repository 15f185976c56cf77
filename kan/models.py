"""Model stacks: the KAN under study and its MLP baselines (pure nn.Modules, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from .contract import factory
from .contract.model_config import IMPLS, ModelConfig
from .layers import KANLinear

_DEFAULT = ModelConfig()


def _check_widths(widths: Sequence[int]) -> list[int]:
    widths = [int(w) for w in widths]
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise ValueError(f"widths must list >= 2 positive layer widths, got {widths}")
    return widths


class KAN(nn.Module):
    """A stack of KANLinear layers: (batch, widths[0]) -> (batch, widths[-1])."""

    def __init__(
        self,
        widths: Sequence[int],
        grid_size: int = _DEFAULT.grid_size,
        spline_order: int = _DEFAULT.spline_order,
        grid_range: tuple[float, float] = _DEFAULT.grid_range,
        basis: str = _DEFAULT.basis,
    ) -> None:
        super().__init__()
        self.widths = _check_widths(widths)
        self.layers = nn.ModuleList(
            KANLinear(i, o, grid_size=grid_size, spline_order=spline_order, grid_range=grid_range, basis=basis)
            for i, o in zip(self.widths[:-1], self.widths[1:])
        )

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MLP(nn.Module):
    """nn.Linear + SiLU stack (no activation after the last layer)."""

    def __init__(self, widths: Sequence[int]) -> None:
        super().__init__()
        self.widths = _check_widths(widths)
        layers: list[nn.Module] = []
        for n, (i, o) in enumerate(zip(self.widths[:-1], self.widths[1:])):
            layers.append(nn.Linear(i, o))
            if n < len(self.widths) - 2:
                layers.append(nn.SiLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def mlp_param_count(widths: Sequence[int]) -> int:
    return sum(i * o + o for i, o in zip(widths[:-1], widths[1:]))


def matched_mlp_widths(widths: Sequence[int], target: int) -> list[int]:
    """Scale the hidden widths of `widths` by one factor so the MLP's parameter count is as
    close as possible to `target` (e.g. the KAN's). Inputs and outputs stay fixed."""
    widths = _check_widths(widths)
    if len(widths) == 2:
        return widths
    best, best_err = widths, abs(mlp_param_count(widths) - target)
    # the count grows monotonically with the scale factor: walk hidden width h0 = 1, 2, ...
    h0 = widths[1]
    for h in range(1, 64 * max(widths) + 1):
        cand = [widths[0]] + [max(1, round(w * h / h0)) for w in widths[1:-1]] + [widths[-1]]
        err = abs(mlp_param_count(cand) - target)
        if err < best_err:
            best, best_err = cand, err
        if mlp_param_count(cand) > target:
            break
    return best


def build_model(cfg: ModelConfig, seed: int | None = None) -> nn.Module:
    """The model a measurement point trains (the default model factory of kan.loop; the loop seeds
    torch before calling it, so `seed` is not needed here). `mlp_matched` has the KAN's parameter
    count. pykan is built by workflow/scripts/pykan_train.py in pykan's own environment."""
    kan_args = (cfg.widths, cfg.grid_size, cfg.spline_order, cfg.grid_range, cfg.basis)
    if factory.is_factory(cfg.impl):
        return build_factory(cfg)
    if cfg.impl == "kanscale":
        return KAN(*kan_args)
    if cfg.impl == "mlp":
        return MLP(cfg.widths)
    if cfg.impl == "mlp_matched":
        return MLP(matched_mlp_widths(cfg.widths, num_params(KAN(*kan_args))))
    if cfg.impl == "pykan":
        raise ValueError("impl pykan runs in its own environment: workflow/scripts/pykan_train.py supplies the model")
    raise ValueError(f"impl must be one of {IMPLS}, got {cfg.impl!r}")


def build_factory(cfg: ModelConfig) -> nn.Module:
    """The user's module; a file that changed since the plan is refused (its points are another
    measurement: their id carries the content hash the plan read)."""
    target, _, is_file = factory.parse(cfg.impl)
    if is_file and factory.file_sha256(target) != cfg.impl_sha256:
        raise factory.FactoryError(f"{cfg.impl!r}: {target} changed since the study was planned (content hash "
                                   f"{cfg.impl_sha256[:12]}...); run the workflow again to plan its new points")
    return factory.build(cfg.impl, factory.settings(cfg))
