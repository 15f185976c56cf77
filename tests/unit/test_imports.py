"""Runs measured elsewhere (plan/imports.py, import_records.py): both formats read into records the
analysis takes, every bad file one error naming the file, row and column, and a plan that does not
match its runs refused before anything is written."""

import copy
import shutil
from pathlib import Path

from plan.imports import imported_record
import plan
import pytest
from kan.contract import record
from plan import imports

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "workflow/report/reference/seed-paper-a100-runs"
SEED_CONFIG = ROOT / "config/seed-paper-import.yaml"


@pytest.fixture
def seed_config(monkeypatch):
    monkeypatch.chdir(ROOT)  # import.path is relative to where snakemake runs: the checkout
    return plan.load_config(SEED_CONFIG)


def test_seed_suite_gives_every_planned_point_one_run(seed_config):
    points = plan.build_points(seed_config)
    runs = imports.match(points, imports.read_runs(seed_config["import"]), "seed")
    assert len(points) == len(runs) == 21
    eight = next(r for pid, r in runs.items() if pid.startswith("strong-") and points[pid].placement.world_size == 8)
    assert (eight.name, eight.nodes, eight.gpus_per_node, len(eight.rows)) == ("strong_scaling_n4g8_ddp", 4, 2, 40)
    single = [r for pid, r in runs.items() if not points[pid].train.ddp]
    assert sorted(r.name for r in single) == ["strong_scaling_n1g1_single", "weak_scaling_n1g1_single"]


def test_imported_record_is_a_valid_record_with_what_it_lacks(seed_config):
    points = plan.build_points(seed_config)
    runs = imports.match(points, imports.read_runs(seed_config["import"]), "seed")
    pid = next(p for p in runs if runs[p].name == "strong_scaling_n1g1_single")
    rec = record.check(imported_record(points[pid], runs[pid], seed_config["import"]), pid)
    assert rec["source"]["kind"] == "imported" and "repeats (one run per point)" in rec["source"]["lacks"]
    # the median of epochs 1..39's mean steps, by hand from the file: 113.56 ms (epoch 0, 116 ms, left out)
    assert rec["timing"]["step_time_s"] == pytest.approx(0.11356, abs=5e-5)
    assert rec["timing"]["step_s"]["n"] == 39 and rec["timing"]["nosync_step_time_s"] is None
    assert rec["loss"]["test"] is None and len(rec["loss"]["curve"]) == 40
    # 100,000 samples / 512 per step = 196 steps an epoch; the curve's last entry is after 40 of them
    assert rec["loss"]["curve"][-1]["step"] == 40 * 196


def test_a_planned_point_without_a_run_is_refused(seed_config):
    cfg = copy.deepcopy(seed_config)
    cfg["experiments"]["strong"]["topologies"].append({"nodes": 8, "gpus_per_node": 2})
    with pytest.raises(plan.ConfigError, match=r"no imported run for the planned point strong, 8 nodes x 2"):
        imports.match(plan.build_points(cfg), imports.read_runs(cfg["import"]), "seed")


def test_a_run_without_a_planned_point_is_refused(seed_config):
    cfg = copy.deepcopy(seed_config)
    cfg["experiments"]["model_size"]["hidden_widths"] = [32, 64, 128]
    with pytest.raises(plan.ConfigError, match=r"run model_scaling_xlarge_n2g4_ddp .* matches no planned point"):
        imports.match(plan.build_points(cfg), imports.read_runs(cfg["import"]), "seed")


def _copy_seed(tmp_path) -> Path:
    folder = tmp_path / "runs with space"
    shutil.copytree(SEED, folder)
    return folder


