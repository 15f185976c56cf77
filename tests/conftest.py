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
    """Stop the warm-start servers this checkout's tests started (kan/warm.py; they would exit by
    themselves after a minute without work), so that a test run leaves no process behind."""
    import signal
    import subprocess

    out = subprocess.run(["pgrep", "-f", "kan.warm --socket="], capture_output=True, text=True).stdout
    for pid in (int(x) for x in out.split()):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")) == ROOT:
                os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
