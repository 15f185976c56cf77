"""Every one-time cost on the record (kan/startup.py): timing.startup_s is the sum of its named parts,
each part that ran is recorded and a part that did not is absent (never 0); the parts travel into the
held-out tables (val_curves.csv, the strong and weak tables' *_mean columns) and the report's start-up
cell lists them beside the time to target."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch  # noqa: F401  (imported before train.main: no imports part in this process)

from kan import startup, train
from scaling.common.columns import VAL_CURVE_COLUMNS
from scaling.report.cells import heldout_rows
from scaling.tables.all_tables import compute_tables
from scaling.tables.tidy import collect
from scaling_data import frame, row, settings

SMALL = ["--widths=2,8,1", "--grid-size=5", "--samples=512", "--epochs=1", "--batch-per-rank=32",
         "--warmup-steps=2", "--device=cpu", "--threads-per-rank=1", "--eval-every-samples=128",
         "--comm-probe-every=0"]


def test_a_clock_sums_the_parts_that_ran_and_leaves_the_others_out():
    clock = startup.Clock()
    clock.add("imports", None)  # did not run: absent, not 0
    clock.add("first_steps", 0.25)
    with clock.part("anatomy"):
        pass
    assert list(clock.parts) == ["first_steps", "anatomy"] and clock.parts["anatomy"] >= 0
    assert clock.total() == sum(clock.parts.values())
    with pytest.raises(ValueError, match=r"unknown start-up part 'readiness'; allowed: imports, first_steps"):
        clock.add("readiness", 1.0)
    # every rank waits for the slowest before the clock starts: its parts, whole (not a max per part)
    assert startup.slowest([{"first_steps": 0.3, "anatomy": 0.1}, {"first_steps": 0.2, "anatomy": 0.3}]) == \
        {"first_steps": 0.2, "anatomy": 0.3}
    assert startup.slowest([]) == {}
    assert startup.text({"anatomy": 0.0625, "imports": 1.9}) == "imports 1.9, anatomy probe 0.0625"


def test_a_cpu_run_records_its_parts_and_their_sum(tmp_path):
    out = tmp_path / "r.json"
    assert train.main([*SMALL, "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    parts = rec["timing"]["startup_parts"]
    # torch was imported before main ran (this test process): no imports part; a CPU times no kernel
    # choice (numba or eager is looked up); no capture without training.cuda_graphs
    assert set(parts) == {"first_steps", "anatomy"} and all(v > 0 for v in parts.values())
    assert rec["timing"]["startup_s"] == sum(parts.values())
    # the tidy layer carries every part beside the sum, empty where it did not run
    vals = collect([rec["point"]], {rec["point"]["id"]: str(out)})["val_curves"]
    assert list(vals.columns) == VAL_CURVE_COLUMNS and len(vals) > 0
    first = vals.iloc[0]
    assert first["startup_first_steps_s"] == parts["first_steps"] and first["startup_anatomy_s"] == parts["anatomy"]
    assert pd.isna(first["startup_kernel_choice_s"]) and pd.isna(first["startup_capture_s"])


def test_the_imports_part_is_what_a_fresh_process_paid_and_absent_where_torch_was_there():
    code = ("import sys, json; from kan import train; assert 'torch' not in sys.modules; "
            "print(json.dumps([train._import_trainer(True), train._import_trainer(True)]))")
    fresh, again = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                             check=True, timeout=300).stdout)
    assert fresh > 0 and again is None
    assert train._import_trainer(False) is None  # this process: torch imported long ago


def _study_with_parts():
    """Two repeats of a strong point; repeat 0 paid imports (a fresh interpreter), repeat 1 did not
    (forked from the warm server): the imports mean is over the repeat that paid it."""
    df = frame([row("strong", 1, 1, r, 1000.0, batch_per_rank=256) for r in (0, 1)])
    parts = [{"imports": 2.0, "first_steps": 0.3, "anatomy": 0.1}, {"first_steps": 0.5, "anatomy": 0.1}]
    curves = []
    for _, r in df.iterrows():
        p = parts[int(r["rep"])]
        for k, acc in enumerate((0.6, 0.8, 0.95), 1):
            curves.append({"point_id": r["point_id"], "experiment": "strong", "model": r["model"], "data": "d",
                           "world_size": 1, "nodes": 1, "gpus_per_node": 1, "placement_class": "", "ddp": r["ddp"],
                           "rep": r["rep"], "global_batch": 256, "step": 10 * k, "samples_seen": 1000 * k,
                           "train_time_s": float(k), "val_loss": 1 - acc, "val_accuracy": acc, "eval_time_s": 0.5,
                           "startup_s": sum(p.values()), **{startup.column(n): v for n, v in p.items()}})
    target = {"metric": "val_accuracy", "value": 0.9}
    return compute_tables(df, settings(target=target, bootstrap_samples=20),
                          val_curves=pd.DataFrame(curves, columns=VAL_CURVE_COLUMNS))


def test_the_held_out_table_and_the_report_cell_carry_the_parts():
    t = _study_with_parts()["strong"].iloc[0]
    assert t["startup_s_mean"] == pytest.approx((2.4 + 0.6) / 2)
    assert t["startup_imports_s_mean"] == pytest.approx(2.0)  # over the repeat that paid it
    assert t["startup_first_steps_s_mean"] == pytest.approx(0.4) and t["startup_anatomy_s_mean"] == pytest.approx(0.1)
    assert pd.isna(t["startup_capture_s_mean"]) and pd.isna(t["startup_kernel_choice_s_mean"])
    table = heldout_rows(_study_with_parts())
    cell = table["rows"][0][table["headers"].index("start-up s (off the clock)")]
    assert cell == "1.5 (imports 2, first steps (JIT) 0.4, anatomy probe 0.1)"


def test_a_record_from_before_the_parts_shows_its_sum_alone():
    from scaling.report.cells import _startup

    assert _startup({"startup_s_mean": 0.37}) == "0.37"
    assert _startup({"startup_s_mean": float("nan")}) == "–"
