"""The emulated cluster's plumbing (root only): names, addresses and CPU sets, the network
namespaces and the bridge that join them, and the state file that says whose they are. The link
each node's egress gets, the probe and one point's session are launch/netemu.py's, which is also
the module callers import.

    bridge kse-<name>            in the root namespace, address 198.18.<k>.254/24 (the host's port)
      veth kse-<name>-v<i>  <->  eth0 in namespace kse-<name>-n<i>, address 198.18.<k>.<i+1>/24

Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for benchmarking networks: they
exist only on the interfaces made here. No namespace gets a default route, nothing is NATed, and
the root namespace gains one connected route to its own /24: an emulated node can reach the other
emulated nodes and the host's port on the bridge, nothing else. `up` refuses when any other
interface or route of the host already uses 198.18.0.0/15.

CPU sets: a point of n nodes on C cores gives node j cores [j C / n, (j + 1) C / n) (with fewer
cores than nodes, core j mod C), so a 2x1 point runs one node on each of 2 cores and a 1x2 point
gets the same 2 cores: only the link differs between them.

State: /run/kanscale-netemu/<name>.json, written *before* anything is made, names the owner (pid and
its start time) and every namespace, interface and process the cluster has; a flock on
<name>.lock serialises users. `up` first removes what a dead owner left (kill -9 of a launcher
included), and `down` (make cluster-down: every cluster) removes namespaces (and the processes in
them), interfaces and the state file by their names, with or without a state file. Both are
idempotent. Nothing is written to /etc/hosts: the launcher passes addresses, never names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kan.contract.atomic import write_text

from .claims import process_start

PREFIX = "kse-"
STATE_DIR = Path(os.environ.get("KANSCALE_NETEMU_DIR", "/run/kanscale-netemu"))
# one /24 per cluster name inside RFC 2544's 198.18.0.0/15
RANGE = ipaddress.ip_network("198.18.0.0/15")
SUBNETS = {"local": 1, "slurm": 2, "test": 3}
IFNAME = "eth0"  # inside every namespace: GLOO_SOCKET_IFNAME
HOST_OCTET = 254
CMD_TIMEOUT_S = 20


class EmulationError(RuntimeError):
    """The emulated cluster cannot be made or used; the message says why and what to do."""


@dataclass(frozen=True)
class Node:
    index: int
    namespace: str
    address: str
    veth: str  # the root namespace's end, a port of the bridge
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class Cluster:
    name: str
    bridge: str
    host_address: str
    prefix_len: int
    nodes: tuple[Node, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return asdict(self)


# ---- names, addresses, CPU sets (pure) ------------------------------------------------------------

def node_cpus(num_nodes: int, cores: list[int]) -> list[tuple[int, ...]]:
    """Node j of n gets cores [j C / n, (j + 1) C / n) of the C usable cores; with fewer cores than
    nodes, core j mod C (then nodes share cores, and the point is flagged as oversubscribed)."""
    c = len(cores)
    if c >= num_nodes:
        return [tuple(cores[j * c // num_nodes:(j + 1) * c // num_nodes]) for j in range(num_nodes)]
    return [(cores[j % c],) for j in range(num_nodes)]


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def plan(name: str, num_nodes: int, cores: list[int] | None = None) -> Cluster:
    if name not in SUBNETS:
        raise EmulationError(f"unknown emulated cluster {name!r}; known: {', '.join(SUBNETS)}")
    if not 1 <= num_nodes < HOST_OCTET:
        raise EmulationError(f"an emulated cluster has 1 to {HOST_OCTET - 1} nodes, got {num_nodes}")
    base = f"198.18.{SUBNETS[name]}"
    cpus = node_cpus(num_nodes, cores if cores is not None else usable_cores())
    nodes = tuple(Node(i, f"{PREFIX}{name}-n{i}", f"{base}.{i + 1}", f"{PREFIX}{name}-v{i}", cpus[i])
                  for i in range(num_nodes))
    return Cluster(name, f"{PREFIX}{name}", f"{base}.{HOST_OCTET}", 24, nodes)


# ---- running commands -----------------------------------------------------------------------------

def run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    if check and res.returncode != 0:
        raise EmulationError(f"`{' '.join(cmd)}` failed: {(res.stderr or res.stdout).strip()}")
    return res


def in_ns(ns: str, cmd: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def why_not() -> str | None:
    """Why this machine cannot emulate a cluster, or None."""
    if not sys.platform.startswith("linux"):
        return "network emulation needs Linux (network namespaces, tc)"
    if os.geteuid() != 0:
        return "network emulation needs root (it makes network namespaces, a bridge and tc qdiscs)"
    missing = [t for t in ("ip", "tc", "taskset") if shutil.which(t) is None]
    if missing:
        return f"network emulation needs {', '.join(missing)} (Debian packages iproute2, util-linux)"
    return None


# ---- state ----------------------------------------------------------------------------------------

def _state_path(name: str) -> Path:
    return STATE_DIR / f"{name}.json"


def _private_dir() -> Path:
    """STATE_DIR, made 0700 by root; refused when it is a symlink or someone else's."""
    STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(STATE_DIR)
    if not os.path.isdir(STATE_DIR) or os.path.islink(STATE_DIR) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise EmulationError(f"{STATE_DIR} is not a private directory of uid {os.geteuid()}: remove it")
    return STATE_DIR


