"""The warm-start server's side of a fork (warm_server.py serves; this is what makes forking it safe and
what the child does): the imports the server holds, the one-thread check, and the child that becomes
the trainer the launcher would have exec'ed. warm_server.py's docstring, "Fork safety", says why each
step is there.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import sys
import traceback


def preload() -> None:
    """Everything a CPU trainer imports before its first step (kan.train.main imports torch lazily)."""
    import numba  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401  (DDP's constructor reads torch._dynamo.utils)
    import torch.distributed  # noqa: F401
    import torch.nn.parallel  # noqa: F401

    from kan import distributed, layers, loop, metrics, models, train  # noqa: F401
    from kan.data import datasets  # noqa: F401
    from kan.kernels import numba_bspline  # noqa: F401
    from kan.probes import allreduce  # noqa: F401

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


def run_child(req: dict, env: dict, out_fd: int, close: list[int]) -> None:
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
        os.environ.update(env)
        from kan import train

        args = list(req["args"])
        sys.argv = [train.__file__, *args]
        sys.orig_argv = [sys.executable, "-m", "kan.train", *args]
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

