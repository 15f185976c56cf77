"""A real Slurm on localhost for the `slurm` tests: brought up once per session, stopped at the end.

Uses tests/slurm/slurm-local.sh (install if missing, start, stop). On a machine without root or
apt-get the tests skip with the reason; under CI (CI=true) they fail instead of skipping.
A cluster that is already up (a developer's `make slurm-up`) is reused and left running.
The cluster runs plain (slurmd on 127.0.0.1) or emulated (each slurmd in its own network namespace,
SLURM_LOCAL_EMULATE=1); a test marked `emulated_slurm` gets the emulated one, every other the
plain one, and the cluster restarts only when the mode changes (once per session in file order).
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
from workflow_runs import copy_workflow

from launch import netemu

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "slurm" / "slurm-local.sh"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _script(*args: str, check: bool = True, emulate: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLURM_LOCAL_EMULATE": "1" if emulate else "0"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, check=check,
                          timeout=900, env=env)


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"CI=true but the local Slurm cannot run: {reason}", pytrace=False)
    pytest.skip(f"local Slurm unavailable: {reason}")


@pytest.fixture(scope="session")
def slurm_cluster():
    """{"emulated": whether the emulated cluster runs now, "install_s"/"start_s": timings of bringing
    it up}; the cluster is up while the tests run."""
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
    mode = {"emulated": False, **timings}
    try:
        yield mode
    finally:
        if not already_up:
            _script("stop", check=False)
        elif mode["emulated"]:  # a developer's cluster: left as it was found, plain
            _script("stop", check=False)
            _script("start", check=False)


@pytest.fixture(scope="module", autouse=True)
def _cluster_mode(request, slurm_cluster):
    """The plain cluster, or the emulated one for a module marked `emulated_slurm`: restarted only
    when the mode changes, so the emulated tests (last in file order) cost one restart. Module
    scope: an autouse fixture comes before the module's other fixtures (a module's study)."""
    want = request.node.get_closest_marker("emulated_slurm") is not None
    if want:
        why = netemu.why_not()
        if why:
            _unavailable(f"the emulated cluster cannot run: {why}")
    if slurm_cluster["emulated"] == want:
        return
    _script("stop", check=False)
    res = _script("start", check=False, emulate=want)
    slurm_cluster["emulated"] = want
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="session")
def workdir(slurm_cluster) -> Path:
    """A copy of the workflow to run in, so the tests never touch the checkout's results/.
    Its own temp dir, not pytest's numbered ones: another pytest session on the machine may
    prune those while Slurm jobs still write here."""
    wd = copy_workflow(Path(tempfile.mkdtemp(prefix="kanscale-slurm-wf-")), extra=("kan", "tests/slurm", "examples"))
    yield wd
    if os.environ.get("KANSCALE_KEEP_SLURM_WORKDIR") != "1":
        shutil.rmtree(wd, ignore_errors=True)
    else:
        print(f"\n[slurm] kept {wd}", file=sys.stderr)
