"""A per-point claim: at most one attempt of a point runs at a time, and no attempt deletes or
overwrites another live attempt's work.

The claim is a small JSON file (results/<study>/attempts/<point>/claim.json) made atomically with
link(2), which fails when the file exists. It names the attempt (token), its host and pid (with
the pid's start time, so a reused pid is not taken for the old process) and the Slurm job id,
and its mtime is a heartbeat the holder refreshes every HEARTBEAT_S. A claim is live when

    same host:   its pid runs and started when the claim says (exact, no waiting on clocks), or
    other host:  its heartbeat is younger than LEASE_S (the holder's host cannot be asked).

A stale claim (the holder was SIGKILLed, its node died) is moved aside and taken over.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

HEARTBEAT_S = 5.0
LEASE_S = 30.0  # 6 missed heartbeats: the holder is gone


@dataclass(frozen=True)
class Claim:
    token: str
    host: str
    pid: int
    pid_start: str | None
    slurm_job_id: str | None
    started_utc: str
    watch_pid: int | None = None  # the snakemake that started this attempt (it forwards SIGTERM here)

    def describe(self) -> str:
        job = f", Slurm job {self.slurm_job_id}" if self.slurm_job_id else ""
        return f"attempt {self.token} (pid {self.pid} on {self.host}{job}, since {self.started_utc})"


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or None when
    there is no such process or it is a zombie (dead, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def new_claim(slurm_job_id: str | None, started_utc: str, watch_pid: int | None = None) -> Claim:
    pid = os.getpid()
    return Claim(token=uuid.uuid4().hex[:12], host=socket.gethostname(), pid=pid, pid_start=process_start(pid),
                 slurm_job_id=slurm_job_id, started_utc=started_utc, watch_pid=watch_pid)


def live_claims(attempts: Path) -> list[tuple[Path, Claim]]:
    """The live claims under results/<study>/attempts."""
    out = []
    for path in sorted(attempts.glob("*/claim.json")):
        claim = read(path)
        if claim is not None and is_live(claim, path):
            out.append((path, claim))
    return out


def read(path: Path) -> Claim | None:
    """The claim in `path`, or None: no file, a half-written one, or one another user wrote (a claim
    names a pid that snakemake's SIGTERM handler signals, so only this user's claims count; one in a
    group-writable project folder written by someone else is treated as stale, SECURITY.md)."""
    try:
        with open(path) as f:
            if os.fstat(f.fileno()).st_uid != os.geteuid():
                return None
            return Claim(**json.loads(f.read()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        return None  # a half-written or foreign file: treated as stale


def is_live(claim: Claim, path: Path) -> bool:
    if claim.host == socket.gethostname():
        return claim.pid_start is not None and process_start(claim.pid) == claim.pid_start
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False
    return age < LEASE_S


def _try_create(path: Path, claim: Claim) -> bool:
    tmp = path.with_name(f".{path.name}.{claim.token}.tmp")
    tmp.write_text(json.dumps(asdict(claim)))
    try:
        os.link(tmp, path)  # atomic: fails if a claim exists
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def acquire(path: Path, claim: Claim, wait_s: float, poll_s: float = 1.0, say=print, stop=lambda: False,
            waited: list | None = None) -> Claim | None:
    """Take the point's claim. A live holder is waited for (up to wait_s, or until stop() is true) and
    appended to `waited`; a stale one is set aside. Returns None on success, else the live holder
    still running then."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    told = None
    while True:
        if _try_create(path, claim):
            return None
        holder = read(path)
        if holder is None or not is_live(holder, path):
            # set the stale claim aside (rename is atomic: of two racing launchers one wins, the other
            # finds no file and retries)
            try:
                os.replace(path, path.with_name(f"stale-{int(time.time())}-{uuid.uuid4().hex[:6]}.json"))
            except FileNotFoundError:
                pass
            continue
        if time.monotonic() >= deadline or stop():
            return holder
        if told != holder.token:
            if waited is not None:
                waited.append(holder)
            say(f"[launch] point is being measured by a live earlier {holder.describe()}: waiting for it "
                f"(up to {wait_s:.0f} s), not starting a duplicate")
            told = holder.token
        time.sleep(poll_s)


def holds(path: Path, claim: Claim) -> bool:
    holder = read(path)
    return holder is not None and holder.token == claim.token


def release(path: Path, claim: Claim) -> None:
    if holds(path, claim):
        path.unlink(missing_ok=True)


class Heartbeat:
    """Refresh the claim's mtime every HEARTBEAT_S while the point runs (a daemon thread)."""

    def __init__(self, path: Path, claim: Claim) -> None:
        self.path, self.claim = path, claim
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()


def forward_sigterm(attempts: Path, watch_pid: int) -> None:
    """Install a SIGTERM handler that passes the signal on to the launchers `watch_pid` (a snakemake)
    started on this host (their claims under `attempts` name it), then to the previous handler.
    snakemake stops gracefully on SIGTERM: it waits for running jobs, and a point can run for hours;
    each launcher told instead stops its ranks and records its point as cancelled."""
    import signal

    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum, frame):
        for _, claim in live_claims(attempts):
            if claim.watch_pid == watch_pid and claim.host == socket.gethostname():
                try:
                    os.kill(claim.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, handler)
