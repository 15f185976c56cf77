"""The emulated cluster through the local Slurm (root): slurm-local.sh restarted with
SLURM_LOCAL_EMULATE=1 runs each slurmd inside its own network namespace (n1 at 198.18.2.1, n2 at
198.18.2.2, slurmctld on the bridge), so a 2-node job's ranks talk over the bridge; each point gives
its nodes its link (tbf) for its length. Runs after test_slurm.py (file order) and restarts the
plain cluster afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_slurm import snakemake

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "slurm" / "slurm-local.sh"
from launch import netemu


def _script(*args: str, emulate: bool = False) -> subprocess.CompletedProcess:
    env = {**__import__("os").environ, "SLURM_LOCAL_EMULATE": "1" if emulate else "0"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def emulated_slurm(slurm_cluster):
    why = netemu.why_not()
    if why:
        pytest.skip(why)
    _script("stop")
    res = _script("start", emulate=True)
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        yield
    finally:
        _script("stop")
        _script("start")  # the plain cluster again, for whatever runs next (and the session's stop)


def test_slurm_points_cross_the_emulated_link(emulated_slurm, workdir):
    hosts = subprocess.run(["getent", "hosts", "n1", "n2"], capture_output=True, text=True).stdout.split()
    assert hosts[0] == "198.18.2.1" and "198.18.2.2" in hosts, hosts
    rc, log, wall = snakemake(workdir, [], ["tests/slurm/study.yaml", "tests/slurm/study-emulated.yaml"])
    print(f"\n[slurm] emulated study took {wall:.0f} s", file=sys.stderr)
    assert rc == 0, log[-5000:]
    res = workdir / "results" / "slurmemu"
    recs = [json.loads(p.read_text()) for p in (res / "points").glob("*.json")]
    assert len(recs) == 5 and all(r["status"] == "ok" for r in recs), [r.get("reason") for r in recs]
    for r in recs:
        assert r["provenance"]["slurm"]["slurm_job_id"]
        if r["point"]["placement"]["nodes"] > 1:
            net = r["network"]
            assert net["cluster"] == "slurm" and [n["address"] for n in net["nodes"]] == ["198.18.2.1", "198.18.2.2"]
            assert 0.8 < net["measured"]["tcp_rate_mbit"] / net["configured"]["rate_mbit"] < 1.01, net
            # one srun over the job's two nodes; per node, launch_node.py fills in is_host and the address
            cmd = r["provenance"]["launch_command"]
            assert cmd.startswith("srun ") and "launch_node.py" in cmd and "is_host={NODE_IS_HOST}" in cmd, cmd
    model = json.loads((res / "model.json").read_text())
    checks = {c["configured_rate_mbit"]: c for c in model["link_check"]}
    assert set(checks) == {100.0, 200.0} and all(c["pass"] for c in checks.values()), checks
    guide = json.loads((res / "guidelines.json").read_text())["guidelines"]
    inter = [g for g in guide if g["id"].startswith("inter-node-")]
    assert len(inter) == 2 and all("emulated inter-node (one host, " in g["text"] for g in inter), inter
    html = (workdir / "reports" / "slurmemu" / "report.html").read_text()
    assert "Model vs known link: 2 of 2 emulated link(s) recovered" in html
    # the links are off again between points: the namespaces stay (they are the nodes), unshaped
    qdiscs = subprocess.run(["tc", "-n", "kse-slurm-n0", "qdisc", "show", "dev", "eth0"], capture_output=True,
                            text=True).stdout
    assert "tbf" not in qdiscs, qdiscs
