"""The warm-start server (workflow/scripts/launch/warm_server.py, workflow/scripts/launch/warm.py) on real processes: a forked
trainer measures what a fresh interpreter measures, dies with its server, and anything unusual
falls back to a fresh interpreter. (The fault matrix in test_faults.py runs through it too: it is
the default for local CPU points.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_faults import LAUNCHER, long_point, ranks_of, short_point, wait_training
from waiting import PROGRESS, wait_for

from kan.contract import record as records
from kan.contract.point import LaunchSettings, Point

ROOT = Path(__file__).resolve().parents[2]

from launch import warm


def launch(tmp: Path, p: Point, warm_start: bool = True, wait: bool = True):
    out = tmp / "results" / "f" / "points" / f"{p.id}.json"
    d = p.to_json()
    d.pop("limits")
    settings = LaunchSettings(runtime_min=5, pg_timeout_s=30, warm_start=warm_start)
    cmd = [sys.executable, str(LAUNCHER), "--point", json.dumps(d), "--launch", json.dumps(settings.to_json()),
           "--out", str(out)]
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"{p.id}.{time.monotonic_ns()}.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **PROGRESS})
    if wait:
        assert proc.wait(timeout=300) == 0
    return proc, out, log


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_forked_trainer_measures_what_a_fresh_one_measures(tmp_path):
    """Same point, same seed, one thread: the loss curves are identical, only the start differs."""
    p = short_point(gpus_per_node=2, threads_per_rank=1)
    _, out, _ = launch(tmp_path / "warm", p, warm_start=True)
    hot = records.read(out, p.id)
    _, out, _ = launch(tmp_path / "fresh", p, warm_start=False)
    cold = records.read(out, p.id)
    assert hot["status"] == cold["status"] == "ok"
    assert hot["launch"]["started"] == ["warm", "warm"] and cold["launch"]["started"] == ["exec", "exec"]
    assert hot["loss"]["final_train"] == cold["loss"]["final_train"]
    assert [x["train_loss"] for x in hot["loss"]["curve"]] == [x["train_loss"] for x in cold["loss"]["curve"]]
    # the forked trainer has the launcher's command line, as a fresh one does
    assert hot["provenance"]["argv"][1:3] == ["-m", "kan.train"] and hot["provenance"]["argv"][-1].startswith("--pg")


def test_killing_the_server_ends_its_trainer_and_the_next_point_starts_a_new_server(tmp_path):
    p = long_point(1)
    proc, out, log = launch(tmp_path, p, wait=False)
    rank = wait_training(p, log)[0]
    server = parent_of(rank)
    assert "launch.warm_server" in Path(f"/proc/{server}/cmdline").read_bytes().decode()
    os.kill(server, signal.SIGKILL)
    assert proc.wait(timeout=60) == 0
    rec = records.read(out, p.id)
    assert rec["status"] in ("killed", "failed") and "signal 15" in rec["reason"], rec["reason"]
    wait_for(lambda: not ranks_of(p), 10, "the orphaned trainer to die with its server")
    q = short_point(gpus_per_node=1, threads_per_rank=1)
    _, out, _ = launch(tmp_path, q)
    again = records.read(out, q.id)
    assert again["status"] == "ok" and again["launch"]["started"] == ["warm"]


def test_a_server_that_cannot_fork_safely_is_refused_and_the_point_starts_fresh(tmp_path):
    """With numpy's BLAS allowed a helper thread the server has 2 threads after its imports: forking
    it is unsafe, so it refuses and the client starts a fresh interpreter."""
    path = warm.server.private_dir() / f"warm-test-{os.getpid()}.sock"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    server = subprocess.Popen([sys.executable, "-m", "launch.warm_server", f"--socket={path}", "--idle-s=30"],
                              env={**env, "OPENBLAS_NUM_THREADS": "2"}, stdout=subprocess.PIPE, text=True)
    try:
        ready = server.stdout.readline()
        assert "refusing requests" in ready and "threads" in ready, ready
        said = []
        cmd = [sys.executable, "-m", "kan.train", "--help"]
        assert warm.start(cmd, env, say=said.append, path=path) is None
        assert "threads" in said[0] and "fresh interpreter" in said[0]
    finally:
        server.kill()
        server.wait()


def test_no_server_means_a_fresh_interpreter(monkeypatch):
    said = []
    monkeypatch.setattr(warm, "_start_server", lambda path, env: None)
    monkeypatch.setattr(warm, "SERVER_UP_S", 0.2)
    path = warm.server.private_dir() / f"warm-none-{os.getpid()}.sock"
    assert warm.start([sys.executable, "-m", "kan.train"], dict(os.environ), say=said.append, path=path) is None
    assert "did not come up" in said[0]


def test_only_local_cpu_trainers_of_this_interpreter_are_forked():
    train = [sys.executable, "-m", "kan.train", "--out=x"]
    assert warm.eligible(train, "cpu")
    assert not warm.eligible(train, "cuda")  # CUDA must not be initialised in a process that forks
    assert not warm.eligible(["/other/venv/bin/python", *train[1:]], "cpu")  # pykan's environment
    assert not warm.eligible([sys.executable, "-m", "torch.distributed.run", *train[3:]], "cpu")


def test_a_server_serves_only_its_own_code_and_environment():
    """The trainer runs with the server's environment, so every key but the per-rank ones the launcher
    sets (workflow/scripts/launch/warm_server.py REQUEST_ENV) picks the server."""
    base = {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "PATH": "/bin", "HOME": "/root"}
    assert warm.server_key(base) == warm.server_key(dict(base, RANK="3", MASTER_PORT="29500",
                                                         KANSCALE_LAUNCH_CMD="python x"))
    for key, value in (("OMP_NUM_THREADS", "2"), ("NUMBA_NUM_THREADS", "2"), ("PYTHONPATH", "/elsewhere"),
                       ("LD_PRELOAD", "libjemalloc.so"), ("PATH", "/tmp/bin:/bin"), ("HOME", "/x")):
        assert warm.server_key(base) != warm.server_key(dict(base, **{key: value})), key
