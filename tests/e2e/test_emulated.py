"""The emulated cluster for real (root, Linux): network namespaces, a bridge, tbf on every node's
egress (workflow/scripts/launch/netemu.py), and a small study through Snakemake whose 2-node points
cross links of 100 and 200 Mbit/s.

- The cluster stays inside: no default route in a node, only its own /24, nothing new in the root
  namespace but the bridge's connected /24; kill -9 of its owner leaves it behind, and the next
  `up` or `make cluster-down` removes every namespace, interface, process and state file.
- The study: every inter-node point is labelled with its link, the all-reduce sweep recovers both
  rates (model.json link_check, the report's "model vs known link"), the inter-node guideline is
  stated for the emulated link, and a cross-link prediction is made.
- The link-down fault: an operator takes node 1's link down during a point; the record says the
  link is down (or the timeout) within the process-group timeout, and a re-run completes the point.
Traffic goes only to 198.18.3.0/24 (the tests' cluster) and 198.18.1.0/24 (the launcher's), in
bounded loops."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml
from workflow_runs import ROOT, command, copy_workflow, snakemake

import plan
from launch import netemu

pytestmark = pytest.mark.e2e
WHY = netemu.why_not()


@pytest.fixture(autouse=True)
def _emulation_possible():
    if WHY:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the emulated cluster cannot run: {WHY}", pytrace=False)
        pytest.skip(WHY)


def leftovers() -> list[str]:
    """Everything of any emulated cluster that exists on this host now."""
    out = [f"netns {line.split()[0]}" for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                  text=True).stdout.splitlines()
           if line.startswith(netemu.PREFIX)]
    for line in subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.splitlines():
        dev = line.split(":", 2)[1].strip().split("@")[0]
        if dev.startswith(netemu.PREFIX):
            out.append(f"link {dev}")
    routes = subprocess.run(["ip", "-4", "route", "show", "root", "198.18.0.0/15"], capture_output=True,
                            text=True).stdout.strip()
    if routes:
        out.append(f"routes {routes}")
    out += [f"state {p.name}" for p in netemu.STATE_DIR.glob("*.json")] if netemu.STATE_DIR.exists() else []
    return out


def cluster_down() -> str:
    r = subprocess.run([sys.executable, str(ROOT / "workflow/scripts/cluster.py"), "down-all"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_cluster_stays_inside_and_kill_9_leaves_nothing_cluster_down_cannot_remove():
    cluster_down()
    # an owner that makes a cluster, starts a process in node 1, then is killed -9
    code = ("import time, subprocess; from launch import netemu; "
            "c = netemu.plan('test', 2); netemu.up(c, __import__('os').getpid()); "
            "netemu.set_link(c, netemu.Link(100.0)); "
            "subprocess.Popen(['ip', 'netns', 'exec', c.nodes[1].namespace, 'sleep', '300']); "
            "print('up', flush=True); time.sleep(300)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "up"
        # inside a node: its own /24 and nothing else, no default route
        routes = subprocess.run(["ip", "-n", "kse-test-n0", "-4", "route"], capture_output=True, text=True).stdout
        assert routes.strip().splitlines() == [line for line in routes.strip().splitlines()
                                               if line.startswith("198.18.3.0/24 dev eth0")], routes
        assert "default" not in routes
        # the root namespace: one connected route to the cluster's /24, on the bridge
        host = subprocess.run(["ip", "-4", "route", "show", "root", "198.18.0.0/15"], capture_output=True,
                              text=True).stdout.strip().splitlines()
        assert len(host) == 1 and host[0].startswith("198.18.3.0/24 dev kse-test "), host
        # the link is shaped: node 0 -> node 1 gets about the configured rate
        c = netemu.from_state("test")
        measured = netemu.probe(c, netemu.Link(100.0))
        assert 80 < measured["tcp_rate_mbit"] < 101, measured
        assert netemu.owner_alive(netemu.read_state("test"))
        # another process's `up` of the same name refuses, and leaves the live owner's cluster alone
        with pytest.raises(netemu.EmulationError, match=r"'test' is in use \(its owner, pid \d+, is alive"):
            netemu.up(netemu.plan("test", 2), os.getpid())
        assert netemu.probe(c, netemu.Link(100.0))["tcp_rate_mbit"] > 80
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    state = netemu.read_state("test")
    assert state is not None and not netemu.owner_alive(state)
    assert any("kse-test-n1" in x for x in leftovers())  # what a killed owner leaves
    out = cluster_down()
    assert "namespace kse-test-n1" in out and re.search(r"processes \d+ in kse-test-n1", out), out
    assert leftovers() == []
    assert "nothing to remove" in cluster_down()  # idempotent


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("emulated"), config=ROOT / "tests/configs/emulated-small.yaml")
    return work, snakemake(work).out


def test_emulated_study_labels_checks_and_advises_for_the_link(study):
    work, _ = study
    res = work / "results" / "emu"
    recs = [json.loads(p.read_text()) for p in (res / "points").glob("*.json")]
    assert len(recs) == 5 and all(r["status"] == "ok" for r in recs), [r.get("reason") for r in recs]
    for r in recs:
        if r["point"]["placement"]["nodes"] > 1:
            net = r["network"]
            assert net["emulated"] and net["configured"]["rate_mbit"] == r["point"]["placement"]["link_mbit"]
            assert [n["address"] for n in net["nodes"]] == ["198.18.1.1", "198.18.1.2"]
            assert 0.8 < net["measured"]["tcp_rate_mbit"] / net["configured"]["rate_mbit"] < 1.01
            assert sorted({h["hostname"] for h in r["ranks"]}) and r["num_hosts"] == 1
    model = json.loads((res / "model.json").read_text())
    checks = {c["configured_rate_mbit"]: c for c in model["link_check"]}
    assert set(checks) == {100.0, 200.0}
    for rate, c in checks.items():
        assert c["pass"] and abs(c["recovered_rate_mbit"] / rate - 1) <= 0.15, c
        assert c["rtt_us"] > 0 and c["alpha_us"] is not None
    assert {(e["held_out"], e["fitted_at"]) for e in model["cross_link"]} == {
        ("emulated inter-node (one host, 100 Mbit/s link)", "emulated inter-node (one host, 200 Mbit/s link)"),
        ("emulated inter-node (one host, 200 Mbit/s link)", "emulated inter-node (one host, 100 Mbit/s link)")}
    guide = json.loads((res / "guidelines.json").read_text())["guidelines"]
    inter = [g for g in guide if g["id"].startswith("inter-node-")]
    assert len(inter) == 2 and {g["status"] for g in inter} <= {"advice", "inconclusive"}, inter
    assert all("emulated inter-node (one host, " in g["text"] for g in inter)
    html = (work / "reports" / "emu" / "report.html").read_text()
    assert "Model vs known link: 2 of 2 emulated links recovered" in html
    assert "emulated inter-node (one host, 100 Mbit/s link)" in html
    assert "emulated inter-node (one host, 200 Mbit/s link)" in html
    assert leftovers() == []  # every point's cluster was removed after it


def test_link_down_is_recorded_with_its_cause_and_a_rerun_completes(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("linkdown"))
    cfg = yaml.safe_load((ROOT / "tests/configs/emulated-small.yaml").read_text())
    cfg.update(study="down", network={"emulate": True, "rates_mbit": [100]})
    # ~0.3 s a step at 100 Mbit/s; rank 0 prints a progress line every second
    # (KANSCALE_PROGRESS_EVERY_S), the first one cuts the link
    cfg["training"].update(epochs=2, max_steps=30)
    cfg["experiments"] = {"comm": {**cfg["experiments"]["comm"], "topologies": [{"nodes": 2, "gpus_per_node": 1}]},
                          "allreduce": {"enabled": False}}
    cfg["timeouts"]["pg_s"] = 10
    path = work / "down.yaml"
    path.write_text(yaml.safe_dump(cfg))
    (pid,) = plan.build_points(plan.load_config(path))
    target = f"results/down/points/{pid}.json"  # the record only: the analysis rules are tested elsewhere
    proc = subprocess.Popen(command(work, [path], targets=[target]), cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "KANSCALE_PROGRESS_EVERY_S": "1"})
    try:
        log_dir = work / "results" / "down" / "logs"
        end = time.monotonic() + 120
        # the trainer has started its steps when the point's log shows the first loss line
        while time.monotonic() < end:
            logs = list(log_dir.glob("comm-*.log")) if log_dir.exists() else []
            if logs and re.search(r"step\s+\d+", logs[0].read_text(errors="replace")):
                break
            time.sleep(0.5)
        else:
            proc.kill()
            pytest.fail(f"the point never started training: {proc.communicate()[0][-3000:]}")
        subprocess.run(["ip", "-n", "kse-local-n1", "link", "set", "eth0", "down"], check=True)
        # ends within the process-group timeout (10 s), fail-fast (10 s), a stop's grace and the teardown
        proc.communicate(timeout=10 + 10 + 5 + 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rec = json.loads((work / target).read_text())
    assert rec["status"] in ("failed", "timeout"), rec
    reason = rec["reason"]
    assert ("node 1 (198.18.1.2, kse-local-n1: eth0 down)" in reason or "imed out" in reason
            or "timeout" in reason.lower()), reason
    assert leftovers() == []
    # the link is back with the next point's fresh cluster: a re-run measures the point again, ok
    log = snakemake(work, [path], targets=[target]).out
    rec = json.loads((work / target).read_text())
    assert rec["status"] == "ok" and "measure" in log, rec.get("reason")
    assert leftovers() == []
