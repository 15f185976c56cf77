"""Time and samples to a held-out target (report.target) on hand-built validation curves of known
truth, the plan-time errors of a target the study cannot produce, and the tables' and report's
columns."""

import copy

import pandas as pd
import pytest

import plan
from scaling.common.columns import VAL_CURVE_COLUMNS
from scaling.common.stats import summarize
from scaling.report.cells import table_rows
from scaling.tables.all_tables import compute_tables
from scaling.tables.heldout import first_reach, references, rule_text
from scaling.report.render import render_report
from scaling_data import frame, row, schema_config, settings

# held-out accuracy at evaluations 1..4 (every 1000 samples) per (world size, repeat)
ACC = {(1, 0): [0.6, 0.8, 0.9, 0.95], (1, 1): [0.6, 0.85, 0.9, 0.93],
       (2, 0): [0.5, 0.7, 0.8, 0.85], (2, 1): [0.5, 0.6, 0.7, 0.8]}
RATE = {1: 1000.0, 2: 2000.0}  # samples/s: an evaluation at n samples seen is at n / rate s of training


def study() -> pd.DataFrame:
    return frame([row(exp, 1, p, r, RATE[p], batch_per_rank=256 // p if exp == "strong" else 128)
                  for exp in ("strong", "weak") for p in (1, 2) for r in (0, 1)])


def val_curves(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in df[df["status"] == "ok"].iterrows():
        for k, acc in enumerate(ACC[(r["world_size"], r["rep"])], 1):
            rows.append({"point_id": r["point_id"], "experiment": r["experiment"], "model": r["model"],
                         "data": "sklearn breast_cancer", "world_size": r["world_size"], "nodes": r["nodes"],
                         "gpus_per_node": r["gpus_per_node"], "placement_class": "", "ddp": r["ddp"], "rep": r["rep"],
                         "global_batch": r["global_batch"], "step": 10 * k, "samples_seen": 1000 * k,
                         "train_time_s": 1000 * k / RATE[r["world_size"]], "val_loss": 1 - acc,
                         "val_accuracy": acc, "eval_time_s": 0.5})
    return pd.DataFrame(rows, columns=VAL_CURVE_COLUMNS)


def tables(target):
    df = study()
    return compute_tables(df, settings(target=target, bootstrap_samples=20), val_curves=val_curves(df))


def at(t, p):
    return t[t["world_size"] == p].iloc[0]


def test_first_evaluation_that_reaches_the_target_no_interpolation():
    c = pd.DataFrame({"step": [3, 1, 2], "samples_seen": [300, 100, 200], "train_time_s": [3.0, 1.0, 2.0],
                      "val_loss": [0.1, 0.5, 0.3], "val_accuracy": [0.9, 0.5, 0.7]})
    assert first_reach(c, "val_loss", 0.3) == (2.0, 200.0)  # at or below, on the evaluation itself
    assert first_reach(c, "val_loss", 0.2) == (3.0, 300.0)  # between evaluations: the next one, not a guess
    assert first_reach(c, "val_accuracy", 0.7) == (2.0, 200.0)  # at or above
    assert first_reach(c, "val_accuracy", 0.95) is None


def test_a_fixed_value_gives_exact_times_samples_and_intervals_over_repeats():
    t = tables({"metric": "val_accuracy", "value": 0.8})["strong"]
    one, two = at(t, 1), at(t, 2)
    # world 1: both repeats first reach 0.8 at the 2nd evaluation: 2000 samples, 2 s
    assert one["time_to_target_s"] == pytest.approx(2.0) and one["samples_to_target"] == pytest.approx(2000)
    # world 2: 3rd and 4th evaluation: 1.5 s and 2 s, 3000 and 4000 samples
    st = summarize(pd.Series([1.5, 2.0]))
    assert two["time_to_target_s"] == pytest.approx(1.75) and two["samples_to_target"] == pytest.approx(3500)
    assert two["time_to_target_s_ci_hi"] == pytest.approx(st["ci_hi"]) and two["time_to_target_s_ci_lo"] == 0.0
    assert two["time_to_target_speedup"] == pytest.approx(2.0 / 1.75)
    assert one["target_metric"] == "val_accuracy" and one["target_value"] == 0.8
    assert one["eval_time_s_mean"] == 0.5 and two["target_n_reached"] == 2 and bool(two["target_reached"])
    # the training-loss target's column is gone: the table's target is the held-out one
    assert "target_loss" not in t


def test_a_point_that_misses_says_so_and_gets_no_time():
    t = tables({"metric": "val_accuracy", "value": 0.84})["strong"]
    two = at(t, 2)  # repeat 0 reaches 0.85 at 4000 samples, repeat 1 never gets above 0.8
    assert not bool(two["target_reached"]) and two["target_n_reached"] == 1 and two["target_n_repeats"] == 2
    assert two["time_to_target_note"] == "not reached in 1 of 2 repeats"
    assert pd.isna(two["time_to_target_s"]) and pd.isna(two["samples_to_target"])
    t = tables({"metric": "val_loss", "value": 0.01})["weak"]
    assert (t["time_to_target_note"] == "not reached").all() and (t["target_n_reached"] == 0).all()


def test_from_reference_is_the_factor_times_the_world1_final_value():
    curves = val_curves(study())
    # the world-1 DDP point's final accuracy, mean over its repeats: (0.95 + 0.93) / 2
    assert references(curves, "val_accuracy")[("strong", "kan-bspline [2,64,1]")] == pytest.approx(0.94)
    got = tables({"metric": "val_accuracy", "from_reference": 0.9})
    one = at(got["strong"], 1)
    assert one["target_reference_value"] == pytest.approx(0.94) and one["target_value"] == pytest.approx(0.846)
    # repeat 0 reaches 0.846 at 3000 samples (3 s), repeat 1 at 2000 (2 s)
    assert one["time_to_target_s"] == pytest.approx(2.5) and one["samples_to_target"] == pytest.approx(2500)
    text = rule_text({"metric": "val_accuracy", "from_reference": 0.9}, got)
    assert "at or above 0.9 ×" in text and "strong: reference 0.94, target 0.846" in text


def test_the_report_tables_show_time_and_samples_to_the_target():
    got = tables({"metric": "val_loss", "value": 0.2})
    strong, weak = table_rows("strong", got["strong"]), table_rows("weak", got["weak"])
    for rows in (strong, weak):
        assert "time to val_loss target s" in rows["headers"] and "samples to target" in rows["headers"]
        assert "eval time ms, whole run (off the clock)" in rows["headers"]
    i = strong["headers"].index("samples to target")
    assert strong["rows"][0][i] == "2,000"  # both repeats at the 2nd evaluation: no interval to show
    i = strong["headers"].index("time to val_loss target s")
    assert strong["rows"][1][i].startswith("1.75 [0, ")  # world 2: 1.5 s and 2 s


def test_without_a_target_nothing_changes():
    df = study()
    t = compute_tables(df, settings(bootstrap_samples=20), val_curves=val_curves(df))
    assert "target_metric" not in t["strong"] and "time_to_target_s" not in t["weak"]
    assert "samples to target" not in table_rows("strong", t["strong"])["headers"]


MINIMAL = {"experiments": {"strong": {"global_batch": 64, "samples": 1024,
                                      "topologies": [{"nodes": 1, "gpus_per_node": 1}]}}}


def problems(**patch):
    cfg = copy.deepcopy(MINIMAL)
    cfg.update(patch)
    with pytest.raises(plan.ConfigError) as e:
        plan.validate_config(cfg, source="x.yaml")
    return str(e.value)


def test_a_target_the_study_cannot_produce_is_a_config_error():
    msg = problems(report={"target": {"metric": "val_accuracy", "value": 0.9}}, training={"eval_every_samples": 512})
    assert msg.startswith("x.yaml: report.target.metric:") and "classification" in msg
    msg = problems(report={"target": {"metric": "val_loss", "value": 0.1}})
    assert msg.startswith("x.yaml: report.target:") and "training.eval_every_samples" in msg
    msg = problems(report={"target": {"metric": "val_loss", "value": 0.1, "from_reference": 1.1}},
                   training={"eval_every_samples": 512})
    assert "exactly one of value" in msg
    msg = problems(report={"target": {"metric": "val_loss", "goal": 0.1}})
    assert "report.target" in msg and "goal" in msg


def test_a_classification_study_may_have_an_accuracy_target():
    cfg = {**copy.deepcopy(MINIMAL), "data": {"kind": "sklearn", "name": "breast_cancer"},
           "model": {"widths": [30, 8, 2]}, "training": {"eval_every_samples": 512},
           "report": {"target": {"metric": "val_accuracy", "from_reference": 0.98}}}
    assert plan.validate_config(cfg)["report"]["target"] == {"metric": "val_accuracy", "from_reference": 0.98}


def test_the_report_method_says_evaluation_is_off_the_clock_and_which_target(tmp_path):
    target = {"metric": "val_accuracy", "from_reference": 0.9}
    got = tables(target)
    config = {"study": "h", **schema_config(bootstrap_samples=20, target=target), "repeats": 2,
              "training": {"eval_every_samples": 1000}}
    html = render_report(got, [], {}, tmp_path, config, {}, None, generated_utc="2026-12-04 00:00 UTC")
    method = html.split('<section id="method">')[1].split("</section>")[0]
    assert "off the training clock" in method and "every 1,000 samples" in method
    assert "val_accuracy at or above 0.9 ×" in method and "reference 0.94, target 0.846" in method
    strong = html.split('<section id="strong">')[1].split("</section>")[0]
    assert "time to val_accuracy target s" in strong and "samples to target" in strong and "first held-out" in strong
    # without a target: the config echo and the note read as before
    plain = render_report(got, [], {}, tmp_path, {**config, "report": schema_config()["report"]}, {}, None)
    assert "target: null" not in plain and "first loss-curve entry" in plain and "off the training clock" not in plain
