"""The command lines of one point, each written once.

Locally (no Slurm job):
  * one node: one `python -m kan.train` per rank, started directly with torchrun's environment
    (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT; rank 0 hosts the store). A
    torchrun agent would add an interpreter, torch's import and a rendezvous, 2-3 s per point on a
    2-core machine, and change nothing inside the training loop;
  * several nodes: one torchrun agent per "node" on 127.0.0.1 with c10d rendezvous, so the
    inter-node code path runs on one machine too (labelled a simulation in the report);
  * several nodes on the emulated cluster (placement.link_mbit > 0): the same agents, each in its
    node's network namespace and CPU set, over a link of known rate (emulated_commands).
Inside a Slurm job (`launcher: torchrun`): one `srun` with one torchrun agent per node; c10d on the
first host of the job's node list, rendezvous id = job id, port = PORT_BASE + job id mod PORT_SPAN.
`launcher: srun`: one Slurm task per rank, ranks from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import kan
from kan import env as kan_env
from kan.contract import geometry
from kan.contract.point import LaunchSettings, Point

from . import netemu

# rendezvous / MASTER_PORT = PORT_BASE + job id mod PORT_SPAN: distinct for jobs that share a node
# (the local test cluster puts every fake node on 127.0.0.1), below the Linux ephemeral range
PORT_BASE = 20000
PORT_SPAN = 10000
# fault injection for tests (KANSCALE_FAULT): drop-last-agent = one node's torchrun agent never
# starts, so a multi-node point's rendezvous cannot complete; bad-flag = the trainer gets an invalid
# command-line value (the record's reason must name the flag)
FAULTS = ("drop-last-agent", "bad-flag")


# pykan's own environment (workflow/scripts/pykan_env.py makes it in the working directory) and the
# driver that runs kan.train's loop with pykan's model in it
PYKAN_VENV = Path(".venv-pykan")
PYKAN_DRIVER = Path(__file__).resolve().parents[1] / "pykan_train.py"
# kanscale's kan/ folder: the pykan driver loads it as `kanscale`; the warm-start server's key hashes
# its sources and the server starts in the folder above it (launch/warm.py)
KAN_DIR = Path(kan.__file__).resolve().parent  # kan/__init__.py imports nothing at load
NODE_LAUNCHER = Path(__file__).resolve().parents[1] / "launch_node.py"


def python_for(point: Point) -> str:
    """The interpreter a point's ranks run in: pykan's environment for impl pykan, else this one."""
    if point.model.impl == "pykan":
        return str((PYKAN_VENV / "bin" / "python").absolute())
    return sys.executable


def train_argv(point: Point, launch: LaunchSettings, out: str | Path, fault: str | None = None) -> list[str]:
    """`-m kan.train ...` (or the pykan driver's script): the point as flags (kan never reads config/)."""
    bad = ["--grid-size=0"] if fault == "bad-flag" else []
    entry = ([str(PYKAN_DRIVER), f"--kanscale={KAN_DIR}"] if point.model.impl == "pykan"
             else ["-m", "kan.train"])
    return [*entry, *point.to_argv(), *bad, f"--out={out}", f"--pg-timeout-s={launch.pg_timeout_s}"]


def num_agents(point: Point, fault: str | None) -> int:
    """torchrun agents to start: one per node, one fewer under the drop-last-agent fault."""
    nodes = point.placement.nodes
    return nodes - 1 if fault == "drop-last-agent" and nodes > 1 else nodes


def _torchrun(point: Point, log_dir: Path) -> list[str]:
    # --log-dir: torchrun's per-rank error files land there (torch.distributed.elastic @record)
    return [python_for(point), "-m", "torch.distributed.run", f"--nproc-per-node={point.placement.gpus_per_node}",
            "--max-restarts=0", f"--log-dir={log_dir}"]


def _rendezvous(point: Point, launch: LaunchSettings, endpoint: str, rdzv_id: str) -> list[str]:
    return [f"--nnodes={point.placement.nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
            f"--rdzv-id={rdzv_id}",
            f"--rdzv-conf=join_timeout={launch.rdzv_join_s},read_timeout={launch.rdzv_read_s}"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_commands(point: Point, launch: LaunchSettings, out: Path, attempt_dir: Path, fault: str | None = None,
                   port: int | None = None) -> list[tuple[list[str], dict]]:
    """[(argv, extra environment)] on this machine."""
    train = train_argv(point, launch, out, fault)
    p = point.placement
    if p.nodes == 1:
        world = p.world_size
        ranks = [{"TORCHELASTIC_ERROR_FILE": str(attempt_dir / f"rank{r}.error.json")} for r in range(world)]
        if world > 1:
            master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port or free_port()),
                      "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world)}
            for r, env in enumerate(ranks):
                env.update(master, RANK=str(r), LOCAL_RANK=str(r))
        return [([python_for(point), *train], env) for env in ranks]
    endpoint = f"127.0.0.1:{port or free_port()}"
    agent = _torchrun(point, attempt_dir / "torchrun") + _rendezvous(point, launch, endpoint, attempt_dir.name) + train
    return [(list(agent), {}) for _ in range(num_agents(point, fault))]


def emulated_commands(point: Point, launch: LaunchSettings, out: Path, attempt_dir: Path, cluster,
                      fault: str | None = None, port: int | None = None) -> list[tuple[list[str], dict]]:
    """[(argv, extra environment)] of a multi-node point on the emulated cluster (launch/netemu.py):
    node i's torchrun agent runs inside namespace i (`ip netns exec`) on node i's CPU set (`taskset`),
    so every inter-node byte crosses the shaped link. Node 0 hosts the rendezvous store on its own
    address (is_host=1: the store is not on the hostname's address, so torchrun must be told); gloo
    binds eth0 (GLOO_SOCKET_IFNAME; without it, it binds 127.0.0.1 and the peers cannot connect)."""
    endpoint = f"{cluster.nodes[0].address}:{port or free_port()}"
    train = train_argv(point, launch, out, fault)
    cmds = []
    for node in cluster.nodes[:num_agents(point, fault)]:
        rdzv = _rendezvous(point, launch, endpoint, attempt_dir.name)
        rdzv[-1] += f",is_host={int(node.index == 0)}"
        agent = [*_torchrun(point, attempt_dir / "torchrun"), *rdzv, f"--local-addr={node.address}", *train]
        wrap = ["ip", "netns", "exec", node.namespace, "taskset", "-c", ",".join(map(str, node.cpus))]
        cmds.append(([*wrap, *agent], {"GLOO_SOCKET_IFNAME": netemu.IFNAME}))
    return cmds


# what the record keeps of `scontrol show job` (what Slurm granted)
JOB_FIELDS = ("JobName", "Partition", "Account", "NodeList", "NumNodes", "NumTasks", "CPUs/Task", "TresPerNode",
              "TRES", "MinMemoryNode", "TimeLimit", "OverSubscribe")


def slurm_commands(point: Point, launch: LaunchSettings, out: Path, attempt_dir: Path, job_id: str,
                   hosts: list[str], fault: str | None = None, job: dict | None = None) -> list[tuple[list[str], dict]]:
    """[(argv, extra environment)] inside the point's Slurm job (node list `hosts`): one srun."""
    p = point.placement
    if len(hosts) != p.nodes:
        raise RuntimeError(f"point {point.id} needs {p.nodes} node(s) but job {job_id} has {len(hosts)}: {hosts}")
    agents = num_agents(point, fault) if p.launcher == "torchrun" else p.nodes
    per_node = geometry.tasks_per_node(point)
    gres = geometry.gres(point, launch)
    srun = ["srun", f"--nodes={agents}", f"--ntasks={per_node * agents}", f"--ntasks-per-node={per_node}",
            f"--cpus-per-task={geometry.cpus_per_task(point, launch)}",
            # one failed task ends the step at once instead of leaving its peers waiting in a collective
            "--kill-on-bad-exit=1", f"--job-name={point.id}"]
    if gres and p.launcher == "srun":
        # each rank gets its own GPU (CUDA_VISIBLE_DEVICES per task); not mixed with --gres, which
        # newer Slurm versions refuse in the same request
        srun.append("--gpus-per-task=1")
    elif gres:
        srun.append(f"--gres={gres}")  # the agent's workers share the node's GPUs
    port = PORT_BASE + int(job_id) % PORT_SPAN
    granted = {k: (job or {}).get(k) for k in JOB_FIELDS}
    env = {kan_env.SLURM_REQUEST: json.dumps({**geometry.request(point, launch), "job_id": job_id, "hosts": hosts,
                                              "job": granted}, separators=(",", ":"))}
    train = train_argv(point, launch, out, fault)
    if p.launcher == "srun":
        env.update({"MASTER_ADDR": hosts[0], "MASTER_PORT": str(port),
                    kan_env.ERROR_DIR: str(attempt_dir / "srun")})
        return [(srun + [python_for(point), *train], env)]
    log_dir = attempt_dir / "torchrun"
    if p.nodes == 1:
        return [(srun + _torchrun(point, log_dir) + ["--standalone", "--nnodes=1", *train], env)]
    if p.emulated:
        # the nodes are network namespaces of the emulated cluster (tests/slurm/slurm-local.sh
        # SLURM_LOCAL_EMULATE=1): per node, launch_node.py sets is_host and the node's address
        rdzv = _rendezvous(point, launch, f"{hosts[0]}:{port}", job_id)
        rdzv[-1] += ",is_host={NODE_IS_HOST}"
        env["GLOO_SOCKET_IFNAME"] = netemu.IFNAME
        return [(srun + [sys.executable, str(NODE_LAUNCHER), *_torchrun(point, log_dir), *rdzv,
                         "--local-addr={NODE_ADDR}", *train], env)]
    return [(srun + _torchrun(point, log_dir) + _rendezvous(point, launch, f"{hosts[0]}:{port}", job_id) + train, env)]


def packed_local_commands(point: Point, launch: LaunchSettings, out: Path, attempt_dir: Path, job_id: str,
                          hosts: list[str], fault: str | None = None, job: dict | None = None
                          ) -> list[tuple[list[str], dict]]:
    """A one-node CPU point inside a packed allocation: its ranks start on the job's node as a local
    point's do (no srun step, no torchrun agent), so the warm-start server can fork them; the record
    still keeps what the job asked for and got."""
    if len(hosts) != 1 or point.placement.nodes != 1:
        raise RuntimeError(f"point {point.id} runs on one node but job {job_id} has {len(hosts)}: {hosts}")
    granted = {k: (job or {}).get(k) for k in JOB_FIELDS}
    request = json.dumps({**geometry.request(point, launch), "job_id": job_id, "hosts": hosts, "job": granted},
                         separators=(",", ":"))
    return [(argv, {**env, kan_env.SLURM_REQUEST: request})
            for argv, env in local_commands(point, launch, out, attempt_dir, fault)]
