"""Records -> tidy rows: every planned point appears with its state, and a point whose record is gone
says what its last attempt was."""

import json

from kan.contract import record as records
from kan.contract.point import ModelConfig, Placement, Point, TrainConfig
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


def test_the_rate_each_point_trained_at_is_a_column(tmp_path):
    """lr and lr_effective: the record's optimizer section where it has one, else the rate of the
    point the trainer was given, else the plan's; none for a tuned point not yet given its rate."""
    scaled = Point(study="t", model=ModelConfig(widths=(2, 8, 1)),
                   train=TrainConfig(samples=1024, batch_per_rank=64, lr=0.01, lr_scaling="linear",
                                     lr_reference_batch=64),
                   placement=Placement(gpus_per_node=2))
    told, given = point(1), point(2)
    tuned = Point(study="t", model=ModelConfig(widths=(2, 8, 1)), train=TrainConfig(
        samples=1024, batch_per_rank=64, lr=None, lr_tuned_from=(0.001, 0.01)), placement=Placement(gpus_per_node=4))
    points_dir = tmp_path / "points"
    from test_points import _ok_record

    records.write(points_dir / f"{told.id}.json",
                  {**_ok_record(told.id), "optimizer": {"lr": 0.003, "lr_effective": 0.006}})
    records.write(points_dir / f"{given.id}.json", {**_ok_record(given.id), "point": given.to_json()})
    pts = (scaled, told, given, tuned)
    m = collect([p.to_json() for p in pts], {}, points_dir=points_dir)["measurements"].set_index("point_id")
    rates = {p: tuple(m.loc[p.id, ["lr", "lr_effective"]]) for p in pts}
    assert rates[scaled] == (0.01, 0.02)  # 64 per rank x 2 ranks against the reference 64: linear x 2
    assert rates[told] == (0.003, 0.006) and rates[given] == (0.001, 0.001)
    assert all(v != v for v in rates[tuned])  # empty (NaN)
