"""Start a local CPU trainer by forking the warm-start server (warm_server.py) instead of a fresh
interpreter: the point's overhead drops by the trainer's import time (~3.6 s on the 2-core test
machine, BENCHMARKS.md). The first point of a run starts the server and waits for its imports like
a fresh trainer would; later points (of any study with the same interpreter, kan sources and
environment) fork in milliseconds. Anything unusual falls back to a fresh interpreter: the warm
path is an optimisation, never a requirement. The server serves only this user: warm_server.py says
how (a private socket directory, the peer's uid, a narrow request) and SECURITY.md why.

Only `python -m kan.train` of this interpreter on device cpu is sent (pykan runs in its own
environment; CUDA must not be initialised in a process that forks). On Slurm a point that is its
own job has nothing warm to begin with and starts fresh interpreters; inside a packed allocation
(resources.pack) a one-node CPU point's ranks are forked by the allocation's own server, which its
first point starts (launch/main.py warm_in_pack).
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
import time
from pathlib import Path

from . import warm_server as server

from .commands import KAN_DIR

# the server waits for its imports before answering (3.6 s idle on 2 cores, far longer under load);
# past this the launcher gives up on it and starts a fresh interpreter
START_TIMEOUT_S = 90.0
IDLE_S = 60.0
SERVER_UP_S = 5.0  # a started server binds its socket within milliseconds; past this, start fresh
# what the client sets for the server process only; the trainer gets the launcher's values back
# (warm_server.py child_env). OPENBLAS_NUM_THREADS=1 keeps the server single-threaded (warm_server.py
# says why); the padding is room for the children's process titles (their kan.train command lines,
# ~1 KB), which setproctitle writes over the server's argv + environment block
SERVER_SETTINGS = {"OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
TITLE_ROOM = "." * 8192


def eligible(cmd: list[str], device: str) -> bool:
    return (sys.platform.startswith("linux") and device == "cpu" and cmd[:3] == [sys.executable, "-m", "kan.train"])


def split_env(env: dict) -> tuple[dict, dict]:
    """(the server's environment, the request's per-rank keys): a request carries only
    warm_server.py's REQUEST_ENV; everything else the trainer reads comes from the server."""
    request = {k: v for k, v in env.items() if k in server.REQUEST_ENV}
    return {k: v for k, v in env.items() if k not in server.REQUEST_ENV}, request


def server_key(env: dict) -> str:
    """One server per interpreter, torch build, kan source tree and environment (all of it but the
    per-rank keys: the trainer runs with the server's environment, so a launcher with another PATH,
    thread setting or module path must get another server)."""
    h = hashlib.sha1()
    spec = importlib.util.find_spec("torch")
    origin = Path(spec.origin) if spec and spec.origin else None
    h.update(f"{sys.executable}\0{origin}\0{origin.stat().st_mtime_ns if origin else 0}\0".encode())
    # the trainer's package and the server's own two modules: a change to any of them is a new server
    for path in [*sorted(KAN_DIR.rglob("*.py")), Path(server.__file__), Path(server.__file__).with_name("warm_fork.py")]:
        h.update(str(path.relative_to(path.parents[1])).encode() + b"\0" + path.read_bytes())
    base, _ = split_env(env)
    for key in sorted(base):
        h.update(f"{key}={base[key]}\0".encode())
    return h.hexdigest()[:16]


def socket_path(env: dict) -> Path:
    """The server's socket in this user's private directory (warm_server.py private_dir)."""
    return server.private_dir(env) / f"warm-{server_key(env)}.sock"


def _connect(path: Path, say) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        return None
    pid, uid = server.peer_uid(s)
    if uid != os.geteuid():  # the directory is private: only a misconfigured system gets here
        s.close()
        say(f"warm start: {path} is served by uid {uid} (pid {pid}), not by this user")
        return None
    return s


def _start_server(path: Path, env: dict) -> None:
    base, _ = split_env(env)
    orig = {k: base.get(k) for k in SERVER_SETTINGS}
    server_env = {**base, **SERVER_SETTINGS, server.SERVER_ONLY_ENV + "ORIG": json.dumps(orig),
                  server.SERVER_ONLY_ENV + "ROOM": TITLE_ROOM}
    # the log sits beside the socket, in the private directory (no file of a shared /tmp is opened)
    fd = os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "ab") as out:
        subprocess.Popen([sys.executable, "-m", "launch.warm_server", f"--socket={path}", f"--idle-s={IDLE_S}"], env=server_env,
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


def start(cmd: list[str], env: dict, cwd: str | None = None, say=print, path: Path | None = None) -> WarmProc | None:
    """Fork `cmd` (python -m kan.train ...) in the warm server, or None: then start it fresh."""
    try:
        path = path or socket_path(env)
    except (OSError, server.UnsafeDirError) as e:
        say(f"warm start: no private directory for the server ({e}); starting a fresh interpreter")
        return None
    conn = _connect(path, say)
    if conn is None:
        _start_server(path, env)
        end = time.monotonic() + SERVER_UP_S
        while conn is None and time.monotonic() < end:  # the server binds its socket first thing
            time.sleep(0.02)
            conn = _connect(path, say)
        if conn is None:
            say("warm start: the server did not come up; starting a fresh interpreter")
            return None
    _, request_env = split_env(env)
    read_fd, write_fd = os.pipe()
    try:
        body = json.dumps({"python": cmd[0], "args": cmd[3:], "env": request_env,
                           "cwd": os.path.abspath(cwd or os.getcwd())}).encode()
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
