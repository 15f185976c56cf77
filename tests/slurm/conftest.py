"""A real Slurm on localhost for the `slurm` tests: brought up once per session, stopped at the end.

Uses tests/slurm/slurm-local.sh (install if missing, start, stop). On a machine without root or
apt-get the tests skip with the reason; under CI (CI=true) they fail instead of skipping.
A cluster that is already up (a developer's `make slurm-up`) is reused and left running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "slurm" / "slurm-local.sh"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _script(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, check=check,
                          timeout=900)


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"CI=true but the local Slurm cannot run: {reason}", pytrace=False)
    pytest.skip(f"local Slurm unavailable: {reason}")


@pytest.fixture(scope="session")
def slurm_cluster():
    """Timings (seconds) of bringing the cluster up; the cluster is up while the tests run."""
    if not sys.platform.startswith("linux"):
        _unavailable("needs Linux (Debian/Ubuntu) with root and apt-get")
    check = _script("check", check=False)
    if check.returncode != 0:
        _unavailable(check.stdout.strip() or check.stderr.strip())
    timings = {}
    already_up = _script("status", check=False).returncode == 0
    if not already_up:
        t0 = time.monotonic()
        res = _script("install", check=False)
        if res.returncode != 0:
            _unavailable(f"install failed:\n{res.stdout}\n{res.stderr}")
        timings["install_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        res = _script("start", check=False)
        if res.returncode != 0:
            _script("stop", check=False)
            pytest.fail(f"local Slurm did not start:\n{res.stdout}\n{res.stderr}", pytrace=False)
        timings["start_s"] = time.monotonic() - t0
    print(f"\n[slurm] cluster {'reused' if already_up else 'started'} {timings}", file=sys.stderr)
    try:
        yield timings
    finally:
        if not already_up:
            _script("stop", check=False)


@pytest.fixture(scope="session")
def workdir(slurm_cluster) -> Path:
    """A copy of the workflow to run in, so the tests never touch the checkout's results/.
    Its own temp dir, not pytest's numbered ones: another pytest session on the machine may
    prune those while Slurm jobs still write here."""
    wd = Path(tempfile.mkdtemp(prefix="kanscale-slurm-wf-"))
    for name in ("Snakefile", "config", "workflow", "profiles", "kan", "tests/slurm"):
        src = REPO / name
        dst = wd / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    yield wd
    if os.environ.get("KANSCALE_KEEP_SLURM_WORKDIR") != "1":
        shutil.rmtree(wd, ignore_errors=True)
    else:
        print(f"\n[slurm] kept {wd}", file=sys.stderr)
