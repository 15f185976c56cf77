"""A warm-start server for local CPU points: one process that has already imported what every trainer
imports, and forks a trainer per request.

Why: a fresh `python -m kan.train` spends ~3.6 s of a 2-core machine on imports before its first
step (torch 1.8 s; torch._dynamo 1.3 s, which DDP's constructor imports even at world size 1;
numba 0.3 s; BENCHMARKS.md "Per-point overhead"), against a training loop of ~1 s in the demo.
Forking a process that holds those modules costs milliseconds. Nothing inside the training loop
changes: the child runs the same kan.train.main(), with the launcher's environment, working
directory and command line (also as its process title, so `pgrep -f kan.train` finds it).

    python -m kan.warm --name NAME [--idle-s S]     (started by workflow/scripts/launch/warm.py, S = 60)

Protocol, on the abstract Unix socket "\\0NAME" (no file to leave behind; binding it is also the
lock that keeps one server per name): the client sends one length-prefixed JSON request
{"python", "args", "env", "cwd"} with the write end of its log pipe attached (SCM_RIGHTS); the
server answers JSON lines {"pid": N}, later {"exit": code} (subprocess's convention: -N = killed by
signal N), or {"error": "..."}, after which the client starts a fresh interpreter instead.

Safety:
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
import atexit
import json
import os
import selectors
import shlex
import signal
import socket
import struct
import sys
import time
import traceback

MAX_REQUEST = 4 << 20  # bytes; a request is a command line and an environment
REQUEST_TIMEOUT_S = 10.0


def preload() -> None:
    """Everything a CPU trainer imports before its first step (kan.train.main imports torch lazily)."""
    import numba  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401  (DDP's constructor reads torch._dynamo.utils)
    import torch.distributed  # noqa: F401
    import torch.nn.parallel  # noqa: F401

    from . import _numba_bspline, allreduce, data, distributed, layers, loop, metrics, models, train  # noqa: F401

    del torch
    # setproctitle takes over the argv + environ block of this process on its first call; a child's
    # title (its kan.train command line) is written there, so it must happen before any child
    # replaces os.environ. The client pads the server's environment to leave room (KANSCALE_WARM_ROOM).
    import setproctitle

    setproctitle.setproctitle(shlex.join(sys.orig_argv))


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # not Linux: never fork


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


def send_line(conn: socket.socket, msg: dict) -> bool:
    try:
        conn.sendall(json.dumps(msg).encode() + b"\n")
        return True
    except OSError:
        return False


def exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def run_child(req: dict, out_fd: int, close: list[int]) -> None:
    """In the forked child: become the trainer the launcher would have exec'ed, then exit."""
    code = 1
    try:
        os.setsid()  # (kan.train.main sets PR_SET_PDEATHSIG against its parent: here the server)
        for fd in close:
            try:
                os.close(fd)
            except OSError:
                pass
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(null)
        os.close(out_fd)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        from . import train

        args = list(req["args"])
        sys.argv = [train.__file__, *args]
        sys.orig_argv = [req["python"], "-m", "kan.train", *args]
        import setproctitle

        setproctitle.setproctitle(shlex.join(sys.orig_argv))
        code = train.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()  # what a fresh interpreter runs at exit
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


class Server:
    def __init__(self, name: str, idle_s: float) -> None:
        self.name, self.idle_s = name, idle_s
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sel = selectors.DefaultSelector()
        self.children: dict[int, socket.socket] = {}  # trainer pid -> its launcher's connection
        self.refuse: str | None = None
        self.last = time.monotonic()
        self.wake: tuple[int, int] = (-1, -1)

    def serve(self) -> int:
        try:
            self.listener.bind("\0" + self.name)
        except OSError:  # another server of this name runs: it serves
            return 0
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
        print(f"[kan.warm] {self.name}: ready, pid {os.getpid()}"
              + (f"; refusing requests: {self.refuse}" if self.refuse else ""), flush=True)
        while self.children or time.monotonic() - self.last < self.idle_s:
            for key, _ in self.sel.select(timeout=1.0):
                if key.fileobj is self.listener:
                    self.last = time.monotonic()
                    self.handle(self.listener.accept()[0])
                elif key.fileobj == wake_r:
                    os.read(wake_r, 512)
                else:
                    self.peer_check(key.fileobj)
            self.reap()
        return 0

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
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                # the child keeps none of the server's sockets, pipes or its epoll handle
                keep_out = [self.listener.fileno(), conn.fileno(), *(c.fileno() for c in self.children.values()),
                            *self.wake, getattr(self.sel, "fileno", lambda: -1)()]
                run_child(req, fds[0], keep_out)  # never returns
            os.close(fds[0])
            fds = []
            self.children[pid] = conn
            if not send_line(conn, {"pid": pid}):
                _killpg(pid, signal.SIGTERM)  # the client gave up waiting and starts its own trainer
            self.sel.register(conn, selectors.EVENT_READ)
        except Exception as e:  # a bad request ends its connection, never the server
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
    ap.add_argument("--name", required=True, help="abstract socket name (the client derives it)")
    ap.add_argument("--idle-s", type=float, default=120.0, help="exit after this long without work")
    a = ap.parse_args(argv)
    return Server(a.name, a.idle_s).serve()


if __name__ == "__main__":
    sys.exit(main())
