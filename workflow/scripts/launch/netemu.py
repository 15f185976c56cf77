"""An emulated cluster on one host (root only): each "node" a network namespace with its own address
on a bridge and its own CPU set (launch/netns.py makes them, and says how they are kept apart and
cleaned up), and here the egress link of a rate the study sets (kernel `tbf`), so inter-node
traffic crosses a network whose truth is known; the probe that measures it, and one point's session.
Callers import this module only: it re-exports what they use of launch/netns.py.

    eth0 in namespace kse-<name>-n<i>   egress: tbf rate R burst B (+ netem delay where the kernel has it)

Each node's `eth0` is shaped on egress, so every byte from node a to node b passes a's rate limit:
a full-duplex link of rate R per node, as a NIC. `tbf` lets `burst` bytes through at line speed
after an idle period, so the all-reduce sweep's small sizes beat the rate; the link check fits the
bandwidth on sizes well above the burst. Measured here (BENCHMARKS.md): a TCP stream gets 95-96% of
the configured rate (TCP/IP headers), a 2-rank gloo all-reduce of 1 MiB 92%.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from kan.contract.point import Placement
from kan.contract.fields import default

from .netns import (IFNAME, PREFIX, STATE_DIR, SUBNETS, Cluster, EmulationError, Node, down, down_all,  # noqa: F401
                    from_state, in_ns, link_states, locked, node_cpus, nodes_at, owner_alive, plan, read_state,
                    run, set_owner, up, why_not, write_state)

# ---- the link -------------------------------------------------------------------------------------

# tbf's queue: packets wait at most this long before being dropped (TCP then slows to the rate)
TBF_LATENCY_MS = 50


@dataclass(frozen=True)
class Link:
    """What every node's egress gets: rate in Mbit/s, tbf burst in KiB, optional one-way delay. A
    point's link comes from its placement (launch/main.py); the burst's default, the placement's own
    (the schema's network.burst_kb), is for callers without a config: cluster.py up, the tests."""

    rate_mbit: float
    burst_kb: float = default(Placement, "link_burst_kb")
    latency_us: float = default(Placement, "link_latency_us")

    def describe(self) -> str:
        delay = f", +{self.latency_us:g} us delay" if self.latency_us else ""
        return f"{self.rate_mbit:g} Mbit/s link (tbf burst {self.burst_kb:g} KiB{delay})"


def qdisc_commands(node: Node, link: Link | None) -> list[list[str]]:
    """tc commands (run inside the node's namespace) that give its eth0 `link`, or none."""
    dev = ["dev", IFNAME]
    out = [["tc", "qdisc", "del", *dev, "root"]]
    if link is None:
        return out
    tbf = ["tbf", "rate", f"{link.rate_mbit:g}mbit", "burst", f"{link.burst_kb:g}kb", "latency", f"{TBF_LATENCY_MS}ms"]
    if link.latency_us:
        # netem delays every packet, tbf under it limits the rate
        out += [["tc", "qdisc", "add", *dev, "root", "handle", "1:", "netem", "delay", f"{link.latency_us:g}us"],
                ["tc", "qdisc", "add", *dev, "parent", "1:", "handle", "2:", *tbf]]
    else:
        out.append(["tc", "qdisc", "add", *dev, "root", *tbf])
    return out


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (delay); some do not ("Specified qdisc kind is unknown")."""
    probe = f"{PREFIX}probe-{os.getpid()}"
    try:
        run(["ip", "netns", "add", probe])
        run(["ip", "-n", probe, "link", "set", "lo", "up"])
        return run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                   check=False).returncode == 0
    except EmulationError:
        return False
    finally:
        run(["ip", "netns", "del", probe], check=False)


def set_link(cluster: Cluster, link: Link | None) -> None:
    """Give every node's egress `link` (None: unshaped veth)."""
    if link is not None and link.latency_us and not netem_available():
        raise EmulationError("network.latency_us needs the netem qdisc, which this kernel does not have "
                             "(`tc qdisc add ... netem` says 'Specified qdisc kind is unknown'); leave "
                             "latency_us out (bandwidth alone is emulated with tbf)")
    for n in cluster.nodes:
        for i, cmd in enumerate(qdisc_commands(n, link)):
            # tc -n: setns only (no mount namespace, unlike `ip netns exec`), so it works from inside
            # another node's namespace too (a Slurm job's launcher); the first command deletes: may be none
            run([cmd[0], "-n", n.namespace, *cmd[1:]], check=i > 0)
    state = read_state(cluster.name) or {}
    write_state(cluster.name, {**state, "link": None if link is None else asdict(link)})


# ---- the link as measured --------------------------------------------------------------------------

# stdlib only, started with -I -S: ~20 ms per side. Bounded: every socket has a timeout, every loop a count.
_PROBE = r"""
import socket, statistics, sys, time
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1); s.settimeout(10)
    c, _ = s.accept(); c.settimeout(10); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rounds, n = (int(x) for x in c.recv(32).decode().split())
    for _ in range(rounds):
        c.sendall(c.recv(1))
    got = 0
    while got < n:
        b = c.recv(1 << 20)
        if not b:
            break
        got += len(b)
    c.sendall(b"k")
else:
    n, rounds = int(sys.argv[4]), int(sys.argv[5])
    for _ in range(500):
        try:
            c = socket.create_connection((addr, port), timeout=10)
            break
        except OSError:
            time.sleep(0.01)
    else:
        raise SystemExit("probe: no server at %s:%d" % (addr, port))
    c.settimeout(30); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(("%d %d" % (rounds, n)).ljust(32).encode())
    rtt = []
    for _ in range(rounds):
        t = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtt.append(time.perf_counter() - t)
    buf, left = b"\0" * (1 << 20), n
    t = time.perf_counter()
    while left > 0:
        k = min(left, len(buf)); c.sendall(buf[:k]); left -= k
    c.recv(1)
    dt = time.perf_counter() - t
    print("%.3f %.3f" % (statistics.median(rtt) * 1e6, n * 8 / dt / 1e6))
"""
PROBE_PORT = 29399


def probe(cluster: Cluster, link: Link | None, src: int = 0, dst: int = 1, rounds: int = 50) -> dict:
    """The link between nodes src and dst as a TCP connection sees it: median round-trip time of a
    1-byte ping-pong on the idle link, and the rate of one bulk transfer (src -> dst) of at least 40
    bursts or a quarter second at the configured rate."""
    a, b = cluster.nodes[src], cluster.nodes[dst]
    rate = link.rate_mbit if link else 1000.0
    nbytes = int(max(40 * (link.burst_kb if link else 64) * 1024, rate * 1e6 / 8 / 4))
    py = [sys.executable, "-I", "-S", "-c", _PROBE]
    server = subprocess.Popen(in_ns(b.namespace, [*py, "server", b.address, str(PROBE_PORT)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        res = subprocess.run(in_ns(a.namespace, [*py, "client", b.address, str(PROBE_PORT), str(nbytes),
                                                  str(rounds)]), capture_output=True, text=True, timeout=60)
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"the link probe between {a.namespace} and {b.namespace} did not finish") from None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if res.returncode != 0:
        raise EmulationError(f"the link probe between {a.namespace} and {b.namespace} failed: "
                             f"{(res.stderr or res.stdout).strip()[-300:]}")
    rtt_us, rate_mbit = (float(x) for x in res.stdout.split())
    return {"rtt_us": rtt_us, "tcp_rate_mbit": rate_mbit, "probe_bytes": nbytes, "between": [a.address, b.address]}


# ---- one point's cluster --------------------------------------------------------------------------

@contextlib.contextmanager
def session(name: str, num_nodes: int, link: Link | None, owner_pid: int | None = None):
    """The local launcher's cluster for one point: locked, made fresh, given its link, probed, and
    removed again however the block ends. Yields (cluster, facts for the record)."""
    with locked(name):
        cluster = plan(name, num_nodes)
        t0 = time.monotonic()
        up(cluster, owner_pid or os.getpid())
        try:
            set_link(cluster, link)
            setup_s = time.monotonic() - t0
            measured = probe(cluster, link) if num_nodes > 1 else {}
            yield cluster, facts(cluster, link, measured, setup_s)
        finally:
            try:
                down(name)
            except EmulationError as e:  # the point's record stands; the next `up` or cluster-down retries
                print(f"[netemu] {e}; `make cluster-down` removes it", file=sys.stderr, flush=True)


def facts(cluster: Cluster, link: Link | None, measured: dict, setup_s: float | None = None) -> dict:
    """What a record keeps of the emulated network a point ran on."""
    return {"emulated": True, "cluster": cluster.name, "interface": IFNAME,
            "configured": None if link is None else asdict(link),
            "measured": measured, "setup_s": setup_s,
            "nodes": [{"index": n.index, "namespace": n.namespace, "address": n.address, "cpus": list(n.cpus)}
                      for n in cluster.nodes]}
