"""A warm-start server for local CPU points: one process that has already imported what every trainer
imports, and forks a trainer per request.

Why: a fresh `python -m kan.train` spends ~3.6 s of a 2-core machine on imports before its first
step (torch 1.8 s; torch._dynamo 1.3 s, which DDP's constructor imports even at world size 1;
numba 0.3 s; BENCHMARKS.md "Per-point overhead"), against a training loop of ~1 s in the demo.
Forking a process that holds those modules costs milliseconds. Nothing inside the training loop
changes: the child runs the same kan.train.main(), with the launcher's environment, working
directory and command line (also as its process title, so `pgrep -f kan.train` finds it).

    python -m launch.warm_server --socket PATH [--idle-s S]   (started by workflow/scripts/launch/warm.py, S = 60)

Who is served (a server runs code as its owner, so it must know who asks):
* The socket is a file in a directory only its owner can enter (`private_dir()`: $XDG_RUNTIME_DIR/
  kanscale, else <tmp>/kanscale-<uid>, mode 0700, checked to be the owner's, not a symlink, in a
  parent nobody else can rename it out of). Another user cannot connect, list or squat the name.
* Every connection's peer credentials (SO_PEERCRED) are checked before a byte is read: a peer
  with another uid is logged and closed. The two layers are independent (tests/distributed/
  test_security.py breaks each in turn, as uid 65534).
* A request is narrow: the server's own interpreter, `kan.train`'s own flags (parsed before the
  fork; anything else is refused), the per-rank environment keys the launcher sets (REQUEST_ENV)
  and an absolute working directory. Everything else of the trainer's environment is the server's
  own: the launcher's environment when it started the server (its hash names the socket, so a
  launcher with another environment gets another server). So a request cannot change PATH, and
  the trainer's `git` (provenance) is the one kan.metrics resolved when the server imported it.

Protocol, on that socket (an flock on PATH.lock keeps one server per path; a socket file left by a
killed server is replaced): the client sends one length-prefixed JSON request
{"python", "args", "env", "cwd"} with the write end of its log pipe attached (SCM_RIGHTS); the
server answers JSON lines {"pid": N}, later {"exit": code} (subprocess's convention: -N = killed by
signal N), or {"error": "..."}, after which the client starts a fresh interpreter instead.

Fork safety (warm_fork.py: the preload, the thread check, the child):
* Fork is only safe while the server has one thread: it checks /proc/self/task after the imports
  and refuses every request otherwise (numpy's OpenBLAS would start a helper thread, hence
  OPENBLAS_NUM_THREADS=1 in the server's environment, set by the client; numpy's BLAS is not on
  a point's path). No tensor op runs here, so no OpenMP or numba pool exists yet; CUDA is never
  initialised (the client sends CPU points only).
* The child gets its own session (as the launcher's Popen gives), SIGTERM when the server dies
  (PR_SET_PDEATHSIG), and SIGTERM to its group when the client's connection closes (the launcher
  was SIGKILLed): no trainer outlives the launcher that asked for it.
* The server exits after --idle-s seconds without children or requests.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
from pathlib import Path

from kan.env import LAUNCH_CMD, SLURM_REQUEST
from .warm_fork import preload, run_child, threads

MAX_REQUEST = 4 << 20  # bytes; a request is a command line and a few environment keys
REQUEST_TIMEOUT_S = 10.0
# the environment keys a request may carry: what the launcher sets per rank and per point
# (workflow/scripts/launch/commands.py, launch/main.py); the rest is the server's own environment
REQUEST_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_ERROR_FILE", LAUNCH_CMD,
               # inside a packed Slurm allocation: what the point's job asked for (JSON for its record)
               SLURM_REQUEST)
# set by the client for the server process only (launch/warm.py): the trainer gets the launcher's values
SERVER_ONLY_ENV = "KANSCALE_WARM_"  # KANSCALE_WARM_ROOM (title room), KANSCALE_WARM_ORIG (values replaced)
REQUEST_KEYS = {"python", "args", "env", "cwd"}


class UnsafeDirError(RuntimeError):
    """The directory for the socket is not one only its owner can use."""


def _check_private(d: Path) -> Path:
    """d must be a real directory (no symlink) of this user, closed to everyone else, in a parent
    that others cannot rename it out of (owned by this user or root, or sticky if others may write)."""
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirError(f"{d} is not a directory (a symlink or file is in its place)")
    if st.st_uid != os.geteuid():
        raise UnsafeDirError(f"{d} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})")
    if st.st_mode & 0o077:
        raise UnsafeDirError(f"{d} has mode {stat.S_IMODE(st.st_mode):04o}; only its owner may enter it (0700)")
    parent = os.stat(d.parent)
    if parent.st_uid not in (0, os.geteuid()) or (parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX):
        raise UnsafeDirError(f"{d.parent} lets others rename {d.name} (not sticky, writable by others)")
    return d


def private_dir(env: dict | None = None) -> Path:
    """This user's directory for warm-start sockets and logs, made (0700) and checked; UnsafeDirError
    when it cannot be trusted. $XDG_RUNTIME_DIR/kanscale when the session has a runtime directory of
    its own, else <tmp>/kanscale-<uid>."""
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR", "")
    base = None
    if runtime and os.path.isabs(runtime):
        try:
            base = _check_private(Path(runtime)) / "kanscale"
        except (OSError, UnsafeDirError):
            base = None
    if base is None:
        tmp = env.get("TMPDIR") or tempfile.gettempdir()
        base = Path(tmp) / f"kanscale-{os.geteuid()}"
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    return _check_private(base)


def peer_uid(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a connected Unix socket (SO_PEERCRED: the
    credentials it had when it connected, checked by the kernel)."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         struct.calcsize("3i")))
    return pid, uid


def recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(REQUEST_TIMEOUT_S)
    head, fds, _, _ = socket.recv_fds(conn, 4, 4)
    fds = list(fds)
    try:
        while 0 < len(head) < 4:
            head += conn.recv(4 - len(head))
        if len(head) < 4:
            raise ValueError("empty request")
        (size,) = struct.unpack("!I", head)
        if size > MAX_REQUEST:
            raise ValueError(f"request of {size} bytes")
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("truncated request")
            body += chunk
        conn.settimeout(None)
        return json.loads(body), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


class BadRequest(ValueError):
    """A request that is not a kan.train point of this server: refused before anything runs."""


def check_request(req) -> None:
    """The request is exactly what a point needs (module docstring, "Who is served"); BadRequest
    naming what is not."""
    if not isinstance(req, dict) or set(req) != REQUEST_KEYS:
        keys = sorted(req) if isinstance(req, dict) else type(req).__name__
        raise BadRequest(f"a request has exactly the keys {sorted(REQUEST_KEYS)}, got {keys}")
    if req["python"] != sys.executable:
        raise BadRequest(f"python {req['python']!r} is not this server's interpreter {sys.executable!r}")
    args, env, cwd = req["args"], req["env"], req["cwd"]
    if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
        raise BadRequest("args must be a list of strings")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) and "\0" not in v
                                            for k, v in env.items()):
        raise BadRequest("env must map strings to strings")
    extra = sorted(set(env) - set(REQUEST_ENV))
    if extra:
        raise BadRequest(f"environment key(s) {', '.join(extra)} are not set per point by the launcher; a request "
                         f"may carry only {', '.join(REQUEST_ENV)} (the rest is the server's own environment)")
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise BadRequest(f"cwd must be an absolute directory, got {cwd!r}")
    from kan import train

    try:
        train.build_parser().parse_args(args)
    except train.UsageError as e:
        raise BadRequest(f"not a kan.train command line: {e}") from None
    except SystemExit:  # --help: argparse would print and exit the server
        raise BadRequest("not a training command line (--help or --version)") from None


def child_env(request_env: dict) -> dict:
    """The trainer's environment: the server's (= the launcher's when it started the server, with
    the values the client replaced for the server put back) plus the request's per-rank keys."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SERVER_ONLY_ENV)}
    for key, value in json.loads(os.environ.get(SERVER_ONLY_ENV + "ORIG", "{}")).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env.update(request_env)
    return env


