"""What SECURITY.md says kanscale does not trust (other local users), tested as such a user acts.

The warm-start server (workflow/scripts/launch/warm_server.py), for real: uid 65534 (via setpriv, root only) finds the server,
connects and sends a request whose PATH holds a `git` that records `id`, and one that asks for a
record in its own directory. Nothing may run or be written, with each of the two layers (a private
socket directory, the peer's uid) broken in turn, and the owner's own points must still start warm.
Then what a request may carry at all, as the owner; the git provenance runs; and the other files
that start work: a claim another user wrote, the local Slurm's state folder in a shared /tmp."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_faults import short_point
from waiting import wait_for

from kan import metrics
from kan.contract import record as records

ROOT = Path(__file__).resolve().parents[2]

from launch import warm

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # the attacker's interpreter: root's venv is not readable by others

# what the attacker runs as uid 65534: every way in it can think of, each result as JSON
ATTACKER = r"""
import json, os, socket, struct, sys
path, evil, python = sys.argv[1:4]
payloads = {
    # a request the server would serve for its owner: a record written into the attacker's folder
    "record": {"python": python, "args": ["--widths=2,8,1", "--grid-size=5", "--samples=256", "--epochs=1",
               "--batch-per-rank=64", "--warmup-steps=1", "--device=cpu", "--out=" + evil + "/pwned.json"],
               "env": {}, "cwd": evil},
    # the reproduction of the issue: PATH through the attacker's folder, whose `git` records `id`
    "git": {"python": python, "args": ["--widths=2,8,1", "--out=" + evil + "/pwned-git.json"],
            "env": {"PATH": evil + ":/usr/bin:/bin"}, "cwd": evil},
}
def attack(addr, payload):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr)
    except OSError as e:
        return "connect: " + type(e).__name__
    body = json.dumps(payload).encode()
    r, w = os.pipe()
    try:
        socket.send_fds(s, [struct.pack("!I", len(body))], [w])
        s.sendall(body)
        s.settimeout(20)
        return "reply: " + s.recv(4096).decode()
    except OSError as e:
        return "reply: " + type(e).__name__
found = {"path " + name: attack(path, p) for name, p in payloads.items()}
print(json.dumps(found))
"""


def raw_request(path: Path, req: dict) -> dict:
    """Send one request as the owner and return the server's first answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(path))
        body = json.dumps(req).encode()
        r, w = os.pipe()
        try:
            socket.send_fds(s, [struct.pack("!I", len(body))], [w])
            s.sendall(body)
            s.settimeout(30)
            line = s.recv(65536).split(b"\n")[0]
        finally:
            os.close(r)
            os.close(w)
    return json.loads(line)


def run_owner_point(path: Path, env: dict, out: Path) -> dict:
    """The owner's own point through the warm path: it must still start warm and measure."""
    p = short_point(gpus_per_node=1, threads_per_rank=1)
    said: list[str] = []
    proc = warm.start([sys.executable, "-m", "kan.train", *p.to_argv(), f"--out={out}"], dict(env), cwd=str(ROOT),
                      say=said.append, path=path)
    assert proc is not None, said
    assert proc.wait(timeout=120) == 0
    rec = records.read(out, p.id)
    assert rec["status"] == "ok", rec["reason"]
    return rec


@pytest.fixture
def server(tmp_path):
    """A server of this test's own: a /tmp-like parent (sticky, world-writable) via TMPDIR, so the
    private directory is made as it is under /tmp."""
    base = Path(tempfile.mkdtemp(prefix="kanscale-warmsec-"))
    os.chmod(base, 0o1777)
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(base)
    path = warm.socket_path(env)
    yield path, env
    out = subprocess.run(["pgrep", "-f", f"launch.warm_server --socket={path}"], capture_output=True, text=True).stdout
    for pid in map(int, out.split()):
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(base, ignore_errors=True)


def server_log(path: Path) -> str:
    return path.with_suffix(".log").read_text()


