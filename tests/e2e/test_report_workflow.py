"""The analysis and report rules under Snakemake, on synthetic point records (no training): a copy of
the workflow, whose config/local.yaml is tests/configs/report-synthetic.yaml (fixed repeats, world
sizes 1 and 2, a 2-"node" point: the demo's own config changes with the demo), gets one record per
planned point (one of them failed, with markup in its reason) and Snakemake builds measurements.csv -> tables, model.json -> figures -> guidelines ->
expectations -> report.html. The records carry a one-entry loss curve, and the all-reduce points an
alpha-beta sweep. Then: `snakemake --report` carries the figures; a moved copy re-runs nothing; a
second study compared and expectations checked re-run only the report rules."""

import copy
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import workflow_runs
from workflow_runs import ROOT, copy_workflow

import plan
from kan.contract import record as records
from kan.contract.point import Point
from scaling.report.plots import FIGURES

pytestmark = pytest.mark.e2e


def record(pt: Point, status: str = "ok", reason: str | None = None) -> dict:
    """A record shaped like kan.train's, with throughput from an Amdahl-like model (serial part 10%)
    and, for all-reduce points, a sweep from an alpha-beta model (alpha 50 us, 1 GB/s bus)."""
    p, nodes = pt.placement.world_size, pt.placement.nodes
    rec = records.failure(pt.to_json(), status, reason) if status != "ok" else {
        "record_version": records.RECORD_VERSION, "point": pt.to_json(), "status": "ok", "reason": None,
        "finished_utc": "2026-12-01T00:00:00+00:00"}
    rec.update({
        "world_size": p, "num_nodes": nodes, "launcher": "torchrun", "device_type": "cpu", "backend": "gloo",
        "provenance": {"git_sha": "0123456789abcdef", "git_dirty": False, "python": "3.11", "torch": "2.13.0+cpu",
                       "cuda": None, "nccl": None, "platform": "test", "slurm": {"slurm_job_id": "77"}},
        "ranks": [{"hostname": f"host{i // pt.placement.gpus_per_node}", "device_name": "cpu"} for i in range(p)],
        "num_hosts": nodes,
    })
    if status != "ok":
        return rec
    if pt.experiment == "allreduce":
        sizes = []
        for n in pt.allreduce.sizes_bytes:
            t = 2 * (p - 1) * 50e-6 + 2 * (p - 1) / p * n * 1e-9
            sizes.append({"size_bytes": n, "time_s": t, "time_p10_s": t * 0.9, "time_p90_s": t * 1.1,
                          "algbw_gbps": n / t / 1e9, "busbw_gbps": n / t / 1e9 * 2 * (p - 1) / p, "iters": 20})
        rec["allreduce"] = {"dtype": "float32", "iters": 20, "warmup": 5, "backend": "gloo", "sizes": sizes}
        return rec
    hidden = pt.model.widths[1]
    tput = 20000.0 * (1 / (0.1 + 0.9 / p)) * (1 + 0.01 * pt.rep) * (64 / hidden) ** 0.5
    if nodes > 1:
        tput *= 0.8
    global_batch = pt.train.batch_per_rank * p
    step = global_batch / tput
    nbytes = hidden * 84 * 4
    rec.update({
        "timing": {"step_time_s": step, "nosync_step_time_s": step * (0.7 if p > 1 else 1.0),
                   "step_s": {"p10": step * 0.9, "p90": step * 1.1}, "train_time_s": 1.0, "epoch_time_s": 0.5,
                   "num_steps": 40},
        "throughput": {"samples_per_s": tput, "samples_per_s_per_rank": tput / p, "samples_per_s_wall": tput},
        "comm": {"exposed_s": step * (0.3 if p > 1 else 0.0), "exposed_pct": 30.0 if p > 1 else 0.0},
        "memory": {"kind": "cpu_peak_rss", "peak_bytes": int(2e8 + 1e6 * hidden),
                   "peak_gib": (2e8 + 1e6 * hidden) / 2**30, "baseline_rss_bytes": int(1.9e8),
                   "weights_bytes": nbytes, "grads_bytes": nbytes, "optimizer_bytes": 2 * nbytes},
        "model": {"num_params": hidden * 84},
        "loss": {"final_train": 0.1, "test": 0.1, "curve": [{"step": 40, "samples_seen": 40 * global_batch,
                                                              "elapsed_s": 1.0, "train_loss": 0.1}]},
        "replicas_identical": True,
    })
    return rec


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    wd = copy_workflow(tmp_path_factory.mktemp("wf"), extra=("pyproject.toml",))
    shutil.copy(ROOT / "tests/configs/report-synthetic.yaml", wd / "config/local.yaml")
    cfg = plan.load_config(wd / "config" / "local.yaml")
    points = plan.build_points(copy.deepcopy(cfg))
    training = [pid for pid, pt in points.items() if pt.experiment != "allreduce"]
    for pid, point in points.items():
        failed = pid == training[-1]
        rec = record(point, "failed" if failed else "ok", "<b>rank 0</b> exited" if failed else None)
        (wd / "results/local/points").mkdir(parents=True, exist_ok=True)
        (wd / "results/local/benchmarks").mkdir(parents=True, exist_ok=True)
        (wd / f"results/local/points/{pid}.json").write_text(json.dumps(rec))
        (wd / f"results/local/benchmarks/{pid}.tsv").write_text("s\th:m:s\n3.0\t0:00:03\n")
    return wd