@pytest.mark.parametrize("edit, error", [
    (lambda f: _replace(f / "runs.csv", ",ddp,8,4,2,", ",dpp,8,4,2,"), r"runs.csv, row \d+, column mode: 'dpp' is not single or ddp"),
    (lambda f: _replace(f / "strong_scaling_n4g8_ddp.csv", "\n5,", "\n5,x"), r"strong_scaling_n4g8_ddp.csv, row 7, column loss"),
    (lambda f: _truncate(f / "strong_scaling_n1g2_ddp.csv"), r"strong_scaling_n1g2_ddp.csv: 20 epochs, its run says 40"),
    (lambda f: (f / "weak_scaling_n2g2_ddp.csv").unlink(), r"weak_scaling_n2g2_ddp.csv: no such file"),
    (lambda f: _replace(f / "runs.csv", "run,test_type,mode,gpu_count", "run,test_type,mode,mode"),
     r"runs.csv: the header repeats column 'mode'"),
])
def test_each_bad_seed_file_is_one_error_naming_it(tmp_path, edit, error):
    folder = _copy_seed(tmp_path)
    edit(folder)
    with pytest.raises(plan.ConfigError, match=error):
        imports.read_runs({"format": "seed-suite", "path": str(folder), "hardware": "", "citation": ""})


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _truncate(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:21]))


TABLE = """run,experiment,nodes,gpus_per_node,batch_per_rank,samples,epoch,step_time_s,loss,hardware
a,strong,1,1,512,100000,0,0.12,1.0,H100
a,strong,1,1,512,100000,1,0.10,0.5,H100
b,strong,1,2,512,100000,0,0.14,1.1,H100
b,strong,1,2,512,100000,1,0.13,0.6,H100
"""


TABLE_CONFIG = """study: mine
device: cuda
repeats: 1
import: {{format: table, path: "{path}"}}
model: {{impl: [kanscale], basis: [bspline], widths: [2, 64, 1]}}
training: {{epochs: 2, lr: 0.001}}
experiments:
  strong: {{samples: 100000, batch_per_rank: 512, non_ddp_baseline: true, topologies: [{{nodes: 1, gpus_per_node: 2}}]}}
  allreduce: {{enabled: false}}
  readiness: {{enabled: false}}
"""


def _table_config(tmp_path, text: str, monkeypatch, check: bool = True) -> dict:
    """A config importing `text` as a table; `check`: validated (and matched) by load_config."""
    path = tmp_path / "my runs.csv"
    path.write_text(text)
    (tmp_path / "mine.yaml").write_text(TABLE_CONFIG.format(path=path))
    if check:
        return plan.load_config(tmp_path / "mine.yaml")
    return {"import": {"format": "table", "path": str(path), "hardware": "", "citation": ""}}


def test_generic_table_per_epoch_rows_import(tmp_path, monkeypatch):
    cfg = _table_config(tmp_path, TABLE, monkeypatch)
    points = plan.build_points(cfg)
    runs = imports.match(points, imports.read_runs(cfg["import"]), "table")
    by_name = {r.name: (pid, r) for pid, r in runs.items()}
    assert set(by_name) == {"a", "b"} and not points[by_name["a"][0]].train.ddp  # one rank: no DDP unless said
    pid, run = by_name["b"]
    rec = record.check(imported_record(points[pid], run, cfg["import"]), pid)
    assert rec["timing"]["step_time_s"] == pytest.approx(0.13)  # epoch 0 left out
    assert rec["ranks"][0]["device_name"] == "H100"


@pytest.mark.parametrize("text, error", [
    (TABLE.replace("b,strong,1,2,512,100000,1,0.13", "b,strong,1,2,512,100000,1,-0.13"),
     r"my runs.csv, row 5, column step_time_s: '-0.13' is not a finite number > 0"),
    (TABLE.replace("a,strong,1,1,512,100000,0", "a,stong,1,1,512,100000,0"),
     r"my runs.csv, row 2, column experiment: 'stong' is not one of strong, weak, comm, model_size"),
    (TABLE.replace("hardware", "gpu"), r"my runs.csv: unknown column 'gpu'; allowed: run, experiment"),
    (TABLE.replace(",samples,", ",sample,"), r"my runs.csv: no column 'samples'"),
    (TABLE.replace("b,strong,1,2,512,100000,1", "b,strong,1,2,256,100000,1"),
     r"my runs.csv, row 5: run 'b' was described differently in .*row 4"),
])
def test_each_bad_table_is_one_error_naming_file_row_and_column(tmp_path, monkeypatch, text, error):
    cfg = _table_config(tmp_path, text, monkeypatch, check=False)
    with pytest.raises(plan.ConfigError, match=error):
        imports.read_runs(cfg["import"])