def read_state(name: str) -> dict | None:
    try:
        return json.loads(_state_path(name).read_text())
    except (OSError, ValueError):
        return None


def owner_alive(state: dict) -> bool:
    pid = state.get("owner_pid")
    return isinstance(pid, int) and process_start(pid) == state.get("owner_start")


def write_state(name: str, state: dict) -> None:
    write_text(_state_path(name), json.dumps(state, indent=1))


def set_owner(name: str, pid: int) -> None:
    """Hand the cluster to another process (slurm-local: slurmctld, whose death makes it stale)."""
    state = read_state(name)
    if state is None:
        raise EmulationError(f"no emulated cluster {name!r} is up")
    write_state(name, {**state, "owner_pid": pid, "owner_start": process_start(pid)})


@contextlib.contextmanager
def locked(name: str, wait_s: float = 600.0):
    """The cluster's lock (one user at a time: points run one by one, as measure_slots says)."""
    path = _private_dir() / f"{name}.lock"
    with open(path, "a") as f:
        end = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise EmulationError(f"emulated cluster {name!r} stayed busy for {wait_s:.0f} s") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ---- up / down ------------------------------------------------------------------------------------

def _ours(name: str) -> tuple[list[str], list[str]]:
    """(namespaces, root-namespace links) of cluster `name` that exist now, found by their names."""
    ns = run(["ip", "netns", "list"], check=False).stdout.split("\n")
    namespaces = [line.split()[0] for line in ns if line.split() and line.split()[0].startswith(f"{PREFIX}{name}-n")]
    links = []
    for line in run(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            dev = parts[1].strip().split("@")[0]
            if dev == f"{PREFIX}{name}" or dev.startswith(f"{PREFIX}{name}-v"):
                links.append(dev)
    return namespaces, links


def _kill_namespace_processes(ns: str) -> list[int]:
    pids = [int(p) for p in run(["ip", "netns", "pids", ns], check=False).stdout.split() if p.isdigit()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def down(name: str) -> list[str]:
    """Remove cluster `name` (processes in its namespaces, namespaces, bridge, ports, state file);
    idempotent. Returns what was removed."""
    removed = []
    namespaces, links = _ours(name)
    for ns in namespaces:
        pids = _kill_namespace_processes(ns)
        if pids:
            removed.append(f"processes {', '.join(map(str, pids))} in {ns}")
    for ns in namespaces:
        run(["ip", "netns", "del", ns], check=False)
        removed.append(f"namespace {ns}")
    for dev in sorted(links, key=lambda d: d == f"{PREFIX}{name}"):  # ports first, the bridge last
        if run(["ip", "link", "del", dev], check=False).returncode == 0:
            removed.append(f"link {dev}")
    # deleting a namespace frees its veth asynchronously: wait until the kernel has let go of them
    end = time.monotonic() + 5
    while time.monotonic() < end and any(_ours(name)):
        time.sleep(0.05)
    leftover = _ours(name)
    if any(leftover):
        raise EmulationError(f"could not remove {', '.join(leftover[0] + leftover[1])}")
    with contextlib.suppress(FileNotFoundError):
        _state_path(name).unlink()
        removed.append(f"state {_state_path(name)}")
    return removed


def down_all() -> list[str]:
    """Every emulated cluster on this host (make cluster-down)."""
    out = []
    for name in SUBNETS:
        out += down(name)
    return out


def _foreign_users_of_range(cluster: Cluster) -> list[str]:
    """Addresses or routes in 198.18.0.0/15 that are not this cluster's (another network uses it)."""
    ours = {cluster.bridge}
    out = []
    for line in run(["ip", "-o", "-4", "addr", "show"], check=False).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet":
            addr = ipaddress.ip_interface(parts[3])
            if addr.ip in RANGE and parts[1] not in ours:
                out.append(f"address {parts[3]} on {parts[1]}")
    for line in run(["ip", "-4", "route", "show", "root", str(RANGE)], check=False).stdout.splitlines():
        if f"dev {cluster.bridge}" not in line and line.strip():
            out.append(f"route {line.strip()}")
    return out


def up(cluster: Cluster, owner_pid: int) -> None:
    """Make `cluster`, replacing whatever an earlier one of the same name left when its owner is
    dead (or is `owner_pid` itself); a live owner's cluster is refused, never torn down under it
    (`cluster.py up slurm` while an emulated Slurm runs). The state file is written first, so that a
    crash half-way leaves nothing `down` cannot find."""
    why = why_not()
    if why:
        raise EmulationError(why)
    _private_dir()
    old = read_state(cluster.name)
    if old and owner_alive(old) and old.get("owner_pid") != owner_pid:
        raise EmulationError(f"emulated cluster '{cluster.name}' is in use (its owner, pid {old['owner_pid']}, is "
                             f"alive; made {old.get('made_utc', '?')}): not replaced. Stop what uses it, or remove it "
                             f"with `python workflow/scripts/cluster.py down {cluster.name}` (make cluster-down)")
    down(cluster.name)
    foreign = _foreign_users_of_range(cluster)
    if foreign:
        raise EmulationError(f"198.18.0.0/15 is already in use on this host ({'; '.join(foreign)}): the "
                             f"emulated cluster would mix with a real network; not made")
    write_state(cluster.name, {"cluster": cluster.to_json(), "owner_pid": owner_pid,
                                "owner_start": process_start(owner_pid), "link": None,
                                "made_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    try:
        br = cluster.bridge
        run(["ip", "link", "add", br, "type", "bridge"])
        run(["ip", "addr", "add", f"{cluster.host_address}/{cluster.prefix_len}", "dev", br])
        run(["ip", "link", "set", br, "up"])
        for n in cluster.nodes:
            run(["ip", "netns", "add", n.namespace])
            run(["ip", "link", "add", n.veth, "type", "veth", "peer", "name", IFNAME, "netns", n.namespace])
            run(["ip", "link", "set", n.veth, "master", br])
            run(["ip", "link", "set", n.veth, "up"])
            run(["ip", "-n", n.namespace, "addr", "add", f"{n.address}/{cluster.prefix_len}", "dev", IFNAME])
            run(["ip", "-n", n.namespace, "link", "set", "lo", "up"])
            run(["ip", "-n", n.namespace, "link", "set", IFNAME, "up"])
    except (EmulationError, subprocess.TimeoutExpired):
        down(cluster.name)
        raise


def link_states(cluster: Cluster) -> dict[int, str]:
    """{node index: 'up' | 'down' | 'missing'} of each node's eth0 (operational state)."""
    out = {}
    for n in cluster.nodes:
        res = run(["ip", "-n", n.namespace, "-o", "link", "show", IFNAME], check=False)
        if res.returncode != 0:
            out[n.index] = "missing"
        else:
            flags = res.stdout.split("<", 1)[-1].split(">", 1)[0].split(",")
            out[n.index] = "up" if "LOWER_UP" in flags else "down"
    return out


def nodes_at(cluster: Cluster, addresses: list[str]) -> Cluster:
    """The part of `cluster` whose nodes have these addresses, in this order (a Slurm job's nodes)."""
    by_addr = {n.address: n for n in cluster.nodes}
    missing = [a for a in addresses if a not in by_addr]
    if missing:
        raise EmulationError(f"{', '.join(missing)} is not a node of emulated cluster {cluster.name!r} "
                             f"({', '.join(by_addr)})")
    return dataclasses.replace(cluster, nodes=tuple(by_addr[a] for a in addresses))


def from_state(name: str) -> Cluster | None:
    """The cluster the state file describes, when it is up."""
    state = read_state(name)
    if not state:
        return None
    c = state["cluster"]
    nodes = tuple(Node(n["index"], n["namespace"], n["address"], n["veth"], tuple(n["cpus"])) for n in c["nodes"])
    return Cluster(c["name"], c["bridge"], c["host_address"], c["prefix_len"], nodes)