ANALYSIS = list(plan.ANALYSIS_RULES)  # every rule but the measurement


def snakemake(cwd: Path, *args: str, timeout: int = 600) -> workflow_runs.Run:
    """The workflow's own config/local.yaml (no --configfile), the local profile."""
    return workflow_runs.snakemake(cwd, (), *args, timeout=timeout, check=False,
                                   env={"PYTHONDONTWRITEBYTECODE": "1"})


def run_analysis(cwd: Path, triggers: tuple[str, ...] = ("mtime",)) -> workflow_runs.Run:
    # the records exist and are never re-measured: only what is downstream of them runs
    return snakemake(cwd, "--rerun-triggers", *triggers, "--allowed-rules", *ANALYSIS, "--cores", "2")


@pytest.fixture(scope="module")
def built(workdir):
    res = run_analysis(workdir)
    assert res.returncode == 0, res.out[-4000:]
    return workdir


def test_workflow_builds_report(built):
    workdir = built
    html = (workdir / "reports/local/report.html").read_text()
    for sid in ("answer", "strong", "weak", "comm", "model_size", "model", "method", "run"):
        assert f'<section id="{sid}">' in html
    assert html.index("<section") == html.index('<section id="answer">') < html.index('<section id="strong">')
    assert "&lt;b&gt;rank 0&lt;/b&gt; exited" in html and "<b>rank 0</b>" not in html
    # every figure, loss curves and the all-reduce sweep included, one panel per image
    assert html.count('<img src="data:image/png;base64,') == len(FIGURES)
    assert "no loss curve recorded" not in html and "no all-reduce sweep measured" not in html
    assert "not enough world sizes to fit (have 2, need 3)" in html  # report-synthetic.yaml: world sizes 1 and 2
    # the answer: runs on one line with a tile for the failed point; the hardware in the appendix
    answer = re.search(r'<section id="answer">(.*?)</section>', html, re.S).group(1)
    assert re.search(r'class="badge fail" href="#run">1 failed', answer) and "backend gloo" in answer
    method = re.search(r'<section id="method">(.*?)</section>', html, re.S).group(1)
    assert "host0, host1" in method and "expectation" not in answer.lower()
    g = json.loads((workdir / "results/local/guidelines.json").read_text())["guidelines"]
    strong = next(x for x in g if x["id"].startswith("strong-efficiency"))
    # synthetic Amdahl 10% serial: efficiency at 2 ranks = 1 / (2 * (0.1 + 0.45)) = 90.9% -> 2 ranks;
    # 2 repeats of a point against min_repeats 3: inconclusive, one more repeat settles it
    assert strong["numbers"]["chosen_world_size"] == 2
    assert strong["numbers"]["efficiency_by_world_size"]["2"] == pytest.approx(1 / 1.1, rel=0.02)
    assert strong["status"] == "inconclusive" and "1 more repeat" in strong["settle"]
    inter = next(x for x in g if x["id"].startswith("inter-node"))
    assert inter["numbers"]["loss_pct"] == pytest.approx(20.0, abs=1.5)
    for name in ("strong", "weak", "comm", "model_size", "points", "allreduce_sizes"):
        assert (workdir / f"results/local/{name}.csv").stat().st_size > 0
    assert json.loads((workdir / "results/local/expectations.json").read_text())["expectations"] == []
    model = json.loads((workdir / "results/local/model.json").read_text())
    for m in model["models"].values():
        for entry in m["placements"].values():
            v = entry.get("validation")
            # validated, measured (one rank's run without DDP at the work's batch), or saying why not
            assert v is None or v.get("measured") or v["loo_mape_pct"] is not None or v["reason"]


