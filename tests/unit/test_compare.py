"""Comparing studies (report.compare): clear errors for missing or foreign folders, reading a results
folder back, and the key figures of two studies with their differences."""

import json

import pytest
from report_fixture import PROVENANCE, study_tables
from scaling.common.io import write_csv, write_json
from scaling.report.compare import compare_files, delta, hardware_rows, key_figures, model_keys, read_study


def write_study(folder, tables, provenance=PROVENANCE, study="b"):
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("points", "strong", "weak", "comm", "model_size", "allreduce_sizes"):
        write_csv(tables[name], folder / f"{name}.csv")
    write_csv(tables["loss_curves"], folder / "loss_curves.csv")
    write_csv(tables["points"].assign(study=study), folder / "measurements.csv")
    write_json(tables["model"], folder / "model.json")
    write_json(provenance, folder / "provenance.json")
    return folder


@pytest.fixture(scope="module")
def a():
    return {"name": "a", "folder": None, "tables": study_tables(), "provenance": PROVENANCE}


def test_missing_and_foreign_folders_name_the_key_and_path(tmp_path):
    with pytest.raises(ValueError, match=r"report.compare\[0\]: results/nowhere: no such folder"):
        compare_files(["results/nowhere"], workdir=tmp_path)
    (tmp_path / "results/half").mkdir(parents=True)
    (tmp_path / "results/half/strong.csv").write_text("model\n")
    with pytest.raises(ValueError, match=r"report.compare\[0\]: results/half: points.csv, weak.csv.* missing"):
        compare_files(["results/half"], workdir=tmp_path)
    with pytest.raises(ValueError, match="must be a list of results folders"):
        compare_files("results/a", workdir=tmp_path)
    assert compare_files([], workdir=tmp_path) == [] and compare_files(None) == []


def test_read_a_results_folder(tmp_path):
    folder = write_study(tmp_path / "results" / "b", study_tables(scale=0.8))
    files = compare_files(["results/b"], workdir=tmp_path)
    assert "results/b/strong.csv" in files and "results/b/model.json" in files
    assert all(not f.startswith("/") for f in files)  # relative, as the user wrote them
    s = read_study(folder, "report.compare[0]")
    assert s["name"] == "b" and s["provenance"]["slurm_job_ids"] == ["4242"]
    assert not s["tables"]["strong"].empty and s["tables"]["model"]["models"]
    (folder / "model.json").write_text("{truncated")
    with pytest.raises(ValueError, match=r"report.compare\[0\]: .*model.json: not readable JSON"):
        read_study(folder, "report.compare[0]")
    (folder / "model.json").write_text(json.dumps({}))
    (folder / "strong.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"strong.csv: columns model, world_size, nodes, gpus_per_node missing"):
        read_study(folder, "report.compare[0]")


def test_key_figures_and_differences(a):
    b = {"name": "b", "folder": "results/b", "tables": study_tables(scale=0.8), "provenance": PROVENANCE}
    rows = key_figures([a, b])
    tput = [r for r in rows if r["figure"] == "strong: samples/s"]
    assert [r["where"] for r in tput] == [f"kan-bspline [2,64,1] {t}" for t in ("1x1", "1x2", "1x4")]
    assert all(r["deltas"][0]["text"] == "-20.0%" for r in tput)
    assert tput[1]["deltas"][0]["apart"] and tput[1]["deltas"][0]["note"] == "intervals apart"
    eff = next(r for r in rows if r["figure"] == "strong: efficiency")
    assert "1x4 (largest common world size, p=4)" in eff["where"] and eff["deltas"][0]["text"] == "+0.0 pp"
    assert eff["deltas"][0]["note"] == "intervals overlap"
    mem = [r["where"] for r in rows if r["figure"] == "model size: peak memory"]
    assert mem == ["kan-bspline width 32", "kan-bspline width 128"]
    assert any(r["figure"].startswith("model: held-out error") for r in rows)
    assert any(r["figure"] == "comm: loss vs one node" for r in rows)
    hw = hardware_rows([a, b])
    assert hw[0][:2] == ["a", "this study"] and hw[1][1] == "results/b"


def test_models_match_by_widths_when_labels_differ(a):
    other = study_tables()
    for name in ("strong", "weak", "comm", "model_size"):
        other[name] = other[name].assign(model=other[name]["model"].str.replace("kan-bspline", "kan-rbf"))
    other["model"] = {"models": {k.replace("kan-bspline", "kan-rbf"): v for k, v in other["model"]["models"].items()}}
    b = {"name": "rbf", "folder": "results/rbf", "tables": other, "provenance": {}}
    keys = model_keys([a, b])
    assert keys[(0, "kan-bspline [2,64,1]")] == keys[(1, "kan-rbf [2,64,1]")] == "[2,64,1]"
    assert any(r["where"] == "[2,64,1] 1x2" for r in key_figures([a, b]))


def test_delta_rules():
    x = {"value": 100.0, "lo": 90.0, "hi": 110.0}
    assert delta(x, {"value": 80.0, "lo": 75.0, "hi": 85.0}, "samples/s") == {
        "text": "-20.0%", "apart": True, "note": "intervals apart"}
    assert delta({"value": 0.9, "lo": None, "hi": None}, {"value": 0.8, "lo": None, "hi": None}, "fraction")["text"] \
        == "-10.0 pp"
    assert delta({"value": None, "lo": None, "hi": None}, x, "%") is None