def unix_names_of(pid: int) -> list[str]:
    """The addresses of the Unix sockets process `pid` holds ("@name" = abstract: listed in
    /proc/net/unix for every user, no permissions; the way in of the issue's reproduction)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    names = []
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) > 7 and parts[6] in inodes:
            names.append(parts[7])
    return names


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the stranger is another uid (65534)")


@root_only
def test_another_local_user_cannot_run_anything_through_the_server(server, tmp_path):
    path, env = server
    if not (shutil.which("setpriv") and os.access(SYSTEM_PYTHON, os.X_OK)):
        pytest.skip(f"needs setpriv (util-linux) and {SYSTEM_PYTHON} for the attacker")
    run_owner_point(path, env, tmp_path / "before.json")  # the server is up and serving its owner
    # the attacker's own folder, with a `git` that records who ran it
    evil = Path(tempfile.mkdtemp(prefix="kanscale-evil-"))
    (evil / "attack.py").write_text(ATTACKER)
    (evil / "git").write_text(f"#!/bin/sh\nid > {evil}/ran-as.txt\n")
    os.chmod(evil / "git", 0o755)
    for f in (evil, evil / "attack.py", evil / "git"):
        os.chown(f, NOBODY, NOBODY)

    def attack() -> dict:
        r = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", SYSTEM_PYTHON,
                            str(evil / "attack.py"), str(path), str(evil), sys.executable],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def nothing_happened(found: dict) -> None:
        assert not any('"pid"' in v for v in found.values()), found  # no trainer was forked for it
        assert sorted(p.name for p in evil.iterdir()) == ["attack.py", "git"], list(evil.iterdir())

    try:
        try:
            # 1. as shipped: no abstract name to find, and the socket's directory is closed to others
            pids = subprocess.run(["pgrep", "-f", f"launch.warm_server --socket={path}"], capture_output=True, text=True).stdout
            assert len(pids.split()) == 1, pids
            names = unix_names_of(int(pids))
            assert set(names) == {str(path)}, names  # the listener (and a closing connection), no "@name"
            found = attack()
            assert found == {"path record": "connect: PermissionError", "path git": "connect: PermissionError"}, found
            nothing_happened(found)
            # 2. the directory layer broken on purpose (as a careless chmod would): the uid check alone holds
            os.chmod(path.parent, 0o711)
            os.chmod(path, 0o666)
            found = attack()
            assert set(found) == {"path record", "path git"}, found
            # closed unread: the attacker sees end of file, or a reset / broken pipe while it still sends
            closed = {"reply: ", "reply: ConnectionResetError", "reply: BrokenPipeError"}
            assert set(found.values()) <= closed, found
            refused = f"refused a connection from uid {NOBODY}"
            wait_for(lambda: server_log(path).count(refused) >= 2, 30, "the server to log both refusals")
            assert server_log(path).count(refused) == 2, server_log(path)
            nothing_happened(found)
        finally:
            os.chmod(path.parent, 0o700)
            if path.exists():
                os.chmod(path, 0o600)
        # 3. the owner's points still start warm, in the same server, which served the attacks first:
        # a trainer forked for them would have run the attacker's git long before this point ends
        rec = run_owner_point(path, env, tmp_path / "after.json")
        assert rec["provenance"]["git_sha"], "provenance lost its git"
        nothing_happened(found)
    finally:
        shutil.rmtree(evil, ignore_errors=True)


def test_a_request_carries_only_what_a_point_needs(server, tmp_path):
    """As the owner: anything but the server's interpreter, kan.train's flags, the per-rank keys and
    an absolute directory is refused with what is wrong, before anything runs."""
    path, env = server
    run_owner_point(path, env, tmp_path / "first.json")
    out = tmp_path / "bad.json"
    good = {"python": sys.executable, "args": ["--widths=2,8,1", f"--out={out}"], "env": {"RANK": "0"},
            "cwd": str(tmp_path)}
    cases = {
        "PATH": dict(good, env={"PATH": f"{tmp_path}:/usr/bin"}),
        "LD_PRELOAD": dict(good, env={"LD_PRELOAD": str(tmp_path / "x.so")}),
        "not a kan.train command line": dict(good, args=["--bogus", f"--out={out}"]),
        "not this server's interpreter": dict(good, python="/usr/bin/python3"),
        "--help": dict(good, args=["--help"]),
        "absolute directory": dict(good, cwd="relative/dir"),
        "exactly the keys": dict(good, module="os"),
    }
    for needle, req in cases.items():
        answer = raw_request(path, req)
        assert "error" in answer and needle in answer["error"], (needle, answer)
    assert "RANK" in raw_request(path, cases["PATH"])["error"]  # the error names what is allowed
    assert not out.exists()
    assert server_log(path).count("refused a request") == len(cases) + 1
    run_owner_point(path, env, tmp_path / "last.json")  # the server is still serving


def test_provenance_runs_the_git_found_when_kan_was_imported(tmp_path, monkeypatch):
    """A PATH changed after the import (as a request's PATH would have been) does not pick git."""
    fake = tmp_path / "git"
    fake.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    state = metrics.git_state(ROOT)
    assert not (tmp_path / "ran").exists()
    assert metrics.GIT is None or (Path(metrics.GIT).is_absolute() and Path(metrics.GIT).parent != tmp_path)
    if metrics.GIT and (ROOT / ".git").exists():
        assert state["git_sha"]


def test_the_private_directory_is_refused_when_others_could_use_it(tmp_path):
    base = tmp_path / "tmp"
    base.mkdir()
    d = warm.server.private_dir({"TMPDIR": str(base)})
    assert d.stat().st_mode & 0o777 == 0o700
    os.chmod(d, 0o755)
    with pytest.raises(warm.server.UnsafeDirError, match="0755"):
        warm.server.private_dir({"TMPDIR": str(base)})
    os.rmdir(d)
    os.symlink(tmp_path, d)  # a name taken by a symlink (another user's trap, in a shared /tmp)
    with pytest.raises(warm.server.UnsafeDirError, match="not a directory"):
        warm.server.private_dir({"TMPDIR": str(base)})
    said: list[str] = []
    assert warm.start([sys.executable, "-m", "kan.train"], {"TMPDIR": str(base)}, say=said.append) is None
    assert "no private directory" in said[0]


@root_only
def test_a_claim_another_user_wrote_is_not_a_live_attempt(tmp_path):
    """A claim names a pid that snakemake's SIGTERM handler signals and makes launchers wait: one
    written by another user (a group-writable project folder) is treated as stale."""
    from launch import claims

    path = tmp_path / "attempts" / "p1" / "claim.json"
    path.parent.mkdir(parents=True)
    claim = claims.new_claim(None, "2026-12-01T00:00:00+00:00", watch_pid=os.getpid())  # this live process
    path.write_text(json.dumps(dataclasses.asdict(claim)))
    assert claims.read(path) == claim and [c for _, c in claims.live_claims(tmp_path / "attempts")] == [claim]
    os.chown(path, NOBODY, NOBODY)
    assert claims.read(path) is None and claims.live_claims(tmp_path / "attempts") == []


@root_only
def test_the_local_slurm_refuses_a_state_folder_it_does_not_own(tmp_path):
    """tests/slurm/slurm-local.sh keeps PID files it later kills in SLURM_LOCAL_DIR (/tmp by default):
    a folder made first by another user, or a symlink in its place, is refused before anything runs."""
    theirs = Path(tempfile.mkdtemp(prefix="kanscale-slurm-theirs-"))
    os.chown(theirs, NOBODY, NOBODY)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    hosts = Path("/etc/hosts").read_text()
    try:
        for folder in (theirs, link):
            for action in ("start", "stop"):
                r = subprocess.run(["bash", str(ROOT / "tests" / "slurm" / "slurm-local.sh"), action],
                                   env=dict(os.environ, SLURM_LOCAL_DIR=str(folder)), capture_output=True, text=True,
                                   timeout=60)
                assert r.returncode == 1 and "is not ours alone" in r.stderr, (folder, action, r.stdout, r.stderr)
        assert sorted(theirs.iterdir()) == [] and Path("/etc/hosts").read_text() == hosts
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
