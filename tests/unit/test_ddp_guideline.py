"""The DDP-settings table and guideline on hand-built measurements: each setting against `none`
by time to the target loss and final loss, decided only by intervals (advice, keep the defaults,
inconclusive with the repeats that settle it, not enough data), a setting the backend could not
run ruled out with its reason, and the performance model's prediction from a hook's bytes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scaling.common.columns import LOSS_CURVE_COLUMNS, clean, clean_allreduce
from scaling.decide.guidelines import compute_guidelines
from scaling.model.perf_model import fit_performance_model
from scaling.report.plots import plot_figures
from scaling.report.render import render_report
from scaling.tables.all_tables import compute_tables

from scaling_data import allreduce_sweep, frame, row, schema_config, settings

GRADS = 4 * 64 * 84


def ddp_rows(setting: str, step_s: float, final: float, reps: int = 4, noise: float = 0.01, status: str = "ok",
             reason: str | None = None, bytes_factor: float = 1.0, nodes: int = 1, gpn: int = 2):
    """`reps` repeats of one setting; repeat k's step time and final loss are off by +-noise."""
    rows, curves = [], []
    for k in range(reps):
        jit = 1 + noise * (k - (reps - 1) / 2)
        # a failed repeat's reason ends with its own log's path, as the launcher writes it
        why = f"{reason} (log: results/t/logs/{setting}-r{k}.log)" if reason else None
        r = row("ddp", nodes, gpn, rep=k, status=status, reason=why, batch_per_rank=64)
        r["point_id"] = f"ddp-{setting.replace(' ', '_')}-n{nodes}g{gpn}-r{k}"
        r["ddp_setting"], r["comm_hook"], r["link_mbit"] = setting, setting.split(" ")[0].split("-rank")[0], 0.0
        if status == "ok":
            s = step_s * jit
            r.update(step_time_s=s, nosync_step_time_s=0.5 * step_s, exposed_comm_s=s - 0.5 * step_s,
                     exposed_comm_pct=100 * (s - 0.5 * step_s) / s, samples_per_s=128 / s,
                     final_train_loss=final * jit, bytes_per_step=GRADS * bytes_factor, grads_bytes=GRADS)
            # the loss falls the same per step for every setting down to its own final value
            for step in range(0, 41, 4):
                loss = final * jit * (1 + 9 * math.exp(-step / 6))
                curves.append({"point_id": r["point_id"], "experiment": "ddp", "model": r["model"], "world_size": 2,
                               "nodes": nodes, "gpus_per_node": gpn, "placement_class": "intra-node", "ddp": True,
                               "rep": k, "step": step, "samples_seen": 128 * step, "elapsed_s": s * step,
                               "train_loss": loss})
        rows.append(r)
    return rows, curves


def study(*parts):
    rows = [r for p in parts for r in p[0]]
    curves = [c for p in parts for c in p[1]]
    return frame(rows), pd.DataFrame(curves, columns=LOSS_CURVE_COLUMNS)


def decide(m, c, **thresholds):
    th = settings(**thresholds)
    tables = compute_tables(m, th, c)
    g = [x for x in compute_guidelines(tables, th) if x["topic"] == "ddp"]
    return tables["ddp"], g


def test_a_hook_faster_to_the_target_within_the_tolerance_is_advised():
    t, g = decide(*study(ddp_rows("none", 0.010, 0.10), ddp_rows("fp16", 0.006, 0.101, bytes_factor=0.5)))
    fp16 = t[t["ddp_setting"] == "fp16"].iloc[0]
    assert fp16["ttt_ratio"] == pytest.approx(0.6, rel=0.03) and fp16["ttt_ratio_dhi"] < 1
    assert fp16["bytes_ratio"] == pytest.approx(0.5) and fp16["final_loss_ratio"] == pytest.approx(1.01, rel=1e-3)
    assert bool(t[t["ddp_setting"] == "none"]["is_baseline"].iloc[0])
    assert len(g) == 1 and g[0]["status"] == "advice", g
    assert g[0]["numbers"]["recommended"] == "fp16" and "use fp16" in g[0]["text"]


