"""The launch package without a cluster: command lines, Slurm geometry (a fake job), claims, and
failure classification from hand-made error files and logs."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kan.contract.point import LaunchSettings, ModelConfig, Placement, Point, TrainConfig
from kan.train import parse
from launch import claims, commands, failure, slurm

LAUNCH = LaunchSettings(rdzv_join_s=20, rdzv_read_s=10, pg_timeout_s=60, cpus_per_rank=2, mem_mb_per_rank=500)


def point(nodes=1, gpus=1, launcher="torchrun") -> Point:
    return Point(study="t", experiment="comm", model=ModelConfig(widths=(2, 16, 1), grid_size=5),
                 train=TrainConfig(samples=1024, batch_per_rank=64, epochs=1, warmup_steps=2),
                 placement=Placement(nodes=nodes, gpus_per_node=gpus, launcher=launcher))


def flag(argv, name):
    hits = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
    return hits[-1] if hits else None


def test_one_rank_runs_the_trainer_directly(tmp_path):
    ((cmd, env),) = commands.local_commands(point(), LAUNCH, tmp_path / "t.json", tmp_path)
    assert cmd[:3] == [sys.executable, "-m", "kan.train"] and "torch.distributed.run" not in cmd
    assert env["TORCHELASTIC_ERROR_FILE"] == str(tmp_path / "rank0.error.json")
    assert flag(cmd, "--out") == str(tmp_path / "t.json") and flag(cmd, "--pg-timeout-s") == "60"


def test_one_node_starts_each_rank_with_torchruns_environment(tmp_path):
    cmds = commands.local_commands(point(1, 2), LAUNCH, tmp_path / "t.json", tmp_path, port=29999)
    assert len(cmds) == 2
    for r, (cmd, env) in enumerate(cmds):
        assert cmd[:3] == [sys.executable, "-m", "kan.train"]
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["MASTER_PORT"]) == (str(r), str(r), "2", "29999")


def test_several_nodes_one_torchrun_agent_each_with_short_timeouts(tmp_path):
    cmds = commands.local_commands(point(2, 1), LAUNCH, tmp_path / "t.json", tmp_path, port=29999)
    assert len(cmds) == 2
    for cmd, _ in cmds:
        assert "torch.distributed.run" in cmd and "--nnodes=2" in cmd and "--rdzv-backend=c10d" in cmd
        assert "--rdzv-endpoint=127.0.0.1:29999" in cmd and "--max-restarts=0" in cmd
        assert "--rdzv-conf=join_timeout=20,read_timeout=10" in cmd
        assert flag(cmd, "--log-dir") == str(tmp_path / "torchrun")
    assert len(commands.local_commands(point(2, 1), LAUNCH, tmp_path / "t", tmp_path, "drop-last-agent")) == 1


def test_train_argv_round_trips_through_the_trainers_parser(tmp_path):
    p = point(2, 2)
    cmd = commands.train_argv(p, LAUNCH, "x.json")
    back, run = parse(cmd[2:])
    assert back == p and run.pg_timeout_s == 60 and run.out == "x.json"


HOSTS = ["node01", "node02"]


@pytest.mark.parametrize("nodes, gpus, launcher, want", [
    (1, 2, "torchrun", {"--nodes": "1", "--ntasks": "1", "--ntasks-per-node": "1", "--cpus-per-task": "4",
                        "--gres": "gpu:2"}),
    (2, 2, "torchrun", {"--nodes": "2", "--ntasks": "2", "--ntasks-per-node": "1", "--cpus-per-task": "4",
                        "--gres": "gpu:2"}),
    (2, 2, "srun", {"--nodes": "2", "--ntasks": "4", "--ntasks-per-node": "2", "--cpus-per-task": "2"}),
])
def test_slurm_srun_line(tmp_path, nodes, gpus, launcher, want):
    ((cmd, env),) = commands.slurm_commands(point(nodes, gpus, launcher), LAUNCH, tmp_path / "t.json", tmp_path,
                                            "12345", HOSTS[:nodes])
    assert cmd[0] == "srun" and "--kill-on-bad-exit=1" in cmd
    srun = cmd[:cmd.index(sys.executable)]  # the trainer's own flags (--nodes=...) follow
    for k, v in want.items():
        assert flag(srun, k) == v, (k, cmd)
    req = json.loads(env["KANSCALE_SLURM_REQUEST"])
    assert req["job_id"] == "12345" and req["hosts"] == HOSTS[:nodes]
    if launcher == "srun":
        assert "--gpus-per-task=1" in cmd and flag(srun, "--gres") is None
        assert env["MASTER_ADDR"] == "node01" and env["MASTER_PORT"] == str(20000 + 12345 % 10000)
        assert "torch.distributed.run" not in cmd
    elif nodes == 1:
        assert "--standalone" in cmd
    else:
        assert "--rdzv-endpoint=node01:22345" in cmd and "--rdzv-id=12345" in cmd


def test_slurm_node_count_must_match(tmp_path):
    with pytest.raises(RuntimeError, match="needs 2 node"):
        commands.slurm_commands(point(2, 1), LAUNCH, tmp_path / "t", tmp_path, "1", ["node01"])


def test_slurm_fault_drops_the_last_agent(tmp_path):
    ((cmd, _),) = commands.slurm_commands(point(2, 1), LAUNCH, tmp_path / "t", tmp_path, "7", HOSTS,
                                          "drop-last-agent")
    srun = cmd[:cmd.index(sys.executable)]
    assert (flag(srun, "--nodes"), flag(srun, "--ntasks")) == ("1", "1") and "--nnodes=2" in cmd


# ---- claims ----

def test_claim_is_exclusive_and_stale_claims_are_taken_over(tmp_path):
    path = tmp_path / "claim.json"
    mine = claims.new_claim(None, "now")
    assert claims.acquire(path, mine, wait_s=0) is None and claims.holds(path, mine)
    other = claims.new_claim(None, "later")
    holder = claims.acquire(path, other, wait_s=0.2, poll_s=0.05, say=lambda m: None)
    assert holder is not None and holder.token == mine.token  # live: not duplicated
    claims.release(path, mine)
    assert not path.exists()
    # a claim of a dead process (a SIGKILLed launcher) is stale
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = claims.Claim(token="old", host=mine.host, pid=dead.pid, pid_start="1", slurm_job_id=None,
                         started_utc="then")
    path.write_text(json.dumps(stale.__dict__))
    assert claims.acquire(path, other, wait_s=0) is None and claims.holds(path, other)
    assert list(tmp_path.glob("stale-*.json"))


def test_claim_of_another_host_lives_by_its_heartbeat(tmp_path):
    path = tmp_path / "claim.json"
    far = claims.Claim(token="far", host="elsewhere", pid=1, pid_start="1", slurm_job_id="9", started_utc="t")
    path.write_text(json.dumps(far.__dict__))
    assert claims.is_live(far, path)
    old = time.time() - claims.LEASE_S - 1
    os.utime(path, (old, old))
    assert not claims.is_live(far, path)


def test_waiting_for_a_live_claim_ends_when_it_is_released(tmp_path):
    """The holder is alive when the waiter first looks (it waits, and says so) and ends while it
    waits: the waiter then takes the claim, long before its 30 s are up."""
    path = tmp_path / "claim.json"
    holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    c = claims.Claim(token="h", host=claims.new_claim(None, "").host, pid=holder.pid,
                     pid_start=claims.process_start(holder.pid), slurm_job_id=None, started_utc="t")
    path.write_text(json.dumps(c.__dict__))
    said, waited = [], []

    def release(message):  # said once the waiter has found the holder live: now the holder ends
        said.append(message)
        holder.communicate(timeout=60)

    mine = claims.new_claim(None, "n")
    assert claims.acquire(path, mine, wait_s=30, poll_s=0.01, say=release, waited=waited) is None
    assert len(said) == 1 and "waiting for it" in said[0] and [w.token for w in waited] == ["h"]
    assert claims.holds(path, mine)


# ---- failure classification ----

def error_file(folder: Path, name: str, message: str, ts: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"message": {"message": message, "extraInfo": {
        "py_callstack": "Traceback ...", "timestamp": str(ts)}}}))


def classify(**kw):
    base = dict(timed_out=False, stop_signal=None, trainer=None, errors=[], exit_codes=[1], log_lines=[],
                oom_killed=False, log_path="L", runtime_min=5)
    return failure.classify(**{**base, **kw})


def test_the_first_real_cause_wins_over_its_consequences(tmp_path):
    error_file(tmp_path / "a", "error.json", "RuntimeError: Connection reset by peer", 100)
    error_file(tmp_path / "b", "error.json", "ValueError: device=cuda was requested but torch sees no usable "
                                             "CUDA device", 101)
    trainer = {"status": "failed", "reason": "RuntimeError: Connection reset by peer"}
    status, why = classify(errors=failure.read_error_files(tmp_path), trainer=trainer)
    assert status == "failed" and why.startswith("ValueError: device=cuda") and why.endswith("(log: L)")


def test_signals_are_killed_not_oom_unless_an_oom_kill_was_seen():
    assert classify(exit_codes=[-9])[0] == "killed"
    assert "signal 9 (SIGKILL)" in classify(exit_codes=[-9])[1]
    assert classify(exit_codes=[1], log_lines=["  exitcode  : -15 (pid: 12)"])[1].startswith(
        "a rank was killed by signal 15 (SIGTERM)")
    assert classify(exit_codes=[-9], oom_killed=True)[0] == "oom"
    assert classify(exit_codes=[-9], log_lines=["slurmstepd: error: Detected 1 oom_kill event in StepId=3.0"])[0] == "oom"


def test_allocator_failures_are_oom(tmp_path):
    error_file(tmp_path, "rank0.error.json", "RuntimeError: [enforce fail at alloc_cpu.cpp:121] "
                                             "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 GB", 5)
    assert classify(errors=failure.read_error_files(tmp_path))[0] == "oom"
    assert classify(log_lines=["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"])[0] == "oom"


def test_log_causes():
    lines = ["usage: python -m kan.train [-h] ...",
             "python -m kan.train: error: argument --grid-size: must be >= 1, got 0"]
    assert classify(log_lines=lines)[1].startswith("python -m kan.train: error: argument --grid-size")
    lines = ["Traceback (most recent call last):", "  File x", "ValueError: first cause",
             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "kan.train FAILED"]
    assert classify(log_lines=lines)[1].startswith("ValueError: first cause")
    why = classify(log_lines=["torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: x"])[1]
    assert "joined the rendezvous within timeouts.rdzv_join_s" in why


def test_launcher_outcomes_come_first():
    assert classify(timed_out=True, exit_codes=[-15])[0] == "timeout"
    status, why = classify(stop_signal=signal.SIGTERM, exit_codes=[-15])
    assert status == "cancelled" and "SIGTERM" in why


def test_nccl_tuning_lines_are_kept_once_in_order():
    from launch.main import nccl_tuning_lines

    lines = ["[0] n1:1:1 [0] NCCL INFO Using network Socket", "[0] n1:1:1 [0] NCCL INFO AllReduce: Algo Ring proto LL",
             "[1] n1:2:2 [1] NCCL INFO AllReduce: Algo Ring proto LL", "plain output",
             "[0] n1:1:1 [0] NCCL INFO TUNING: ring/LL 2.0 us"]
    got = nccl_tuning_lines(lines)
    assert got == ["[0] n1:1:1 [0] NCCL INFO AllReduce: Algo Ring proto LL",
                   "[1] n1:2:2 [1] NCCL INFO AllReduce: Algo Ring proto LL", "[0] n1:1:1 [0] NCCL INFO TUNING: ring/LL 2.0 us"]


def test_a_controller_that_refuses_connections_is_not_asked(tmp_path):
    """slurm.conf names a controller where nothing listens: squeue would retry it for ~10 s and then
    know no jobs; controller_refuses says so without asking it. A listening controller, or no
    controller named, is left to squeue."""
    import socket

    with socket.socket() as s:  # a port that was just free: nothing listens on it now
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=x\nSlurmctldHost=ctl(127.0.0.1)\nSlurmctldPort={closed}\n")
    assert slurm.controller_refuses(conf)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        conf.write_text(f"SlurmctldHost=ctl(127.0.0.1)\nSlurmctldHost=backup(127.0.0.1)\n"
                        f"SlurmctldPort={listening.getsockname()[1]}\n")
        assert not slurm.controller_refuses(conf)
    conf.write_text("# configless: no controller named\n")
    assert not slurm.controller_refuses(conf)
    assert not slurm.controller_refuses(tmp_path / "missing.conf")
