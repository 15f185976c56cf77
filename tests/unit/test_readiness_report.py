"""ddp_readiness.json from the readiness points' records (scaling/tables/readiness_table.py) and what the
report makes of it: no verdict made up for a failed or missing check point, and a note on exactly
the guidelines about an implementation that failed a check."""

import json

from kan.contract import record as records
from kan.contract.point import ModelConfig, Placement, Point, TrainConfig
from scaling.report.render import config_echo, readiness_context, with_readiness_notes
from scaling.tables.readiness_table import failed_checks, verdicts


def _point(impl="kanscale", **kw) -> Point:
    return Point(experiment="readiness", model=ModelConfig(impl=impl, widths=(2, 8, 1), **kw),
                 placement=Placement(nodes=1, gpus_per_node=2, device="cpu"),
                 train=TrainConfig(samples=512, batch_per_rank=32, epochs=1, max_steps=8, warmup_steps=0))


def _write(folder, point, status="ok", checks=None, reason=None):
    rec = {"record_version": records.RECORD_VERSION, "point": point.to_json(), "status": status,
           "reason": reason, "finished_utc": "2026-12-06T00:00:00+00:00", "world_size": 2, "ranks": [{}, {}]}
    if checks is not None:
        rec["readiness"] = {"steps": 8, "checks": checks}
    (folder / f"{point.id}.json").write_text(json.dumps(rec))


def test_verdicts_come_from_records_and_a_failed_or_missing_point_gives_none(tmp_path):
    ok = [{"check": c, "pass": c != "buffers_in_sync", "detail": "d", "fix": "f", "names": []}
          for c in ("unused_parameters", "buffers_in_sync", "replicas_identical", "device_placement")]
    a, b, c = _point(), _point(impl="mlp"), _point(impl="mlp_matched")
    _write(tmp_path, a, checks=ok)
    _write(tmp_path, b, status="failed", reason="RuntimeError: boom")
    found = verdicts([a.to_json(), b.to_json(), c.to_json(), {"experiment": "strong", "id": "x"}], tmp_path)
    # keyed by the checked model's display name, as every table names it
    kan, mlp, matched = "kan-bspline [2,8,1]", "mlp [2,8,1]", "mlp_matched [2,8,1]"
    assert list(found) == [kan, mlp, matched]
    assert [x["pass"] for x in found[kan]] == [True, False, True, True]
    assert "names" not in found[kan][0]  # the file keeps {check, pass, detail, fix}
    assert found[mlp] == [{"check": "ran", "pass": None, "detail": "the check point failed: RuntimeError: boom",
                           "fix": found[mlp][0]["fix"]}]
    assert found[matched][0]["pass"] is None and "no verdict yet" in found[matched][0]["detail"]
    # a failed check is the implementation's: it stands for every width of it
    assert failed_checks(found) == {"kan-bspline": ["buffers_in_sync"]}
    ctx = readiness_context(found)
    assert ctx[0]["failed"] == ["buffers_in_sync"] and ctx[1]["checks"][0]["verdict"] == "not checked"


def test_only_guidelines_about_a_failed_implementation_get_the_note():
    found = {"kan-bspline [2,8,1]": [{"check": "buffers_in_sync", "pass": False, "detail": "", "fix": ""}],
             "mlp [2,8,1]": [{"check": "buffers_in_sync", "pass": True, "detail": "", "fix": ""}]}
    gs = [{"id": "a", "text": "kan-bspline [2,8,1]: no world size ..."}, {"id": "b", "text": "mlp [2,8,1]: ..."},
          {"id": "c", "text": "Not enough data: ..."}, {"id": "d", "text": "kan-bspline [2,32,1]: ..."}]
    out = with_readiness_notes(gs, found)
    assert "buffers_in_sync" in out[0]["readiness_note"] and "not kept in step" in out[0]["readiness_note"]
    assert "readiness_note" not in out[1] and "readiness_note" not in out[2]
    assert out[3]["readiness_note"] == out[0]["readiness_note"]  # another width of the failed implementation
    assert with_readiness_notes(gs, None) == gs


def test_the_config_echo_leaves_out_the_check_at_its_default_without_a_factory():
    cfg = {"model": {"impl": ["kanscale"]}, "experiments": {"readiness": {"enabled": None, "steps": 8}}}
    assert "readiness" not in config_echo(cfg)["experiments"]
    cfg["model"]["impl"].append("examples/tiny_kan.py:build")
    assert "readiness" in config_echo(cfg)["experiments"]


def test_the_capture_check_is_carried_with_its_findings_and_no_drift_note(tmp_path):
    finding = {"op": "torch.tensor", "via": "", "kind": "python", "where": "the forward of layers.0 (Mine)",
               "path": "default", "count": 1}
    checks = [{"check": c, "pass": True, "detail": "d", "fix": "f", "names": []}
              for c in ("unused_parameters", "buffers_in_sync", "replicas_identical", "device_placement")]
    checks.append({"check": "cuda_graph_capture", "pass": False, "detail": "cannot be captured as a CUDA graph: "
                   "torch.tensor in the forward of layers.0 (Mine)", "fix": "f", "findings": [finding]})
    a = _point()
    _write(tmp_path, a, checks=checks)
    found = verdicts([a.to_json()], tmp_path)
    (capture,) = [c for c in found["kan-bspline [2,8,1]"] if c["check"] == "cuda_graph_capture"]
    assert capture["pass"] is False and capture["findings"] == [finding]
    # a model that cannot be captured trains correctly without CUDA graphs: no note on its numbers
    assert failed_checks(found) == {}
    gs = [{"id": "a", "text": "kan-bspline [2,8,1]: no world size ..."}]
    assert with_readiness_notes(gs, found) == gs
    # ready for DDP (the badge), with the capture check's failed row beside the DDP checks
    (ctx,) = readiness_context(found)
    assert ctx["failed"] == [] and ctx["checks"][-1]["verdict"] == "fail"