def test_snakemake_report_zip_carries_the_figures(built, tmp_path):
    zip_path = tmp_path / "report.zip"
    res = snakemake(built, "--report", str(zip_path))
    assert res.returncode == 0, res.out[-4000:]
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        index = z.read("report/report.html").decode("utf-8", "replace")  # Snakemake's own page
    for fig in FIGURES:
        assert any(n.endswith(f"/{fig}.png") for n in names), f"{fig}.png not in the zip"
    for table in ("points.csv", "strong.csv", "weak.csv", "comm.csv", "model_size.csv", "expectations.json"):
        assert any(n.endswith(f"/{table}") for n in names), table
    assert any(n.startswith("report/data/") and n.endswith("/report.html") for n in names)  # kanscale's page
    # the workflow's description and the figures' captions (workflow/report/*.rst)
    assert "kanscale measures how training" in index and "bus bandwidth against buffer size" in index


def test_moved_checkout_reruns_nothing(built, tmp_path):
    moved = tmp_path / "elsewhere" / "kanscale copy"
    shutil.copytree(built, moved, symlinks=True)  # copy2: modification times kept
    res = snakemake(moved, "--dry-run")
    assert res.returncode == 0, res.out[-4000:]
    assert "Nothing to be done" in res.out, res.out[-4000:]


def _other_study(workdir: Path) -> None:
    """results/other: this study's results with 20% less throughput everywhere, named "other"."""
    src, dst = workdir / "results/local", workdir / "results/other"
    if dst.exists():
        return
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("points", "benchmarks", "logs", "plots"))
    m = pd.read_csv(dst / "measurements.csv")
    m["study"] = "other"
    m.to_csv(dst / "measurements.csv", index=False)
    for name in ("strong", "weak", "comm", "model_size"):
        t = pd.read_csv(dst / f"{name}.csv")
        for c in [c for c in t.columns if c.startswith(("samples_per_s_mean", "samples_per_s_ci", "samples_per_s_per_rank_"))]:
            t[c] = 0.8 * t[c]
        t.to_csv(dst / f"{name}.csv", index=False)
    prov = json.loads((dst / "provenance.json").read_text())
    (dst / "provenance.json").write_text(json.dumps({**prov, "device_names": ["NVIDIA A100 (other)"]}))


def test_compare_and_expectations(built):
    workdir = built
    _other_study(workdir)
    cfg = workdir / "config" / "local.yaml"
    original = cfg.read_text()
    cfg.write_text(original + "\nreport:\n  compare: [results/other]\n  expect:\n"
                   "    - {metric: strong_efficiency, world_size: 2, min: 0.5}\n"
                   "    - {metric: exposed_comm_pct, experiment: comm, max: 10}\n")
    try:
        # Snakemake's default triggers: a changed param re-runs the rules that take it
        res = run_analysis(workdir, ("mtime", "params", "input", "code"))
        assert res.returncode == 0, res.out[-4000:]
        stats = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\ntotal", res.out, re.S)
        ran = {line.split()[0] for line in stats.group(1).strip().splitlines()}
        # a report setting re-runs only what reads it, never the tables or the model
        assert ran == {"plot_figures", "evaluate_expectations", "render_report", "all"}, ran
        html = (workdir / "reports/local/report.html").read_text()
        compare = re.search(r'<section id="compare">(.*?)</section>', html, re.S).group(1)
        assert "<th>local</th><th>other</th><th>Δ other</th>" in compare and "-20.0%" in compare
        assert "NVIDIA A100 (other)" in compare
        result = json.loads((workdir / "results/local/expectations.json").read_text())
        assert [e["status"] for e in result["expectations"]] == ["pass", "fail"]
        check = [sys.executable, str(ROOT / "workflow/scripts/check_expectations.py"),
                 str(workdir / "results/local/expectations.json")]
        res = subprocess.run(check, capture_output=True, text=True)
        assert res.returncode == 1 and "FAIL fail" in res.stdout, res.stdout + res.stderr
        # a misspelt metric stops the workflow as it loads, listing the allowed ones
        cfg.write_text(original + "\nreport:\n  expect:\n    - {metric: strong_eficiency, min: 0.7}\n")
        res = snakemake(workdir, "--dry-run")
        out = res.out
        assert res.returncode != 0 and "report.expect[0].metric: 'strong_eficiency' is not a known metric" in out, out
        assert "allowed metrics: strong_efficiency" in out
        # a compared folder that is not there: the key and the folder in the error
        cfg.write_text(original + "\nreport:\n  compare: [results/nowhere]\n")
        res = run_analysis(workdir)
        assert res.returncode != 0
        assert "report.compare[0]: results/nowhere: no such folder" in res.out
    finally:
        cfg.write_text(original)
