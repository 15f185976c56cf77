"""Waiting for something a process does, with a bounded deadline (never a sleep that hopes it happened)."""

from __future__ import annotations

import time

# rank 0's progress line (kan/progress.py) every 0.2 s, for a process started with PROGRESS in its
# environment: the sign that a trainer is past its imports and process group, inside its training loop
PROGRESS = {"KANSCALE_PROGRESS_EVERY_S": "0.2"}
PROGRESS_LINE = "[kan.train] step "


def wait_for(cond, timeout_s: float, what: str):
    """cond()'s first true value, polled every 0.1 s; AssertionError naming `what` after timeout_s."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
