"""One record writer, one validating reader: half-written, empty, hand-written or foreign records
are never taken for a result."""

import json

import pytest

from kan.contract import record as records
from test_points import _ok_record


def test_round_trip_and_atomic(tmp_path):
    path = tmp_path / "p.json"
    records.write(path, _ok_record("p"))
    assert records.read(path, "p")["status"] == "ok"
    assert not list(tmp_path.glob(".p.json.*"))  # no temp file left behind


@pytest.mark.parametrize("content, reason", [
    ("", "empty file"),
    ('{"record_version": 2, "status": "ok"', "not valid JSON"),
    ('{"status": "ok"}', "record_version"),
    ('[1]', "not a JSON object"),
])
def test_invalid_files(tmp_path, content, reason):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(records.InvalidRecord, match=reason):
        records.read(path, "p")


def test_checks(tmp_path):
    path = tmp_path / "p.json"
    with pytest.raises(records.InvalidRecord, match="no record"):
        records.read(path)
    rec = _ok_record("p")
    for mutate, reason in [
        (lambda r: r.update(status="great"), "status 'great' is not one of"),
        (lambda r: r["point"].update(id="q"), "of point 'q', not 'p'"),
        (lambda r: r["timing"].pop("step_time_s"), "without timing.step_time_s"),
        (lambda r: r["throughput"].update(samples_per_s=-1.0), "bad throughput.samples_per_s"),
        (lambda r: r["model"].update(num_params=True), "bad model.num_params"),
        (lambda r: r.update(record_version=1), "record_version 1"),
    ]:
        bad = json.loads(json.dumps(rec))
        mutate(bad)
        path.write_text(json.dumps(bad))
        with pytest.raises(records.InvalidRecord, match=reason):
            records.read(path, "p")


def test_failure_record(tmp_path):
    rec = records.failure({"id": "p"}, "killed", "a rank was killed by signal 9 (SIGKILL)")
    path = tmp_path / "p.json"
    records.write(path, rec)
    assert records.read(path, "p")["status"] == "killed"
    with pytest.raises(ValueError):
        records.failure({"id": "p"}, "ok", "")
    bad = {**rec, "reason": ""}
    path.write_text(json.dumps(bad))
    with pytest.raises(records.InvalidRecord, match="without a reason"):
        records.read(path, "p")


def test_nan_is_written_as_null_and_checked(tmp_path):
    rec = _ok_record("p")
    rec["loss"]["final_train"] = float("nan")  # a diverged run is data
    records.write(tmp_path / "p.json", rec)
    assert records.read(tmp_path / "p.json", "p")["loss"]["final_train"] is None
    rec["timing"]["step_time_s"] = float("inf")  # but an ok record needs its step time
    records.write(tmp_path / "p.json", rec)
    with pytest.raises(records.InvalidRecord, match="bad timing.step_time_s: None"):
        records.read(tmp_path / "p.json", "p")


def test_state_names_each_kind_of_file(tmp_path):
    """One classification for the planner and the tables: missing, corrupt with why, else the status;
    the file's name is the point id it must hold."""
    path = tmp_path / "p.json"
    assert records.state(path) == ("missing", None)
    path.write_text('{"record_version": 2, "status": "ok"')  # a write cut short
    state, why = records.state(path)
    assert state == "corrupt" and "not valid JSON" in why
    records.write(path, _ok_record("p"))
    state, rec = records.state(path)
    assert state == "ok" and rec["point"]["id"] == "p"
    moved = tmp_path / "q.json"
    path.rename(moved)  # another point's record under this name is not this point's result
    state, why = records.state(moved)
    assert state == "corrupt" and "of point 'p', not 'q'" in why
    assert records.state(moved, "p")[0] == "ok"
    records.write(path, records.failure({"id": "p"}, "oom", "CUDA out of memory"))
    state, rec = records.state(path)
    assert state == "oom" and rec["reason"] == "CUDA out of memory"
