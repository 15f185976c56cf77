"""The report's "Time to accuracy" section: with held-out curves and a target it comes before the
per-axis sections, with the held-out metric against training time, the time to the target per world
size and model (figure and table) and "not reached" where a point's repeats did not all get there;
with curves but no target, the curves only; without curves, no section and no figure."""

import json

import pandas as pd

from scaling.common.columns import VAL_CURVE_COLUMNS
from scaling.report.plots import plot_figures
from scaling.report.render import render_report
from scaling.tables.all_tables import compute_tables
from scaling_data import frame, row, schema_config, settings

# held-out accuracy at evaluations 1..4 (every 1000 samples) per (world size, repeat)
ACC = {(1, 0): [0.6, 0.8, 0.9, 0.95], (1, 1): [0.6, 0.85, 0.9, 0.93],
       (2, 0): [0.5, 0.7, 0.8, 0.85], (2, 1): [0.5, 0.6, 0.7, 0.8]}
RATE = {1: 1000.0, 2: 2000.0}


def study() -> pd.DataFrame:
    return frame([row(exp, 1, p, r, RATE[p], batch_per_rank=256 // p if exp == "strong" else 128)
                  for exp in ("strong", "weak") for p in (1, 2) for r in (0, 1)])


def val_curves(df: pd.DataFrame) -> pd.DataFrame:
    rows = [{"point_id": r["point_id"], "experiment": r["experiment"], "model": r["model"], "data": "sklearn",
             "world_size": r["world_size"], "nodes": r["nodes"], "gpus_per_node": r["gpus_per_node"],
             "placement_class": "", "ddp": r["ddp"], "rep": r["rep"], "global_batch": r["global_batch"],
             "step": 10 * k, "samples_seen": 1000 * k, "train_time_s": 1000 * k / RATE[r["world_size"]],
             "val_loss": 1 - acc, "val_accuracy": acc, "eval_time_s": 0.5}
            for _, r in df[df["status"] == "ok"].iterrows() for k, acc in enumerate(ACC[(r["world_size"], r["rep"])], 1)]
    return pd.DataFrame(rows, columns=VAL_CURVE_COLUMNS)


def render(tmp_path, target, curves=True):
    df = study()
    vc = val_curves(df) if curves else None
    tables = compute_tables(df, settings(target=target, bootstrap_samples=20), val_curves=vc)
    tables["val_curves"] = vc
    base = schema_config(bootstrap_samples=20, target=target)
    config = {"study": "h", **base, "repeats": 2,
              "training": {"eval_every_samples": 1000 if curves else None}}
    folder = tmp_path / "plots"
    manifest = plot_figures(tables, folder, None, settings(target=target, bootstrap_samples=20), study="h")
    html = render_report(tables, [], manifest, folder, config, {}, None, generated_utc="2026-12-04 00:00 UTC")
    return html, manifest


def section(html: str, sid: str) -> str:
    return html.split(f'<section id="{sid}">')[1].split("</section>")[0]


def test_with_curves_and_a_target_the_section_comes_first_with_figures_and_not_reached(tmp_path):
    html, manifest = render(tmp_path, {"metric": "val_accuracy", "value": 0.84})
    assert html.index('<section id="accuracy">') < html.index('<section id="strong">')
    assert '<a href="#accuracy">Time to accuracy</a>' in html
    sec = section(html, "accuracy")
    for name in ("heldout_curves_strong_0", "heldout_curves_weak_0", "heldout_time_to_target_strong",
                 "heldout_time_to_target_weak"):
        assert "file" in manifest[name], manifest[name]
        assert (tmp_path / "plots" / manifest[name]["file"]).is_file()
    assert sec.count("data:image/png;base64,") == 4 and "figure-missing" not in sec
    assert "off the clock" in sec and "every 1,000 samples" in sec and "val_accuracy at or above 0.84" in sec
    # world 2: repeat 1 never reaches 0.84; world 1: repeat 0 at the 3rd evaluation (3 s), repeat 1 at the 2nd (2 s)
    assert "<td>not reached in 1 of 2 repeats</td>" in sec and "<td>1 of 2</td>" in sec
    assert '<table class="data" id="table-accuracy">' in sec and "<td>2.5 [0, 8.85]</td>" in sec
    assert json.loads((tmp_path / "plots" / "figures.json").read_text()) == manifest


def test_with_curves_but_no_target_the_curves_only(tmp_path):
    html, manifest = render(tmp_path, None)
    sec = section(html, "accuracy")
    assert "No held-out target is set" in sec and "table-accuracy" not in sec
    assert [n for n in manifest if n.startswith("heldout_")] == ["heldout_curves_strong_0", "heldout_curves_weak_0"]


def test_without_curves_no_section_and_no_figure(tmp_path):
    html, manifest = render(tmp_path, None, curves=False)
    assert 'id="accuracy"' not in html and "Time to accuracy" not in html
    assert not [n for n in manifest if n.startswith("heldout_")]
