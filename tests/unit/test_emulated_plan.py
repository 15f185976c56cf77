"""The emulated cluster's pure parts: the link as a placement axis (ids, validation, the plan), the
placement class, the commands a node's agent gets, CPU sets and qdiscs, and the link check and
cross-link prediction on synthetic data with a known truth. No root, no namespaces."""

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import plan
from kan.contract.point import LaunchSettings, Placement, Point, PointError, TrainConfig
from launch import commands, netemu
from scaling.common.columns import SIMULATED, emulated_class, is_emulated, link_rate, placement_class
from scaling.model.fit import training_rows
from scaling.model.linkcheck import TOLERANCE_PCT, cross_link, link_check

ROOT = Path(__file__).resolve().parents[2]
TRAIN = TrainConfig(samples=1024, batch_per_rank=32, epochs=1, warmup_steps=1)


def test_link_fields_change_the_id_only_when_a_link_is_emulated():
    plain = Point(placement=Placement(nodes=2), train=TRAIN)
    # the id of a point without a link is what it was before the link fields existed
    assert "link" not in str(plain.measured()) and plain.id.endswith("n2g1-r0-" + plain.id.split("-")[-1])
    a = Point(placement=Placement(nodes=2, link_mbit=100.0), train=TRAIN)
    b = Point(placement=Placement(nodes=2, link_mbit=400.0), train=TRAIN)
    assert len({plain.id, a.id, b.id}) == 3 and "n2g1l100" in a.id and "n2g1l400" in b.id
    assert Point.from_json(a.to_json()) == a
    with pytest.raises(PointError, match="placement.link_mbit"):
        Placement(nodes=1, gpus_per_node=2, link_mbit=100.0)
    with pytest.raises(PointError, match="placement.link_mbit"):
        Placement(nodes=2, link_mbit=-1.0)


def test_rates_are_an_axis_of_multi_node_points_only():
    cfg = plan.load_config(ROOT / "config" / "emulated.yaml")
    points = plan.build_points(copy.deepcopy(cfg))
    rates = {p.placement.link_mbit for p in points.values() if p.placement.nodes > 1}
    assert rates == {100.0, 400.0}
    assert all(p.placement.link_mbit == 0 for p in points.values() if p.placement.nodes == 1)
    # emulation off: the same study over loopback, no link anywhere, half the multi-node points
    off = plan.load_config(ROOT / "config" / "emulated.yaml", {"network": {"emulate": False}})
    plain = plan.build_points(copy.deepcopy(off))
    multi = lambda pts: sum(p.placement.nodes > 1 for p in pts.values())  # noqa: E731
    assert multi(points) == 2 * multi(plain) and all(p.placement.link_mbit == 0 for p in plain.values())


def test_bad_network_config_names_the_key():
    with pytest.raises(plan.ConfigError, match=r"network\.rates_mbit"):
        plan.load_config(ROOT / "config" / "emulated.yaml", {"network": {"rates_mbit": [0]}})
    with pytest.raises(plan.ConfigError, match=r"network.*speed"):
        plan.load_config(ROOT / "config" / "emulated.yaml", {"network": {"speed": 3}})


def test_placement_class_of_an_emulated_point():
    cls = placement_class(2, 2, 1, link_mbit=100.0)
    assert cls == emulated_class(100) == "emulated inter-node (one host, 100 Mbit/s link)"
    assert is_emulated(cls) and link_rate(cls) == 100.0
    assert placement_class(2, 2, 1) == SIMULATED and not is_emulated(SIMULATED)
    assert placement_class(1, 2, 1, link_mbit=100.0) == "intra-node"  # one node: no link between nodes
    assert placement_class(2, 2, None, given=cls) == cls


def test_node_commands_run_in_their_namespace_and_cpu_set(tmp_path):
    cluster = netemu.plan("test", 2, cores=[0, 1])
    assert [n.cpus for n in cluster.nodes] == [(0,), (1,)]
    assert [n.address for n in cluster.nodes] == ["198.18.3.1", "198.18.3.2"]
    pt = Point(placement=Placement(nodes=2, link_mbit=100.0, device="cpu"), train=TRAIN)
    cmds = commands.emulated_commands(pt, LaunchSettings(), tmp_path / "out.json", tmp_path / "a1", cluster, port=29555)
    assert len(cmds) == 2
    for i, (argv, env) in enumerate(cmds):
        assert argv[:7] == ["ip", "netns", "exec", f"kse-test-n{i}", "taskset", "-c", str(i)]
        assert env == {"GLOO_SOCKET_IFNAME": "eth0"}
        assert "--rdzv-endpoint=198.18.3.1:29555" in argv and f"--local-addr=198.18.3.{i + 1}" in argv
        assert any(a.startswith("--rdzv-conf=") and a.endswith(f",is_host={int(i == 0)}") for a in argv)
    dropped = commands.emulated_commands(pt, LaunchSettings(), tmp_path / "o", tmp_path / "a", cluster,
                                         fault="drop-last-agent", port=1)
    assert len(dropped) == 1


