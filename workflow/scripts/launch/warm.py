"""Start a local CPU trainer by forking the warm-start server (kan/warm.py) instead of a fresh
interpreter: the point's overhead drops by the trainer's import time (~3.6 s on the 2-core test
machine, BENCHMARKS.md). The first point of a run starts the server and waits for its imports like
a fresh trainer would; later points (of any study with the same interpreter, kan sources and
thread settings) fork in milliseconds. Anything unusual falls back to a fresh interpreter: the
warm path is an optimisation, never a requirement.

Only `python -m kan.train` of this interpreter on device cpu is sent (pykan runs in its own
environment; CUDA must not be initialised in a process that forks). On Slurm every point is its
own job, so nothing is warm to begin with and the launcher always starts fresh interpreters.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kan import config as kan_config

KAN_DIR = Path(kan_config.__file__).resolve().parent
# what a trainer's interpreter and libraries read when they load (module search path, OpenMP, MKL,
# numba's pool size, preloads): a server is started with the point's values of these and serves only
# points with the same values, so a forked trainer's libraries start as a fresh one's would
IMPORT_TIME_PREFIXES = ("PYTHON", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "NUMBA_", "TORCH_", "LD_PRELOAD",
                        "LD_LIBRARY_PATH")
# per-rank values the launcher adds: read at run time, not at import, and never part of the key
PER_RANK_PREFIXES = ("RANK", "LOCAL_", "WORLD_SIZE", "MASTER_", "TORCHELASTIC_")
# the server waits for its imports before answering (3.6 s idle on 2 cores, far longer under load);
# past this the launcher gives up on it and starts a fresh interpreter
START_TIMEOUT_S = 90.0
IDLE_S = 60.0
SERVER_UP_S = 5.0  # a started server binds its socket within milliseconds; past this, start fresh


def eligible(cmd: list[str], device: str) -> bool:
    return (sys.platform.startswith("linux") and device == "cpu" and cmd[:3] == [sys.executable, "-m", "kan.train"])


def server_name(env: dict) -> str:
    """One server per interpreter, torch build, kan source tree and import-time environment."""
    h = hashlib.sha1()
    spec = importlib.util.find_spec("torch")
    origin = Path(spec.origin) if spec and spec.origin else None
    h.update(f"{sys.executable}\0{origin}\0{origin.stat().st_mtime_ns if origin else 0}\0".encode())
    for path in sorted(KAN_DIR.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    for key in sorted(k for k in env if k.startswith(IMPORT_TIME_PREFIXES)):
        h.update(f"{key}={env[key]}\0".encode())
    return f"kanscale-warm-{os.getuid()}-{h.hexdigest()[:16]}"


def _connect(name: str) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + name)
        return s
    except OSError:
        s.close()
        return None


def _start_server(name: str, env: dict) -> None:
    log = Path(tempfile.gettempdir()) / f"{name}.log"
    server_env = {k: v for k, v in env.items() if not k.startswith(PER_RANK_PREFIXES)}
    # OPENBLAS_NUM_THREADS=1: a single-threaded server (kan/warm.py says why). KANSCALE_WARM_ROOM: the
    # children's process titles (their full kan.train command lines, ~1 KB) are written over the
    # server's argv + environment block, which must be long enough
    server_env.update(OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1", KANSCALE_WARM_ROOM="." * 8192)
    with open(log, "ab") as out:
        subprocess.Popen([sys.executable, "-m", "kan.warm", f"--name={name}", f"--idle-s={IDLE_S}"], env=server_env,
                         cwd=str(KAN_DIR.parent), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True)


class WarmProc:
    """The part of subprocess.Popen that launch/procs.py uses, for a trainer forked by the server."""

    def __init__(self, conn: socket.socket, pid: int, stdout) -> None:
        self.conn, self.pid, self.stdout = conn, pid, stdout
        self.returncode: int | None = None
        self._buf = b""
        conn.setblocking(False)

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read()
        return self.returncode

    def _read(self) -> None:
        eof = False
        try:
            chunk = self.conn.recv(4096)
            eof = not chunk
            self._buf += chunk
        except BlockingIOError:
            pass
        except OSError:
            eof = True
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            msg = json.loads(line)
            if "exit" in msg:
                self.returncode = int(msg["exit"])
        if self.returncode is None and eof:
            # the server died without an answer: its children got SIGTERM (PR_SET_PDEATHSIG)
            self.returncode = -signal.SIGTERM
        if self.returncode is not None:
            self.conn.close()

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"warm trainer {self.pid}", timeout)
            with selectors.DefaultSelector() as sel:
                sel.register(self.conn, selectors.EVENT_READ)
                sel.select(0.1 if end is None else max(0.0, min(0.1, end - time.monotonic())))
        return self.returncode


def start(cmd: list[str], env: dict, cwd: str | None = None, say=print, name: str | None = None) -> WarmProc | None:
    """Fork `cmd` (python -m kan.train ...) in the warm server, or None: then start it fresh."""
    name = name or server_name(env)
    conn = _connect(name)
    if conn is None:
        _start_server(name, env)
        end = time.monotonic() + SERVER_UP_S
        while conn is None and time.monotonic() < end:  # the server binds its socket first thing
            time.sleep(0.02)
            conn = _connect(name)
        if conn is None:
            say("warm start: the server did not come up; starting a fresh interpreter")
            return None
    read_fd, write_fd = os.pipe()
    try:
        body = json.dumps({"python": cmd[0], "args": cmd[3:], "env": env, "cwd": cwd or os.getcwd()}).encode()
        socket.send_fds(conn, [struct.pack("!I", len(body))], [write_fd])
        conn.sendall(body)
        conn.settimeout(START_TIMEOUT_S)
        line = b""
        while not line.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            line += chunk
        first, _, rest = line.partition(b"\n")
        msg = json.loads(first)
        if "pid" not in msg:
            raise RuntimeError(msg.get("error", msg))
    except (OSError, ValueError, RuntimeError) as e:
        conn.close()  # a fork that still happens sees the closed connection and is stopped at once
        os.close(read_fd)
        os.close(write_fd)
        say(f"warm start refused ({type(e).__name__}: {e}); starting a fresh interpreter")
        return None
    os.close(write_fd)
    proc = WarmProc(conn, int(msg["pid"]), os.fdopen(read_fd, "rb"))
    proc._buf = rest
    return proc
