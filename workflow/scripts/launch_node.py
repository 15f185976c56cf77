"""One node's torchrun agent of a point on the emulated cluster under Slurm: srun starts this once
per node (inside the node's network namespace, where its slurmd runs); it fills in what differs per
node and execs the agent.

    python launch_node.py <torchrun argv with {NODE_IS_HOST} and {NODE_ADDR}>

{NODE_IS_HOST} -> 1 on the job's first node (SLURM_NODEID 0), which hosts the rendezvous store, else
0: torchrun would compare the endpoint with the machine's hostname, which every namespace shares, and
no node would host it. {NODE_ADDR} -> this node's address (its name, SLURMD_NODENAME, resolved), so
the workers' store address is one the other namespaces can reach. stdlib only.
"""

import os
import socket
import sys


def main(argv: list[str]) -> None:
    node_id = os.environ["SLURM_NODEID"]
    addr = socket.gethostbyname(os.environ["SLURMD_NODENAME"])
    args = [a.replace("{NODE_IS_HOST}", "1" if node_id == "0" else "0").replace("{NODE_ADDR}", addr) for a in argv]
    os.execvp(args[0], args)


if __name__ == "__main__":
    main(sys.argv[1:])