def test_a_faster_step_that_converges_worse_is_not_advised():
    # PowerSGD: 3x faster steps, but it ends 20% above none's loss: ruled out; fp16 slower: keep none
    t, g = decide(*study(ddp_rows("none", 0.010, 0.10), ddp_rows("powersgd-rank2", 0.0033, 0.12, bytes_factor=0.02),
                         ddp_rows("fp16", 0.012, 0.10, bytes_factor=0.5)))
    assert g[0]["status"] == "advice" and g[0]["numbers"]["recommended"] == "none", g[0]["text"]
    assert "keep DDP's defaults" in g[0]["text"] and "final loss above the 5% tolerance" in g[0]["text"]
    # with a 25% tolerance the same data recommend PowerSGD
    _, g = decide(*study(ddp_rows("none", 0.010, 0.10), ddp_rows("powersgd-rank2", 0.0033, 0.12, bytes_factor=0.02)),
                  ddp_loss_tolerance_pct=25)
    assert g[0]["status"] == "advice" and g[0]["numbers"]["recommended"] == "powersgd-rank2"


def test_a_straddling_ratio_is_inconclusive_and_names_the_repeats_that_settle_it():
    t, g = decide(*study(ddp_rows("none", 0.010, 0.10, reps=3, noise=0.2), ddp_rows("fp16", 0.0097, 0.10, reps=3,
                                                                                     noise=0.2)))
    fp16 = t[t["ddp_setting"] == "fp16"].iloc[0]
    assert fp16["ttt_ratio_dlo"] < 1 < fp16["ttt_ratio_dhi"]
    assert g[0]["status"] == "inconclusive" and "fp16" in g[0]["settle"]
    keys = {(p["key"]["ddp_setting"], p["where"].split(" at ")[0]) for p in g[0]["settle_points"]}
    assert ("fp16", "fp16") in keys and ("none", "none") in keys
    assert all(p["more"] is None or p["more"] >= 1 for p in g[0]["settle_points"])


def test_too_few_repeats_never_give_advice():
    _, g = decide(*study(ddp_rows("none", 0.010, 0.10, reps=2), ddp_rows("fp16", 0.006, 0.10, reps=2)))
    assert g[0]["status"] == "inconclusive" and "more repeats of fp16" in g[0]["settle"]
    assert "none at 1x2 (the baseline)" in g[0]["settle"]


def test_a_setting_the_backend_cannot_run_is_ruled_out_with_its_reason():
    t, g = decide(*study(ddp_rows("none", 0.010, 0.10), ddp_rows("fp16", 0.012, 0.10),
                         ddp_rows("bf16", 0, 0, status="failed", reason="BF16 all reduce communication hook required "
                                  "CUDA 11+ and NCCL 2.10+")))
    bf16 = t[t["ddp_setting"] == "bf16"].iloc[0]
    assert int(bf16["n_ok"]) == 0
    # the 4 repeats failed alike: their reason once, with the first repeat's log
    assert bf16["not_ok"].count("BF16") == 1 and "bf16-r0.log" in bf16["not_ok"], bf16["not_ok"]
    assert g[0]["status"] == "advice" and g[0]["numbers"]["recommended"] == "none"
    assert "bf16 (could not run here (failed: BF16 all reduce" in g[0]["text"] and "(log:" not in g[0]["text"]
    assert g[0]["numbers"]["time_to_target_ratio_by_setting"]["bf16"] is None
    assert g[0]["numbers"]["time_to_target_ratio_by_setting"]["none"] == 1.0


def test_without_the_baseline_there_is_no_advice():
    _, g = decide(*study(ddp_rows("fp16", 0.006, 0.10)))
    assert g[0]["status"] == "not_enough_data" and "`none`" in g[0]["text"]
    assert decide(*study(ddp_rows("none", 0.01, 0.1)))[1][0]["status"] == "not_enough_data"


def test_the_ddp_experiment_has_its_own_target_from_its_none_setting():
    t, _ = decide(*study(ddp_rows("none", 0.010, 0.10), ddp_rows("fp16", 0.006, 0.10)))
    # 1.5 x none's mean final loss (the last curve entry: 0.1 x (1 + 9 e^(-40/6)))
    assert t["target_loss"].iloc[0] == pytest.approx(0.15 * (1 + 9 * math.exp(-40 / 6)))
    t, _ = decide(*study(ddp_rows("none", 0.010, 0.10), ddp_rows("fp16", 0.006, 0.10)), target_loss=0.5)
    assert t["target_loss"].iloc[0] == pytest.approx(0.5)


