"""Real torch.distributed (gloo on CPU) runs of kan.train and of the point launcher."""

import copy
import json
import os
import subprocess
import sys

import torch

import pytest

import plan
from kan.contract import record as records
from launch.main import main as launch_main

SMALL = ["--widths=2,8,1", "--grid-size=5", "--samples=2048", "--epochs=2", "--batch-per-rank=64",
         "--max-steps=24", "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1", "--pg-timeout-s=60"]


def torchrun(nproc, args, cwd):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "--max-restarts=0", "-m", "kan.train", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_two_rank_gloo_record_and_identical_replicas(tmp_path, root):
    out = tmp_path / "rec.json"
    r = torchrun(2, [*SMALL, "--gpus-per-node=2", "--out", str(out), "--weights-out", str(tmp_path / "w")], root)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(out.read_text())
    assert rec["status"] == "ok" and rec["reason"] is None
    assert rec["world_size"] == 2 and rec["num_nodes"] == 1 and rec["backend"] == "gloo"
    assert rec["point"]["id"].startswith("strong-kanscale_bspline-2x8x1-n1g2-r0-")
    t = rec["timing"]
    assert t["num_steps"] == 24 and t["step_time_s"] > 0 and t["nosync_step_time_s"] > 0
    assert t["step_s"]["p10"] <= t["step_s"]["median"] <= t["step_s"]["p90"]
    # 22 timed steps after 2 warm-up, every 2nd a no_sync probe -> 11 each
    assert t["step_s"]["n"] == 11 and t["nosync_step_s"]["n"] == 11
    assert abs(rec["comm"]["exposed_s"] - (t["step_time_s"] - t["nosync_step_time_s"])) < 1e-12
    thr = rec["throughput"]
    assert abs(thr["samples_per_s"] - 128 / t["step_time_s"]) < 1e-6 * thr["samples_per_s"]
    assert abs(thr["samples_per_s_per_rank"] * 2 - thr["samples_per_s"]) < 1e-6 * thr["samples_per_s"]
    assert rec["memory"]["peak_bytes"] > 0 and rec["memory"]["kind"] == "cpu_peak_rss"
    assert rec["model"]["num_params"] == (2 * 8 + 8) * (5 + 3 + 2)
    assert len(rec["ranks"]) == 2 and rec["num_hosts"] == 1
    prov = rec["provenance"]
    assert prov["torch"] == torch.__version__ and "git_sha" in prov and prov["argv"][1:3] == ["-m", "kan.train"]
    # DDP replicas end with identical weights (checked from the weights themselves, not the record)
    w0 = torch.load(tmp_path / "w.rank0.pt")
    w1 = torch.load(tmp_path / "w.rank1.pt")
    assert w0.keys() == w1.keys()
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    assert rec["replicas_identical"] is True
    # and they trained: the weights moved away from the seeded initialisation
    torch.manual_seed(0)
    from kan import KAN

    init = KAN([2, 8, 1], grid_size=5).state_dict()
    assert any(not torch.equal(init[k], w0[k]) for k in w0 if k in init)


def test_ranks_must_match_the_point(tmp_path, root):
    """torchrun starting 2 ranks for a 1 x 1 point is a failed record, not a silent mis-measurement."""
    out = tmp_path / "rec.json"
    r = torchrun(2, [*SMALL, "--out", str(out), "--gpus-per-node=1"], root)
    assert r.returncode != 0
    rec = json.loads(out.read_text())
    assert rec["status"] == "failed" and "started 2 ranks but the point is 1 x 1" in rec["reason"]


def _point(topo, **over):
    cfg = {"study": "t", "device": "cpu", "training": {"epochs": 1, "max_steps": 12, "warmup_steps": 2},
           "model": {"widths": [2, 8, 1], "grid_size": 5},
           "experiments": {"comm": {"samples": 2048, "batch_per_rank": 64, "topologies": [topo]},
                           "allreduce": {"enabled": False}},
           "timeouts": {"rdzv_join_s": 5, "rdzv_read_s": 5, "pg_s": 30}, "resources": {"runtime_min": 3}}
    for k, v in over.items():
        cfg[k] = v
    cfg = plan.validate_config(copy.deepcopy(cfg))
    (p,) = plan.build_points(cfg).values()
    return p, plan.launch_settings(cfg)


def launch(p, launch_settings, out, *extra):
    d = p.to_json()
    return launch_main(["--point", json.dumps(d), "--launch", json.dumps(launch_settings.to_json()),
                        "--out", str(out), *extra])


@pytest.mark.parametrize("topo", [{"nodes": 1, "gpus_per_node": 2}, {"nodes": 2, "gpus_per_node": 1}])
def test_multi_rank_point_via_launcher(tmp_path, root, monkeypatch, topo):
    monkeypatch.chdir(root)
    p, ls = _point(topo)
    out = tmp_path / "points" / f"{p.id}.json"
    assert launch(p, ls, out, "--retry-token", "tok") == 0
    rec = records.read(out, p.id)
    assert rec["status"] == "ok", rec.get("reason")
    assert rec["world_size"] == 2 and rec["num_nodes"] == topo["nodes"]
    assert rec["launch"]["retry_token"] == "tok" and rec["replicas_identical"] is True
    if topo["nodes"] == 2:  # two torchrun agents, c10d rendezvous on 127.0.0.1
        assert rec["launcher"] == "torchrun" and "--rdzv-backend=c10d" in rec["provenance"]["launch_command"]
    else:  # ranks started directly with torchrun's environment (no agent)
        assert rec["launcher"] == "env" and "torch.distributed.run" not in rec["provenance"]["launch_command"]
    assert not (tmp_path / "attempts" / p.id / "claim.json").exists()  # released


def test_rendezvous_that_cannot_complete_is_recorded_as_failed(tmp_path, root, monkeypatch):
    monkeypatch.chdir(root)
    monkeypatch.setenv("KANSCALE_FAULT", "drop-last-agent")
    p, ls = _point({"nodes": 2, "gpus_per_node": 1})
    out = tmp_path / "points" / f"{p.id}.json"
    assert launch(p, ls, out) == 0
    rec = records.read(out, p.id)
    # failed by the join timeout, not the deadline (that would be a "timeout" record)
    assert rec["status"] == "failed"
    assert "Rendezvous" in rec["reason"], rec["reason"]


def test_two_ranks_of_a_step_time_point_stop_at_the_same_step(tmp_path, root, monkeypatch):
    """Each rank has its own step times; the largest interval decides for both, so both leave the loop
    at the same step (a rank that stopped alone would leave the other waiting in its next all-reduce
    until the process group's timeout) and the replicas stay identical."""
    monkeypatch.chdir(root)
    p, ls = _point({"nodes": 1, "gpus_per_node": 2},
                   training={"epochs": 40, "warmup_steps": 2, "step_tolerance_pct": 50})
    assert p.train.step_tolerance_pct == 50
    out = tmp_path / "points" / f"{p.id}.json"
    assert launch(p, ls, out) == 0
    rec = records.read(out, p.id)
    assert rec["status"] == "ok", rec.get("reason")
    assert rec["timing"]["stop"]["reason"] == "tolerance" and rec["replicas_identical"] is True
    assert rec["timing"]["num_steps"] < 40 * 16 and rec["timing"]["epoch_time_s"] is None