def test_the_config_check_names_the_config_file_and_the_import(tmp_path):
    (tmp_path / "mine.yaml").write_text(TABLE_CONFIG.format(path=tmp_path / "gone.csv"))
    with pytest.raises(plan.ConfigError, match=r"mine.yaml: import: .*gone.csv: no such file"):
        plan.load_config(tmp_path / "mine.yaml")


def test_the_documented_example_table_imports(monkeypatch):
    """docs/import.md's example, examples/import-table.yaml with its table, plans and imports."""
    monkeypatch.chdir(ROOT)
    cfg = plan.load_config(ROOT / "examples" / "import-table.yaml")
    points = plan.build_points(cfg)
    runs = imports.match(points, imports.read_runs(cfg["import"]), "example")
    assert sorted(r.name for r in runs.values()) == ["one", "two"]
    assert {r.hardware for r in runs.values()} == {"NVIDIA H100"} and all(r.num_params == 5414 for r in runs.values())


REPEATED = """run,experiment,nodes,gpus_per_node,batch_per_rank,samples,repeat,epoch,step_time_s,loss
a0,strong,1,1,512,100000,0,0,0.12,1.0
a0,strong,1,1,512,100000,0,1,0.10,0.5
a1,strong,1,1,512,100000,1,0,0.12,1.0
a1,strong,1,1,512,100000,1,1,0.11,0.5
b0,strong,1,2,512,100000,0,0,0.14,1.1
b0,strong,1,2,512,100000,0,1,0.13,0.6
b1,strong,1,2,512,100000,1,0,0.14,1.1
b1,strong,1,2,512,100000,1,1,0.135,0.6
"""


def test_a_repeat_column_imports_each_run_as_one_repeat(tmp_path, monkeypatch):
    cfg = _table_config(tmp_path, REPEATED, monkeypatch, check=False)
    (tmp_path / "mine.yaml").write_text(TABLE_CONFIG.format(path=tmp_path / "my runs.csv").replace(
        "repeats: 1", "repeats: 2"))
    cfg = plan.load_config(tmp_path / "mine.yaml")
    points = plan.build_points(cfg)
    runs = imports.match(points, imports.read_runs(cfg["import"]), "table")
    assert sorted((r.name, points[pid].rep) for pid, r in runs.items()) == [("a0", 0), ("a1", 1), ("b0", 0), ("b1", 1)]
    pid = next(pid for pid, r in runs.items() if r.name == "b1")
    rec = record.check(imported_record(points[pid], runs[pid], cfg["import"], repeats=2), pid)
    assert rec["timing"]["step_time_s"] == pytest.approx(0.135) and rec["point"]["rep"] == 1
    assert "repeats (one run per point)" not in rec["source"]["lacks"]


@pytest.mark.parametrize("repeats, text, error", [
    # two runs of one configuration, no repeat column: which repeat each is cannot be guessed
    ("repeats: 1", REPEATED.replace(",repeat,", ",hardware,"),
     r"matches 2 runs: .*row \d and .*row \d; runs of one configuration need a repeat column"),
    ("repeats: 1", REPEATED, r"run a1 \(.*repeat 1\) matches no planned point; the config's repeats \(1\) do not "
                             r"reach repeat 1"),
    ("repeats: 3", REPEATED, r"no imported run for the planned point strong, .*widths 2x64x1, repeat 2"),
    ("repeats: {min: 2, max: 4, looks: 2}", REPEATED, r"import: repeats: \{min: 2, max: 4\} asks for repeats measured "
                                                      r"as needed, but a study of imported runs measures nothing"),
])
def test_repeats_that_the_runs_cannot_give_are_refused(tmp_path, repeats, text, error):
    path = tmp_path / "my runs.csv"
    path.write_text(text)
    (tmp_path / "mine.yaml").write_text(TABLE_CONFIG.format(path=path).replace("repeats: 1", repeats))
    with pytest.raises(plan.ConfigError, match=error):
        plan.load_config(tmp_path / "mine.yaml")


