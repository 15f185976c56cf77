"""`python -m kan.train` with the seed paper's pykan as the model: the same loop, record and launch
path, only the model factory differs. Runs in pykan's own environment (.venv-pykan, made by
workflow/scripts/pykan_env.py), where the import name `kan` belongs to pykan:

    .venv-pykan/bin/python workflow/scripts/pykan_train.py --kanscale=<kanscale's kan/ folder> \
        <the kan.train flags, --impl=pykan>

How the two packages named `kan` live in one process: this file loads kanscale's package (the
folder the launcher names: the `kan` of kanscale's own environment) under the name `kanscale`; its
modules import each other relatively (`from .config import ...`), so nothing in it asks for `kan`,
and `import kan` here is pykan. The alias is registered when this file starts, before anything
else, so that processes spawned from it find `kanscale` too.

The model is built as the seed paper built it (its simple_main.py: `KAN(width, grid, k, seed)`),
with pykan's other options at their defaults, because the paper's speed is the defaults' speed:
`symbolic_enabled=True` runs a Python loop over every edge in every forward pass (about 50 small ops
per edge per step), and the A100 throughput the paper reports follows that op count (BENCHMARKS.md,
"pykan"). Only `auto_save` is off: with it every rank writes a checkpoint to ./model/ when the model
is built, which changes no step.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

KANSCALE_FLAG = "--kanscale="
# pykan options that change its speed, and the values the paper ran with (pykan's defaults)
PYKAN_OPTIONS = {"symbolic_enabled": True, "save_act": True, "auto_save": False}


def kanscale_dir(argv: list[str]) -> Path:
    for a in argv:
        if a.startswith(KANSCALE_FLAG):
            return Path(a[len(KANSCALE_FLAG):]).resolve()
    raise SystemExit(f"pykan_train.py needs {KANSCALE_FLAG}<kanscale's kan/ folder> (the launcher passes it)")


def load_kanscale(folder: Path):
    if "kanscale" in sys.modules:
        return sys.modules["kanscale"]
    spec = importlib.util.spec_from_file_location("kanscale", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["kanscale"] = module
    spec.loader.exec_module(module)
    return module


KANSCALE_DIR = kanscale_dir(sys.argv[1:])
kanscale = load_kanscale(KANSCALE_DIR)


def pykan_model(cfg, seed: int):
    """pykan's KAN for a kanscale ModelConfig (impl pykan)."""
    import kan as pykan

    if Path(pykan.__file__).resolve().parent == KANSCALE_DIR:
        raise RuntimeError(f"`import kan` found kanscale's package ({KANSCALE_DIR}), not pykan: run this driver "
                           f"with the pykan environment's python (.venv-pykan/bin/python), from outside the repository "
                           f"root, without it on PYTHONPATH")
    return pykan.KAN(width=list(cfg.widths), grid=cfg.grid_size, k=cfg.spline_order, grid_range=list(cfg.grid_range),
                     seed=seed, **PYKAN_OPTIONS)


def main(argv: list[str] | None = None) -> int:
    from kanscale import train

    argv = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith(KANSCALE_FLAG)]
    return train.main(argv, model_factory=pykan_model)


if __name__ == "__main__":
    from kanscale.train import exit_now

    exit_now(main())  # as kan.train's ranks exit (kan/train.py exit_now says why)
