"""Records -> tidy rows: every planned point appears with its state, and a point whose record is gone
says what its last attempt was."""

import json

from kan import record as records
from kan.config import ModelConfig, Placement, Point, TrainConfig
from scaling.tables.tidy import collect


def point(gpus=1, nodes=1) -> Point:
    return Point(study="t", model=ModelConfig(widths=(2, 8, 1)), train=TrainConfig(samples=1024, batch_per_rank=64),
                 placement=Placement(nodes=nodes, gpus_per_node=gpus))


def test_states_and_the_last_attempt_of_a_missing_point(tmp_path):
    points_dir = tmp_path / "results" / "t" / "points"
    ok, gone, bad, running = point(1), point(2), point(1, 2), point(4)
    from test_points import _ok_record

    records.write(points_dir / f"{ok.id}.json", {**_ok_record(ok.id), "num_hosts": 1})
    (points_dir / f"{bad.id}.json").write_text("{")
    outcome = tmp_path / "results" / "t" / "attempts" / gone.id / "20261201T000000-abc" / "outcome.json"
    outcome.parent.mkdir(parents=True)
    outcome.write_text(json.dumps({"status": "cancelled", "reason": "the launcher received signal 15 (SIGTERM)"}))
    paths = {p.id: str(points_dir / f"{p.id}.json") for p in (ok, bad)}
    m = collect([p.to_json() for p in (ok, gone, bad, running)], paths, {running.id: "Slurm job 7 (running)"},
                points_dir=points_dir)["measurements"].set_index("point_id")
    assert m.loc[ok.id, "status"] == "ok"
    assert m.loc[gone.id, "status"] == "missing" and "last attempt cancelled" in m.loc[gone.id, "reason"]
    assert m.loc[bad.id, "status"] == "corrupt" and "not valid JSON" in m.loc[bad.id, "reason"]
    assert m.loc[running.id, "status"] == "running" and "Slurm job 7" in m.loc[running.id, "reason"]
    assert m.loc[bad.id, "placement_class"] == "simulated inter-node (one host)"  # local run, no host count
