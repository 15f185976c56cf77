"""The launcher's command construction and failure classification (no processes started)."""

import copy

import launch_point
import plan

CFG = {"study": "t", "experiments": {"comm": {"topologies": [{"nodes": 1, "gpus_per_node": 2},
                                                             {"nodes": 2, "gpus_per_node": 1}]}}}


def pts():
    return list(plan.build_points(plan.validate_config(copy.deepcopy(CFG))).values())


def test_single_node_is_standalone():
    p = pts()[0]
    (cmd,) = launch_point.local_commands(p, "out.json")
    assert "--standalone" in cmd and "--nproc-per-node=2" in cmd
    i = cmd.index("--out")
    assert cmd[i + 1] == "out.json"


def test_multi_node_one_agent_per_node_with_short_timeouts():
    p = pts()[1]
    cmds = launch_point.local_commands(p, "o.json", port=29999)
    assert len(cmds) == 2
    for c in cmds:
        assert "--nnodes=2" in c and "--nproc-per-node=1" in c and "--rdzv-backend=c10d" in c
        assert "--rdzv-endpoint=127.0.0.1:29999" in c
        assert f"--rdzv-conf=join_timeout={p['rdzv_join_s']},read_timeout={p['rdzv_read_s']}" in c
        assert "--max-restarts=0" in c
    assert len({c[c.index("-m", 3) + 1] for c in cmds}) == 1


def test_train_argv_round_trips_through_kan_train_parser():
    from kan.train import parse_args

    p = pts()[1]
    args = parse_args(launch_point.train_argv(p, "x.json")[2:])
    assert args.widths == p["widths"] and args.grid_size == p["grid_size"]
    assert args.grid_range == tuple(p["grid_range"]) and args.batch_per_rank == p["batch_per_rank"]
    assert args.point["id"] == p["id"] and args.pg_timeout_s == p["pg_timeout_s"]


def test_classify_failure():
    assert launch_point.classify_failure(["x"], timed_out=True)[0] == "timeout"
    st, why = launch_point.classify_failure(
        ["foo", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: join timeout"], False)
    assert st == "failed" and "RendezvousTimeoutError" in why
    assert launch_point.classify_failure(["torch.OutOfMemoryError: CUDA out of memory."], False)[0] == "oom"
    assert launch_point.classify_failure(["exitcode  : -9 (pid: 12)"], False)[0] == "oom"