def test_cpu_sets_and_qdiscs():
    assert netemu.node_cpus(2, [0, 1, 2, 3]) == [(0, 1), (2, 3)]
    assert netemu.node_cpus(3, [0, 1]) == [(0,), (1,), (0,)]  # fewer cores than nodes: shared
    node = netemu.plan("local", 2, cores=[0, 1]).nodes[1]
    q = netemu.qdisc_commands(node, netemu.Link(100.0, 32.0))
    assert q[-1] == ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "32kb",
                     "latency", "50ms"]
    delayed = netemu.qdisc_commands(node, netemu.Link(100.0, 32.0, 500.0))
    assert "netem" in delayed[1] and "500us" in delayed[1] and "tbf" in delayed[2]
    with pytest.raises(netemu.EmulationError, match="known: local, slurm, test"):
        netemu.plan("elsewhere", 2)


def _sweep(cls: str, rate_mbit: float, alpha: float, noise: float, rng) -> pd.DataFrame:
    rows = []
    for rep in range(3):
        for n in (65536, 1048576, 4194304):
            t = 2 * alpha + n * 8 / (rate_mbit * 1e6)
            rows.append({"placement_class": cls, "world_size": 2, "nodes": 2, "gpus_per_node": 1, "rep": rep,
                         "size_bytes": n, "time_s": t * (1 + noise * rng.standard_normal())})
    return pd.DataFrame(rows)


def test_link_check_recovers_a_known_rate_and_fails_a_wrong_one():
    rng = np.random.default_rng(1)
    a, b = emulated_class(100), emulated_class(400)
    sweep = pd.concat([_sweep(a, 100, 50e-6, 0.01, rng), _sweep(b, 300, 50e-6, 0.01, rng)])  # b: 25% short
    df = pd.DataFrame({"placement_class": [a, b], "link_tcp_mbit": [95.0, 380.0], "link_rtt_us": [70.0, 60.0]})
    checks = {c["configured_rate_mbit"]: c for c in link_check(df, sweep)}
    assert checks[100.0]["recovered_rate_mbit"] == pytest.approx(100, rel=0.02) and checks[100.0]["pass"]
    assert checks[100.0]["rtt_us"] == 70.0 and checks[100.0]["probe_tcp_rate_mbit"] == 95.0
    # alpha is 2% of the smallest size's time at 100 Mbit/s: only noise-free data pin it
    exact = link_check(df, _sweep(a, 100, 50e-6, 0.0, rng))[0]
    assert exact["alpha_us"] == pytest.approx(50, rel=0.01) and exact["error_pct"] == pytest.approx(0, abs=0.1)
    assert checks[400.0]["error_pct"] == pytest.approx(-25, abs=1.5) and checks[400.0]["pass"] is False
    assert abs(checks[400.0]["error_pct"]) > TOLERANCE_PCT
    # a link without a sweep is listed, not passed
    none = link_check(df, sweep.iloc[0:0])
    assert [c["pass"] for c in none] == [None, None] and "run experiments.allreduce" in none[0]["reason"]


def test_cross_link_prediction_is_exact_for_data_the_model_generates():
    rng = np.random.default_rng(2)
    rows, sweeps = [], []
    for rate in (100, 400):
        cls = emulated_class(rate)
        sweeps.append(_sweep(cls, rate, 30e-6, 0.0, rng))
        for hidden, params in ((16, 13_000), (256, 820_000)):
            n = 4 * params
            comp = 1e-3 + 2e-6 * 64 + 1e-11 * 64 * params
            ring = 2 * 30e-6 + n * 8 / (rate * 1e6)
            for rep in range(3):
                rows.append({"status": "ok", "ddp": True, "experiment": "model_size", "model": f"kan-bspline [64,{hidden},1]",
                             "nodes": 2, "gpus_per_node": 1, "world_size": 2, "batch_per_rank": 64,
                             "num_params": params, "grads_bytes": n, "placement_class": cls, "rep": rep,
                             "nosync_step_time_s": comp, "step_time_s": comp + 0.6 * ring,
                             "exposed_comm_s": 0.6 * ring, "device_type": "cpu", "num_hosts": 1,
                             "threads_per_rank": 1, "host_cpus": 2})
    train = training_rows(pd.DataFrame(rows))
    out = cross_link(train, pd.concat(sweeps))
    assert {(link_rate(e["held_out"]), link_rate(e["fitted_at"])) for e in out} == {(100, 400), (400, 100)}
    for e in out:
        assert e["exposure"] == pytest.approx(0.6, rel=0.02)
        assert len(e["points"]) == 2 and e["mape_pct"] < 2, e
    assert all(math.isfinite(p["error_pct"]) for e in out for p in e["points"])
