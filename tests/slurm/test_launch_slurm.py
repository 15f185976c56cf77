"""launch_slurm.commands without a Slurm: the srun/torchrun lines each placement and launcher get.
(`scontrol` is replaced by a fake job; the real thing runs in test_slurm.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflow" / "scripts"))
import launch_point  # noqa: E402
import launch_slurm  # noqa: E402


def make_point(nodes: int, gpus: int, launcher: str = "torchrun", **over) -> dict:
    point = {
        "id": f"comm-kanscale_bspline-2x16x1-n{nodes}g{gpus}-r0", "study": "t", "experiment": "comm",
        "impl": "kanscale", "basis": "bspline", "widths": [2, 16, 1], "grid_size": 5, "spline_order": 3,
        "grid_range": [-2.0, 2.0], "nodes": nodes, "gpus_per_node": gpus, "world_size": nodes * gpus,
        "samples": 1024, "batch_per_rank": 64, "epochs": 1, "lr": 1e-3, "noise": 0.01, "seed": 0,
        "warmup_steps": 2, "comm_probe_every": 2, "max_steps": 4, "rep": 0, "launcher": launcher,
        "request_gpus": True, "gpu_type": "", "device": "auto", "threads_per_rank": 1, "runtime_min": 5,
        "mem_mb": 500 * gpus, "cpus_per_task": 2 * gpus, "rdzv_join_s": 20, "rdzv_read_s": 10, "pg_timeout_s": 60,
    }
    point.update(over)
    return point


@pytest.fixture
def fake_job(monkeypatch):
    def use(nodes: int, job_id: str = "12345"):
        names = [f"node{i:02d}" for i in range(1, nodes + 1)]
        monkeypatch.setenv("SLURM_JOB_ID", job_id)
        monkeypatch.delenv("KANSCALE_FAULT", raising=False)
        monkeypatch.setattr(launch_slurm, "job_info", lambda jid: {"NodeList": ",".join(names), "NumNodes": str(nodes)})
        monkeypatch.setattr(launch_slurm, "hostnames", lambda nodelist: nodelist.split(","))
        return names

    return use


def flag(argv: list[str], name: str) -> str | None:
    hits = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
    return hits[-1] if hits else None


def test_single_node_torchrun_is_standalone(fake_job):
    fake_job(1)
    cmds, env = launch_slurm.commands(make_point(1, 2), "out.json", launch_point.train_argv)
    (cmd,) = cmds
    assert cmd[0] == "srun"
    assert (flag(cmd, "--nodes"), flag(cmd, "--ntasks"), flag(cmd, "--ntasks-per-node")) == ("1", "1", "1")
    assert flag(cmd, "--cpus-per-task") == "4" and flag(cmd, "--gres") == "gpu:2"
    assert "--standalone" in cmd and flag(cmd, "--nproc-per-node") == "2"
    assert not any(a.startswith("--rdzv") for a in cmd)
    req = json.loads(env["KANSCALE_SLURM_REQUEST"])
    assert req["gres_per_node"] == "gpu:2" and req["tasks"] == 1


def test_multi_node_torchrun_rendezvous_on_first_host(fake_job):
    names = fake_job(2, job_id="4242")
    cmds, _ = launch_slurm.commands(make_point(2, 2), "out.json", launch_point.train_argv)
    (cmd,) = cmds
    assert (flag(cmd, "--nodes"), flag(cmd, "--ntasks"), flag(cmd, "--ntasks-per-node")) == ("2", "2", "1")
    assert flag(cmd, "--rdzv-backend") == "c10d" and flag(cmd, "--rdzv-id") == "4242"
    assert flag(cmd, "--rdzv-endpoint") == f"{names[0]}:{launch_slurm.port_for_job(4242)}"
    assert flag(cmd, "--rdzv-conf") == "join_timeout=20,read_timeout=10"
    assert flag(cmd, "--nnodes") == "2" and "--standalone" not in cmd
    assert 1024 <= launch_slurm.port_for_job(4242) < 32768  # below the ephemeral range


def test_srun_launcher_one_task_per_gpu(fake_job):
    names = fake_job(2)
    cmds, env = launch_slurm.commands(make_point(2, 2, launcher="srun"), "out.json", launch_point.train_argv)
    (cmd,) = cmds
    assert (flag(cmd, "--ntasks"), flag(cmd, "--ntasks-per-node"), flag(cmd, "--cpus-per-task")) == ("4", "2", "2")
    assert "--gpus-per-task=1" in cmd and flag(cmd, "--gres") is None and "torch.distributed.run" not in cmd
    assert cmd[cmd.index("--launcher") + 1] == "srun"
    assert env["MASTER_ADDR"] == names[0] and env["MASTER_PORT"] == str(launch_slurm.port_for_job(12345))


def test_cpu_cluster_and_gpu_type(fake_job):
    fake_job(1)
    (cmd,), env = launch_slurm.commands(make_point(1, 2, request_gpus=False), "o.json", launch_point.train_argv)
    assert flag(cmd, "--gres") is None and json.loads(env["KANSCALE_SLURM_REQUEST"])["gres_per_node"] is None
    (cmd,), _ = launch_slurm.commands(make_point(1, 2, gpu_type="a100"), "o.json", launch_point.train_argv)
    assert flag(cmd, "--gres") == "gpu:a100:2"


def test_fault_drops_the_last_nodes_agent(fake_job, monkeypatch):
    fake_job(2)
    monkeypatch.setenv("KANSCALE_FAULT", "drop-last-agent")
    (cmd,), _ = launch_slurm.commands(make_point(2, 1), "o.json", launch_point.train_argv)
    assert (flag(cmd, "--nodes"), flag(cmd, "--ntasks")) == ("1", "1") and flag(cmd, "--nnodes") == "2"


def test_wrong_allocation_is_an_error(fake_job, monkeypatch):
    fake_job(1)
    with pytest.raises(RuntimeError, match="needs 2 node"):
        launch_slurm.commands(make_point(2, 1), "o.json", launch_point.train_argv)
