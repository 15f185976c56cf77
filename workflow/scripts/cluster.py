"""The emulated cluster from the command line (workflow/scripts/launch/netemu.py; root only).

    python workflow/scripts/cluster.py down-all                  # make cluster-down: whatever any run left
    python workflow/scripts/cluster.py up NAME NODES [--rate-mbit R] [--burst-kb B] [--owner PID]
    python workflow/scripts/cluster.py down NAME
    python workflow/scripts/cluster.py owner NAME PID            # hand it to another process
    python workflow/scripts/cluster.py show NAME                 # its state file, as JSON

`up` prints one line per node: index, namespace, address, CPU list (tests/slurm/slurm-local.sh
reads them to start one slurmd per node).
"""

import argparse
import json
import sys

from launch import netemu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("down-all")
    up = sub.add_parser("up")
    up.add_argument("name", choices=sorted(netemu.SUBNETS))
    up.add_argument("nodes", type=int)
    up.add_argument("--rate-mbit", type=float, default=0.0, help="0 = no rate limit")
    up.add_argument("--burst-kb", type=float, default=netemu.Link.burst_kb,
                    help="tbf burst in KiB (default: a point's, %(default)g)")
    up.add_argument("--owner", type=int, default=None, help="the pid whose death makes it stale (default: none)")
    for name in ("down", "show"):
        sub.add_parser(name).add_argument("name", choices=sorted(netemu.SUBNETS))
    own = sub.add_parser("owner")
    own.add_argument("name", choices=sorted(netemu.SUBNETS))
    own.add_argument("pid", type=int)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "down-all":
            removed = netemu.down_all() if netemu.why_not() is None else []
            print("cluster-down: " + ("; ".join(removed) if removed else "nothing to remove"))
        elif a.cmd == "up":
            cluster = netemu.plan(a.name, a.nodes)
            with netemu.locked(a.name):
                # no owner given: the parent shell's pid would die at once; use init's (never stale by pid)
                netemu.up(cluster, a.owner or 1)
                netemu.set_link(cluster, netemu.Link(a.rate_mbit, a.burst_kb) if a.rate_mbit else None)
            for n in cluster.nodes:
                print(n.index, n.namespace, n.address, ",".join(map(str, n.cpus)))
        elif a.cmd == "down":
            print("; ".join(netemu.down(a.name)) or "nothing to remove")
        elif a.cmd == "owner":
            netemu.set_owner(a.name, a.pid)
        elif a.cmd == "show":
            print(json.dumps(netemu.read_state(a.name), indent=1))
    except netemu.EmulationError as e:
        print(f"cluster: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
