"""The launch commands of one measurement point inside its Slurm job (imported by launch_point.py).

The job was submitted by snakemake-executor-plugin-slurm with an `mpi` resource, so the rule runs
directly in the job's batch step (no one-task `srun` wrapper) and this module starts the point's
processes itself with one `srun`:

* launcher torchrun: one torchrun agent per node (`srun --ntasks-per-node=1`), each starting
  gpus_per_node workers. One node: `--standalone`. Several nodes: c10d rendezvous on the first
  host of the job's node list, rendezvous id = job id, port derived from the job id.
* launcher srun: one Slurm task per GPU (`srun --ntasks-per-node=gpus_per_node`), ranks from
  SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; MASTER_ADDR/MASTER_PORT name rank 0's host.

The jobstep plugin removes every SLURM_* variable except SLURM_JOB_ID (and a few others) before
it runs the rule, so the node list comes from `scontrol show job`, and the step's geometry
(nodes, tasks per node, CPUs per task, GPUs) is passed to srun explicitly. Inside the srun tasks
Slurm sets SLURM_* again, which is where kan.metrics records them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

# rendezvous / MASTER_PORT = PORT_BASE + job id mod PORT_SPAN: distinct for jobs that share a node
# (the local test cluster puts every fake node on 127.0.0.1), below the Linux ephemeral range
PORT_BASE = 20000
PORT_SPAN = 10000

# fault injection for tests, as in launch_point.py: KANSCALE_FAULT=drop-last-agent starts no torchrun
# agent on the job's last node, so a multi-node point's rendezvous can never complete
FAULT_ENV = "KANSCALE_FAULT"


def port_for_job(job_id: str | int) -> int:
    return PORT_BASE + int(job_id) % PORT_SPAN


def job_info(job_id: str) -> dict:
    """The job's fields from `scontrol show job -o` (NodeList, NumNodes, TresPerNode, ...)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    # one line of Key=Value pairs; values have no spaces except Command=/WorkDir= paths at the end
    return dict(m.groups() for m in re.finditer(r"(\S+?)=(\S*)", out))


def hostnames(nodelist: str) -> list[str]:
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return out.split()


def gres_per_node(point: dict) -> str:
    """The per-node GPU request, e.g. gpu:2 or gpu:a100:2; '' for CPU-only points."""
    if not point.get("request_gpus", True):
        return ""
    gpu_type = point.get("gpu_type") or ""
    return f"gpu:{gpu_type + ':' if gpu_type else ''}{point['gpus_per_node']}"


def srun_geometry(point: dict) -> tuple[int, int, int]:
    """(tasks per node, total tasks, CPUs per task) of the point's job and of its srun step."""
    per_node = 1 if point["launcher"] == "torchrun" else point["gpus_per_node"]
    # the point's cpus_per_task is per node (cpus_per_rank x gpus_per_node); an srun task is one rank
    cpus = point["cpus_per_task"] if per_node == 1 else point["cpus_per_task"] // point["gpus_per_node"]
    return per_node, per_node * point["nodes"], max(cpus, 1)


def commands(point: dict, out: str | Path, train_argv: Callable[[dict, str | Path], list[str]]
             ) -> tuple[list[list[str]], dict]:
    """(argv lists to run, extra environment) for `point` in the current Slurm job."""
    job_id = os.environ["SLURM_JOB_ID"]
    job = job_info(job_id)
    nodes = hostnames(job["NodeList"])
    if len(nodes) != point["nodes"]:
        raise RuntimeError(f"point {point['id']} needs {point['nodes']} node(s) but job {job_id} "
                           f"has {len(nodes)}: {job['NodeList']}")
    per_node, num_tasks, cpus = srun_geometry(point)
    port = port_for_job(job_id)
    gres = gres_per_node(point)
    srun = ["srun", f"--nodes={point['nodes']}", f"--ntasks={num_tasks}", f"--ntasks-per-node={per_node}",
            f"--cpus-per-task={cpus}",
            # one failed task ends the step at once instead of leaving its peers waiting in a collective
            "--kill-on-bad-exit=1",
            f"--job-name={point['id']}"]
    if gres and point["launcher"] == "srun":
        # each rank gets its own GPU (CUDA_VISIBLE_DEVICES per task); not mixed with --gres, which
        # newer Slurm versions refuse in the same request
        srun.append("--gpus-per-task=1")
    elif gres:
        srun.append(f"--gres={gres}")  # the agent's workers share the node's GPUs
    env = {
        # what the job asked for and got, recorded by kan.metrics.slurm_facts()
        "KANSCALE_SLURM_REQUEST": json.dumps({
            "nodes": point["nodes"], "gpus_per_node": point["gpus_per_node"], "gres_per_node": gres or None,
            "tasks": num_tasks, "tasks_per_node": per_node, "cpus_per_task": cpus, "mem_mb_per_node": point["mem_mb"],
            "runtime_min": point["runtime_min"], "launcher": point["launcher"],
            "job": {k: job.get(k) for k in ("JobName", "Partition", "Account", "NodeList", "NumNodes", "NumTasks",
                                            "CPUs/Task", "TresPerNode", "TRES", "MinMemoryNode", "TimeLimit")},
        }, separators=(",", ":")),
    }

    if point["launcher"] == "srun":
        env["MASTER_ADDR"] = nodes[0]
        env["MASTER_PORT"] = str(port)
        return [srun + [sys.executable] + train_argv(point, out) + ["--launcher", "srun"]], env

    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={point['gpus_per_node']}",
                "--max-restarts=0"]
    if point["nodes"] == 1:
        return [srun + torchrun + ["--standalone", "--nnodes=1"] + train_argv(point, out)], env
    if os.environ.get(FAULT_ENV) == "drop-last-agent":
        print("[launch] KANSCALE_FAULT=drop-last-agent: no torchrun agent on the last node", flush=True)
        num_agents = point["nodes"] - 1
        srun = [a for a in srun if not a.startswith(("--nodes=", "--ntasks="))]
        srun += [f"--nodes={num_agents}", f"--ntasks={num_agents}"]
    agent = torchrun + [
        f"--nnodes={point['nodes']}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={nodes[0]}:{port}",
        f"--rdzv-id={job_id}",
        f"--rdzv-conf=join_timeout={point['rdzv_join_s']},read_timeout={point['rdzv_read_s']}",
    ]
    return [srun + agent + train_argv(point, out)], env
