"""Your own model factories in `model.impl` (kan/factory.py), checked at plan time, before anything
runs or is written: the file or module exists and imports, the function exists and is callable, it
returns an nn.Module for the study's settings, and that module maps (batch, widths[0]) to
(batch, widths[-1]). Each failure is one config error naming the implementation string and the cause.

A relative file path is taken relative to the config file that names it (a --config value: relative
to the working directory) and then written relative to the working directory where it lies inside
it, so a checkout moved elsewhere plans the same points (the trainer runs there too, any launcher).
"""

from __future__ import annotations

import os
from pathlib import Path

from kan import factory

_CHECKED: dict = {}  # (impl, settings, content hash) -> error or None: one import and build a process
# False inside a job's own snakemake (a Slurm job step re-reads the Snakefile for its one point): the
# run that planned and submitted it checked every factory; importing torch again there costs each
# point ~2 s. The content hash (the point's id) is still read.
BUILD = {"enabled": True}


def check_builds(enabled: bool) -> None:
    BUILD["enabled"] = enabled


def _listed(raw: dict) -> list:
    impl = (raw.get("model") or {}).get("impl") if isinstance(raw.get("model"), dict) else None
    return impl if isinstance(impl, list) else []


def resolve_paths(cfg: dict, files: list[tuple[str | Path, dict]], cwd: Path | None = None) -> None:
    """Rewrite the relative file factories of the validated `cfg`'s model.impl in place; `files` are
    the config files as read (path, mapping), in the order they were layered."""
    cwd = Path(cwd or os.getcwd()).resolve()
    impls = cfg["model"]["impl"]
    for i, impl in enumerate(impls):
        if not factory.is_factory(impl):
            continue
        try:
            target, function, is_file = factory.parse(impl)
        except factory.FactoryError:
            continue  # the plan's check names it
        if not is_file or Path(target).is_absolute():
            continue
        base = next((Path(path).resolve().parent for path, raw in reversed(files) if impl in _listed(raw)), cwd)
        path = (base / target).resolve()
        shown = os.path.relpath(path, cwd) if path.is_relative_to(cwd) else str(path)
        impls[i] = f"{shown}:{function}"


def check(impl: str, settings: dict) -> tuple[str, str | None]:
    """(content hash of a file factory or "", the error or None) for one factory and the settings it
    gets (kan.factory.settings)."""
    try:
        target, _, is_file = factory.parse(impl)
        sha = factory.file_sha256(target) if is_file and Path(target).is_file() else ""
    except factory.FactoryError as e:
        return "", str(e)
    if not BUILD["enabled"]:
        return sha, None
    key = (impl, repr(sorted(settings.items())), sha)
    if key not in _CHECKED:
        try:
            model = factory.build(impl, settings)
            factory.check_shape(impl, model, settings["widths"])
            _CHECKED[key] = None
        except factory.FactoryError as e:
            _CHECKED[key] = str(e)
    return sha, _CHECKED[key]
