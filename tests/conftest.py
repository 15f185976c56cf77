import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def root() -> Path:
    return ROOT


def pytest_sessionfinish(session, exitstatus):
    """Stop the warm-start servers this checkout's tests started (workflow/scripts/launch/warm_server.py; they would exit by
    themselves after a minute without work), so that a test run leaves no process behind. Not in a
    session that runs beside another (tests/run-all.sh sets KANSCALE_TESTS_BESIDE=1 for its Slurm
    session): that one's points may be using the server right now; the last session stops it."""
    if os.environ.get("KANSCALE_TESTS_BESIDE") == "1" or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist worker that ran out of tests: its controller stops the servers at the very end
    import signal
    import subprocess

    out = subprocess.run(["pgrep", "-f", "launch.warm_server --socket="], capture_output=True, text=True).stdout
    for pid in (int(x) for x in out.split()):
        try:
            # a server inside a Slurm job serves that packed allocation's points (launch/main.py
            # warm_in_pack), maybe right now: the job's end stops it
            in_job = b"\0SLURM_JOB_ID=" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
            if Path(os.readlink(f"/proc/{pid}/cwd")) == ROOT and not in_job:
                os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