def test_the_report_echoes_only_what_describes_imported_runs(seed_config):
    from scaling.report.render import config_echo, config_text
    shown = config_echo(seed_config)
    # nothing ran: how kanscale would launch a point describes none of the paper's runs
    assert "launcher" in seed_config and "launcher" not in shown and "network" not in shown
    assert "resources" not in shown and "comm_probe_every" not in shown["training"]
    assert "allreduce" not in shown["experiments"] and "strong" in shown["experiments"]
    assert shown["import"] == seed_config["import"] and shown["training"]["epochs"] == 40
    assert config_text(seed_config).startswith("# imported runs: left out are the keys")
    measured = {k: v for k, v in seed_config.items() if k != "import"}
    assert "launcher" in config_echo(measured) and not config_text(measured).startswith("#")


def test_an_imported_model_keeps_the_name_its_table_gives(tmp_path, monkeypatch):
    """The table's model column names the model in every table (tidy_row), not kanscale's own name;
    two names in one table are one error (a config plans one model)."""
    from scaling.tables.tidy import tidy_row
    named = TABLE.replace("hardware", "hardware,model").replace(",H100", ",H100,resnet50")
    cfg = _table_config(tmp_path, named, monkeypatch)
    points = plan.build_points(cfg)
    runs = imports.match(points, imports.read_runs(cfg["import"]), "table")
    pid, run = next(iter(runs.items()))
    assert run.model_name == "resnet50"
    rec = imported_record(points[pid], run, cfg["import"])
    assert tidy_row(points[pid].to_json(), "ok", rec)["model"] == "resnet50"
    two = named.replace("1.1,H100,resnet50", "1.1,H100,bert").replace("0.6,H100,resnet50", "0.6,H100,bert")
    with pytest.raises(plan.ConfigError, match=r"column model: bert, resnet50: one model per table"):
        imports.read_runs(_table_config(tmp_path, two, monkeypatch, check=False)["import"])


def test_a_comm_time_column_is_the_exposed_communication(tmp_path, monkeypatch):
    """The source's own timing of the step's communication is used as the exposed communication of
    its DDP runs (the median over the epochs the step comes from), never of a run without DDP."""
    timed = TABLE.replace("hardware", "hardware,comm_time_s").replace(",H100\nb", ",H100,\nb")
    timed = timed.replace("1.0,H100\n", "1.0,H100,\n").replace("0.5,H100\n", "0.5,H100,\n")
    timed = timed.replace("1.1,H100\n", "1.1,H100,0.05\n").replace("0.6,H100\n", "0.6,H100,0.026\n")
    cfg = _table_config(tmp_path, timed, monkeypatch)
    points = plan.build_points(cfg)
    runs = imports.match(points, imports.read_runs(cfg["import"]), "table")
    by_name = {r.name: (pid, r) for pid, r in runs.items()}
    pid, run = by_name["b"]
    rec = record.check(imported_record(points[pid], run, cfg["import"]), pid)
    assert rec["comm"]["exposed_s"] == pytest.approx(0.026) and rec["comm"]["exposed_pct"] == pytest.approx(20.0)
    pid, run = by_name["a"]
    assert imported_record(points[pid], run, cfg["import"])["comm"]["exposed_s"] is None
    longer = timed.replace("0.6,H100,0.026", "0.6,H100,0.5")
    with pytest.raises(plan.ConfigError, match=r"my runs.csv, row 5, column comm_time_s: 0.5 is not at most the "
                                               r"row's step \(0.13 s\)"):
        imports.read_runs(_table_config(tmp_path, longer, monkeypatch, check=False)["import"])