def test_the_model_predicts_a_hook_from_its_bytes_fitted_to_the_defaults_only():
    """Compute 5 ms; comm = ring(2, n) = 2 alpha + n beta over the swept link (alpha 20 us, beta
    2e-7 s/byte: 4.3 ms, not hidden); fp16 measured with half the bytes: the model, fitted without the fp16
    rows, predicts it from its bytes (factor 0.5)."""
    rows = []
    n = GRADS
    alpha, beta = 2e-5, 2e-7
    comm = 2 * alpha + n * beta
    for k in range(3):
        for p, setting, factor, exp in ((1, "none", 1.0, "strong"), (2, "none", 1.0, "strong"),
                                        (2, "none", 1.0, "ddp"), (2, "fp16", 0.5, "ddp")):
            r = row(exp, 1, p, rep=k, batch_per_rank=64)
            r["point_id"] = f"{exp}-{setting}-{p}-r{k}"
            step = 0.005 + ((2 * alpha + n * factor * beta) if p > 1 else 0) * (1 + 0.001 * k)
            r.update(ddp_setting=setting, link_mbit=0.0, step_time_s=step, nosync_step_time_s=0.005,
                     exposed_comm_s=step - 0.005, exposed_comm_pct=100 * (step - 0.005) / step, grads_bytes=n,
                     bytes_per_step=n * factor, host_cpus=16, threads_per_rank=1, device_type="cpu")
            rows.append(r)
    sweep = clean_allreduce(allreduce_sweep(alpha, beta, topologies=((1, 2, "intra-node"),)))
    m = fit_performance_model(clean(frame(rows)), sweep, settings(bootstrap_samples=20))
    (fp16,) = [e for e in m["ddp_settings"]["kan-bspline [2,64,1]"] if e["ddp_setting"] == "fp16"]
    assert fp16["bytes_factor"] == pytest.approx(0.5)
    assert fp16["predicted_step_time_s"] == pytest.approx(0.005 + 2 * alpha + n * beta / 2, rel=0.02)
    assert fp16["predicted_step_time_s"] < 0.005 + comm * 0.98  # not the full-size all-reduce
    assert abs(fp16["error_pct"]) < 2
    # had the fp16 rows entered the fit as full-size all-reduces, the none prediction would drift
    (none,) = [e for e in m["ddp_settings"]["kan-bspline [2,64,1]"] if e["ddp_setting"] == "none"]
    assert abs(none["error_pct"]) < 2 and np.isfinite(none["predicted_step_time_s"])


def test_the_report_has_a_ddp_settings_section_with_table_figures_guideline_and_model(tmp_path):
    m, c = study(ddp_rows("none", 0.010, 0.10), ddp_rows("fp16", 0.006, 0.101, bytes_factor=0.5),
                 ddp_rows("bf16", 0, 0, status="failed", reason="BF16 all reduce communication hook required CUDA"))
    thresholds = settings(bootstrap_samples=20)
    tables = compute_tables(m, thresholds, c)
    tables["model"] = fit_performance_model(clean(m), clean_allreduce(None), thresholds)
    tables["loss_curves"] = c
    guidelines = compute_guidelines(tables, thresholds, tables["model"])
    manifest = plot_figures(tables, tmp_path / "plots", None, thresholds, None, "d")
    assert manifest["ddp_time_to_target"].get("file") and manifest["ddp_loss_curves"].get("file"), manifest
    config = {"study": "d", **schema_config(bootstrap_samples=20), "repeats": 4}
    html = render_report(tables, guidelines, manifest, tmp_path / "plots", config, {}, None,
                         generated_utc="2026-12-02 00:00 UTC")
    section = html.split('<section id="ddp">')[1].split("</section>")[0]
    assert "<h2>DDP settings</h2>" in section and 'id="table-ddp"' in section
    rows = section.split('id="table-ddp"')[1].split("</table>")[0]
    assert rows.count("<tr>") == 4 and "1 (baseline)" in rows and "0.60" in rows and "failed: BF16" in rows
    assert section.count("data:image/png;base64,") == 2
    assert 'id="table-ddp-model"' in section  # the model's row per setting (not fitted here: it says why)
    assert 'href="#ddp"' in html and 'class="guidelines-head"' in section and "use fp16" in section
    # a study without the experiment has no such section
    plain = render_report({k: (v.iloc[0:0] if k == "ddp" else v) for k, v in tables.items()}, [], {}, tmp_path,
                          {"study": "d", **schema_config(), "repeats": 1}, {}, None)
    assert '<section id="ddp">' not in plain and 'href="#ddp"' not in plain
