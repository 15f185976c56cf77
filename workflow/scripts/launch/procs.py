"""The point's process tree, so that no rank outlives its point.

* Every command runs in its own session (its own process group), so one killpg reaches torchrun and
  all of its workers, and a terminal's Ctrl-C reaches only the launcher, which then stops them.
* Linux: each child gets SIGTERM when the launcher dies (PR_SET_PDEATHSIG), so a SIGKILLed launcher
  leaves no agent behind; the trainer sets the same on itself against its torchrun agent. A trainer
  forked by the warm-start server (launch/warm.py) gets SIGTERM from the server when the launcher's
  connection closes, and its own session as well.
* SIGTERM, SIGINT and SIGHUP to the launcher stop the tree (SIGTERM, then SIGKILL after GRACE_S)
  and the point is recorded as cancelled.
* A watchdog polls the process that started the launcher (snakemake: `--watch-pid`): when it dies
  (kill -9 of snakemake), the tree is stopped within WATCH_POLL_S + GRACE_S seconds.
* At the deadline (the point's time limit minus a margin) the tree is stopped: a timeout.
"""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from . import warm
from .claims import process_start

GRACE_S = 5.0
FAIL_FAST_S = 10.0
WATCH_POLL_S = 0.5
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


@dataclass
class Outcome:
    exit_codes: list[int | None]
    timed_out: bool = False
    stop_signal: int | None = None  # the signal that told the launcher to stop
    watched_died: bool = False  # the process that started the launcher is gone
    tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    # the exit code of the first command that ended with an error on its own (not stopped by us), or None
    first_error_code: int | None = None
    started: list[str] = field(default_factory=list)  # per command: "warm" or "exec"


def alive(pid: int, start: str | None) -> bool:
    return process_start(pid) == start if start is not None else _exists(pid)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class ProcessTree:
    """Start commands, tee their output to our stdout with a prefix, stop them all together. When one
    exits with an error, the others get FAIL_FAST_S to notice (a survivor writes the failed record)
    and are then stopped, as torchrun stops a failed job's workers."""

    def __init__(self, cmds: list[tuple[list[str], dict]], env: dict, tail_lines: int = 200,
                 warm_device: str | None = None) -> None:
        """warm_device: the point's device when its trainers may be forked by the warm-start server
        (launch/warm.py); None = always a fresh interpreter."""
        self.cmds, self.env, self.warm_device = cmds, env, warm_device
        self.started: list[str] = []  # per command: "warm" (forked by the server) or "exec"
        self.tail: collections.deque = collections.deque(maxlen=tail_lines)
        self.procs: list[subprocess.Popen] = []
        self._threads: list[threading.Thread] = []
        self._stop_signal: int | None = None
        self._wake = threading.Event()

    def _on_signal(self, signum, frame) -> None:
        self._stop_signal = self._stop_signal or signum
        self._wake.set()

    def run(self, deadline_s: float, watch_pid: int | None = None, watch_start: str | None = None) -> Outcome:
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        t0 = time.monotonic()
        try:
            linux = sys.platform.startswith("linux")
            for cmd, extra in self.cmds:  # spawn them all before any thread runs (preexec_fn and threads)
                env = {**self.env, **extra}
                proc = None
                if self.warm_device is not None and warm.eligible(cmd, self.warm_device):
                    proc = warm.start(cmd, env, say=lambda m: print(f"[launch] {m}", flush=True))
                self.started.append("exec" if proc is None else "warm")
                self.procs.append(proc or subprocess.Popen(
                    cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=_pdeathsig if linux else None))
            prefix = len(self.procs) > 1
            for i, p in enumerate(self.procs):
                t = threading.Thread(target=self._tee, args=(p.stdout, f"[{i}] " if prefix else ""), daemon=True)
                t.start()
                self._threads.append(t)
            out = Outcome(exit_codes=[])
            end = t0 + deadline_s
            first_error = None
            # poll every process each round: any() would stop at the first live one and never see a
            # later rank's error, so fail-fast would wait for the deadline
            while None in [p.poll() for p in self.procs]:
                if self._stop_signal is not None:
                    break
                if first_error is None and any(p.returncode not in (None, 0) for p in self.procs):
                    first_error = time.monotonic()
                    out.first_error_code = next(p.returncode for p in self.procs if p.returncode not in (None, 0))
                if first_error is not None and time.monotonic() - first_error > FAIL_FAST_S:
                    break
                if watch_pid is not None and not alive(watch_pid, watch_start):
                    out.watched_died = True
                    break
                if time.monotonic() >= end:
                    out.timed_out = True
                    break
                self._wake.wait(WATCH_POLL_S)
            if out.first_error_code is None:  # every command ended before the loop looked
                out.first_error_code = next((p.returncode for p in self.procs if p.returncode not in (None, 0)), None)
            if any(p.poll() is None for p in self.procs):
                self.stop()
            out.stop_signal = self._stop_signal
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
        for t in self._threads:
            t.join(timeout=5)
        out.exit_codes = [p.returncode for p in self.procs]
        out.started = list(self.started)
        out.tail = list(self.tail)
        out.wall_s = time.monotonic() - t0
        return out

    def stop(self) -> None:
        """SIGTERM to every child's process group, SIGKILL to what is left after GRACE_S."""
        for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 2.0)):
            for p in self.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
            end = time.monotonic() + wait
            while time.monotonic() < end and any(p.poll() is None for p in self.procs):
                time.sleep(0.05)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def _tee(self, stream, prefix: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            self.tail.append(line.rstrip("\n"))
            sys.stdout.write(prefix + line)
            sys.stdout.flush()
