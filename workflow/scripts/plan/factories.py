"""Your own model factories in `model.impl` (kan/contract/factory.py), checked at plan time, before anything
runs or is written: the file or module exists and imports, the function exists and is callable, it
returns an nn.Module for the study's settings, and that module maps (batch, widths[0]) to
(batch, widths[-1]). Each failure is one config error naming the implementation string and the cause.
The check runs in a child process (kan/probes/factory_check.py) with a time limit
(model.factory_check_timeout_s): a factory that hangs, exits at import or dies of a signal is such
an error too, and nothing it sets (torch's default dtype, threads, sys.argv) reaches the planner.
The same box runs the CUDA-graph capture check (kan/probes/capture.py) of a study that asks for
training.cuda_graphs, for all the study's factories at once: `capture_checks`.

A relative file path is taken relative to the config file that names it (a --config value: relative
to the working directory) and then written relative to the working directory where it lies inside
it, so a checkout moved elsewhere plans the same points (the trainer runs there too, any launcher).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from kan.contract import factory
from kan.probes.factory_check import BOOT

_CHECKED: dict = {}  # (impl, settings, content hash, limit) -> error or None: one child a process
_NOTES: dict = {}  # impl -> what its check could not do (a factory that needs CUDA here): a warning
_CAPTURED: dict = {}  # the models' request, content hashes, limit -> their capture verdicts
_CAPTURE_NOTES: dict = {}  # impl -> why its capture could not be checked here: a warning
CAPTURE_BOOT = ("import json, sys; sys.path[:] = json.load(open(sys.argv[1] + '/request.json'))['sys_path']; "
                "from kan.probes.capture import box; box(sys.argv[1])")
CAPTURE_CHECK = "the plan's CUDA-graph capture check"
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
        # normalised, not resolved: a folder linked in (a partial report's scratch folder links the
        # study's) keeps the path the config gives, and with it the point's id
        path = Path(os.path.normpath(base / target))
        shown = os.path.relpath(path, cwd) if path.is_relative_to(cwd) else str(path)
        impls[i] = f"{shown}:{function}"


def check(impl: str, settings: dict, timeout_s: float) -> tuple[str, str | None]:
    """(content hash of a file factory or "", the error or None) for one factory and the settings it
    gets (kan.contract.factory.settings), checked in a child process given `timeout_s` seconds."""
    try:
        target, _, is_file = factory.parse(impl)
        sha = factory.file_sha256(target) if is_file and Path(target).is_file() else ""
    except factory.FactoryError as e:
        return "", str(e)
    if not BUILD["enabled"]:
        return sha, None
    key = (impl, repr(sorted(settings.items())), sha, timeout_s)
    if key not in _CHECKED:
        result = run_check(impl, settings, timeout_s)
        _CHECKED[key] = result.get("error")
        if result.get("unchecked") or result.get("note"):
            _NOTES[impl] = result.get("unchecked") or result["note"]
    return sha, _CHECKED[key]


def notes(impls: list[str]) -> list[str]:
    """One warning line per factory of `impls` whose check could not run in full here, and per
    implementation whose CUDA-graph capture could not be checked."""
    return ([f"model.impl {impl!r}: {_NOTES[impl]}" for impl in impls if impl in _NOTES]
            + [f"model.impl {impl!r}: {_CAPTURE_NOTES[impl]}" for impl in impls if impl in _CAPTURE_NOTES])


def capture_checks(models: list[dict], timeout_s: float) -> list[dict]:
    """kan/probes/capture.py's verdict {check, pass, detail, fix, findings} of each model {"impl", "settings",
    "loss"}, all checked in one child process given `timeout_s` seconds a model; a child that ends
    without a result gives every model {"error": how it ended, naming the model it was checking}. A
    verdict that could not be reached (pass None) is kept as a warning (notes)."""
    shas = [factory.file_sha256(factory.parse(m["impl"])[0]) if factory.is_factory(m["impl"])
            and factory.parse(m["impl"])[2] else "" for m in models]
    key = (json.dumps(models, sort_keys=True), tuple(shas), timeout_s)
    if key not in _CAPTURED:
        result = run_check("", {}, timeout_s * max(1, len(models)), boot=CAPTURE_BOOT, request={"models": models},
                           name=CAPTURE_CHECK)
        found = result.get("results") or [{"error": result.get("error", f"{CAPTURE_CHECK}: no result")}] * len(models)
        _CAPTURED[key] = found
        for m, r in zip(models, found):
            if r.get("pass", False) is None:
                _CAPTURE_NOTES[m["impl"]] = f"CUDA-graph capture {r['detail']}"
    return _CAPTURED[key]


def _tail(path: Path, num_lines: int = 2, num_chars: int = 300) -> str:
    """The last lines the child wrote to stderr, as one line (argparse: its usage and its error)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    text = " / ".join(lines[-num_lines:])
    return text if len(text) <= num_chars else text[:num_chars - 3] + "..."


def run_check(impl: str, settings: dict, timeout_s: float, boot: str = BOOT, request: dict | None = None,
              name: str | None = None) -> dict:
    """kan/probes/factory_check.py's result for one factory (or `boot`'s for `request`: the capture check),
    run in a child of its own session (killed with everything it started when it runs past
    `timeout_s`); a child that ends without a result is {"error": <`name` (the implementation
    string), how it ended and at which stage>}."""
    name = name or repr(impl)
    with tempfile.TemporaryDirectory(prefix="kanscale-factory-") as tmp:
        folder = Path(tmp)
        (folder / "request.json").write_text(json.dumps({"impl": impl, "settings": settings, **(request or {}),
                                                         "sys_path": list(sys.path)}))
        # the child's output goes to files, not pipes: a grandchild holding a pipe cannot stall us
        with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err:
            child = subprocess.Popen([sys.executable, "-c", boot, str(folder)], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=err, start_new_session=True)
            try:
                code = child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                try:
                    os.killpg(child.pid, signal.SIGKILL)  # the child's session: whatever it started
                except ProcessLookupError:
                    pass
                child.wait()
        stage = (folder / "stage").read_text() if (folder / "stage").is_file() else "import"
        where = {"import": "at import", "call": "while called", "forward": "in its forward pass"}.get(stage, stage)
        if code is None:
            return {"error": f"{name}: did not return within {timeout_s:g} s ({where}; "
                             f"model.factory_check_timeout_s raises the limit)"}
        if (folder / "result.json").is_file():
            return json.loads((folder / "result.json").read_text())
        tail = _tail(folder / "stderr")
        if code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return {"error": f"{name}: {how} {where}" + (f" ({tail})" if tail else "")}
