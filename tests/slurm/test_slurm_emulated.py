"""The emulated cluster through the local Slurm (root): slurm-local.sh started with
SLURM_LOCAL_EMULATE=1 runs each slurmd inside its own network namespace (n1 at 198.18.2.1, n2 at
198.18.2.2, slurmctld on the bridge), so a 2-node job's ranks talk over the bridge; each point gives
its nodes its link (tbf) for its length. The cluster restarts in this mode once, for this module
(tests/slurm/conftest.py, marker `emulated_slurm`), after test_slurm.py (file order). What the
analysis makes of emulated links (link check, cross-link prediction, guidelines, report) is shown
once, by the local study of tests/e2e/test_emulated.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_slurm import snakemake

pytestmark = [pytest.mark.slurm, pytest.mark.emulated_slurm]


def test_slurm_points_cross_the_emulated_link(workdir):
    hosts = subprocess.run(["getent", "hosts", "n1", "n2"], capture_output=True, text=True).stdout.split()
    assert hosts[0] == "198.18.2.1" and "198.18.2.2" in hosts, hosts
    rc, log, wall = snakemake(workdir, "slurmemu")
    print(f"\n[slurm] emulated study took {wall:.0f} s", file=sys.stderr)
    assert rc == 0, log[-5000:]
    res = workdir / "results" / "slurmemu"
    recs = [json.loads(p.read_text()) for p in (res / "points").glob("*.json")]
    # one 2-node point per link rate
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [r.get("reason") for r in recs]
    assert sorted(r["network"]["configured"]["rate_mbit"] for r in recs) == [100.0, 200.0]
    for r in recs:
        assert r["provenance"]["slurm"]["slurm_job_id"]
        assert r["point"]["placement"]["nodes"] == 2
        net = r["network"]
        assert net["cluster"] == "slurm" and [n["address"] for n in net["nodes"]] == ["198.18.2.1", "198.18.2.2"]
        assert 0.8 < net["measured"]["tcp_rate_mbit"] / net["configured"]["rate_mbit"] < 1.01, net
        # one srun over the job's two nodes; per node, launch_node.py fills in is_host and the address
        cmd = r["provenance"]["launch_command"]
        assert cmd.startswith("srun ") and "launch_node.py" in cmd and "is_host={NODE_IS_HOST}" in cmd, cmd
    assert (workdir / "reports" / "slurmemu" / "report.html").exists()
    # the links are off again between points: the namespaces stay (they are the nodes), unshaped
    qdiscs = subprocess.run(["tc", "-n", "kse-slurm-n0", "qdisc", "show", "dev", "eth0"], capture_output=True,
                            text=True).stdout
    assert "tbf" not in qdiscs, qdiscs