def send_line(conn: socket.socket, msg: dict) -> bool:
    try:
        conn.sendall(json.dumps(msg).encode() + b"\n")
        return True
    except OSError:
        return False


def exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class Server:
    def __init__(self, path: Path, idle_s: float) -> None:
        self.path, self.idle_s = Path(path), idle_s
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sel = selectors.DefaultSelector()
        self.children: dict[int, socket.socket] = {}  # trainer pid -> its launcher's connection
        self.refuse: str | None = None
        self.last = time.monotonic()
        self.wake: tuple[int, int] = (-1, -1)
        self.lock_fd = -1

    def _bind(self) -> bool:
        """Take PATH.lock and the socket path; False when another server holds them (it serves)."""
        _check_private(self.path.parent)
        self.lock_fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            os.unlink(self.path)  # left by a server that was killed: nobody listens on it
        except FileNotFoundError:
            pass
        self.listener.bind(str(self.path))
        os.chmod(self.path, 0o600)  # a second layer: the directory is 0700 already
        return True

    def serve(self) -> int:
        try:
            if not self._bind():
                return 0
        except (OSError, UnsafeDirError) as e:
            print(f"[launch.warm_server] cannot serve at {self.path}: {e}", flush=True)
            return 1
        try:
            return self._serve()
        finally:
            try:
                if os.stat(self.path).st_ino == os.fstat(self.listener.fileno()).st_ino:
                    os.unlink(self.path)
            except OSError:
                pass
            self.listener.close()
            os.close(self.lock_fd)

    def _serve(self) -> int:
        self.listener.listen(64)
        try:
            preload()
        except Exception as e:  # what fails to import here fails in a fresh trainer too, which says why
            self.refuse = f"preload failed: {type(e).__name__}: {e}"
        if self.refuse is None and threads() != 1:
            self.refuse = f"the server has {threads()} threads after its imports; forking it is not safe"
        # SIGCHLD wakes the loop at once (an exit status is reported without a polling delay)
        wake_r, wake_w = self.wake = os.pipe()
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        self.sel.register(self.listener, selectors.EVENT_READ)
        self.sel.register(wake_r, selectors.EVENT_READ)
        print(f"[launch.warm_server] {self.path}: ready, pid {os.getpid()}"
              + (f"; refusing requests: {self.refuse}" if self.refuse else ""), flush=True)
        while self.children or time.monotonic() - self.last < self.idle_s:
            for key, _ in self.sel.select(timeout=1.0):
                if key.fileobj is self.listener:
                    self.last = time.monotonic()
                    self.accept()
                elif key.fileobj == wake_r:
                    os.read(wake_r, 512)
                else:
                    self.peer_check(key.fileobj)
            self.reap()
        return 0

    def accept(self) -> None:
        try:
            conn = self.listener.accept()[0]
        except OSError:
            return
        try:
            pid, uid = peer_uid(conn)
        except OSError as e:
            pid, uid = -1, -1
            print(f"[launch.warm_server] no peer credentials ({e}): connection closed", flush=True)
        if uid != os.geteuid():
            # nothing is read from a stranger: its request, file descriptors and bytes stay unread
            print(f"[launch.warm_server] refused a connection from uid {uid} (pid {pid}): this server serves uid "
                  f"{os.geteuid()} only", flush=True)
            conn.close()
            return
        self.handle(conn)

    def peer_check(self, conn: socket.socket) -> None:
        """A readable connection is a closed one (clients send nothing after the request): the
        launcher died, so its trainer is stopped as the parent-death signal would have."""
        try:
            gone = conn.recv(1) == b""
        except OSError:
            gone = True
        if gone:
            self.sel.unregister(conn)
            for pid, c in self.children.items():
                if c is conn:
                    _killpg(pid, signal.SIGTERM)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            send_line(conn, {"exit": exit_code(status)})
            if conn in {k.fileobj for k in self.sel.get_map().values()}:
                self.sel.unregister(conn)
            conn.close()
            self.last = time.monotonic()

    def handle(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            req, fds = recv_request(conn)
            if self.refuse or len(fds) != 1:
                raise RuntimeError(self.refuse or f"expected 1 file descriptor, got {len(fds)}")
            check_request(req)
            env = child_env(req["env"])
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                # the child keeps none of the server's sockets, pipes, lock or its epoll handle
                keep_out = [self.listener.fileno(), conn.fileno(), *(c.fileno() for c in self.children.values()),
                            *self.wake, self.lock_fd, getattr(self.sel, "fileno", lambda: -1)()]
                run_child(req, env, fds[0], keep_out)  # never returns
            os.close(fds[0])
            fds = []
            self.children[pid] = conn
            if not send_line(conn, {"pid": pid}):
                _killpg(pid, signal.SIGTERM)  # the client gave up waiting and starts its own trainer
            self.sel.register(conn, selectors.EVENT_READ)
        except Exception as e:  # a bad request ends its connection, never the server
            if isinstance(e, BadRequest):
                print(f"[launch.warm_server] refused a request: {e}", flush=True)
            send_line(conn, {"error": f"{type(e).__name__}: {e}"})
            for fd in fds:
                os.close(fd)
            conn.close()


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", required=True, type=Path,
                    help="the socket's path, in a directory only this user can enter (private_dir())")
    ap.add_argument("--idle-s", type=float, default=120.0, help="exit after this long without work")
    a = ap.parse_args(argv)
    return Server(a.socket, a.idle_s).serve()


if __name__ == "__main__":
    sys.exit(main())
