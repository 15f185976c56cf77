"""Your own KAN through the local workflow: kanscale's KAN, a file factory (the shipped
example), the PyPI package inkan through one, and a deliberately broken module run as one study; each
gets its two-rank DDP-readiness point, results/<study>/ddp_readiness.json holds the verdicts, and the
report shows the implementations side by side with them. The broken module's training point fails
under DDP (its unused parameter) and that failure is data; its guidelines say what they rest on."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import workflow_runs
from model_names import stray_names
from report_noise import findings
from workflow_runs import copy_workflow

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _config() -> dict:
    return {
        "study": "own", "device": "cpu", "cpu_threads_per_rank": 1, "repeats": 1,
        # relative to this config file (study.yaml in the work folder's root)
        "model": {"impl": ["kanscale", "examples/tiny_kan.py:build", "examples/inkan_kan.py:build",
                           "models/broken_kan.py:drifting"], "widths": [2, 8, 1], "grid_size": 5},
        "training": {"epochs": 1, "warmup_steps": 2, "lr": 0.01},
        "experiments": {
            "strong": {"samples": 2048, "global_batch": 64, "non_ddp_baseline": False,
                       "topologies": [{"nodes": 1, "gpus_per_node": 1}]},
            "allreduce": {"enabled": False},
            "readiness": {"steps": 6},
        },
        "report": {"bootstrap_samples": 20, "reference": "none"},
        "resources": {"runtime_min": 5, "mem_mb_per_rank": 1000, "cpus_per_rank": 1},
    }


def test_kanscale_a_file_factory_inkan_and_a_broken_module_side_by_side_with_readiness(tmp_path):
    work = copy_workflow(tmp_path / "own kan", config=_config(), extra=("examples",))  # a path with a space
    (work / "models").mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "broken_kan.py", work / "models" / "broken_kan.py")
    workflow_runs.snakemake(work)
    recs = workflow_runs.records(work, "own")
    ready = {pid: r for pid, r in recs.items() if pid.startswith("readiness-")}
    trained = {pid: r for pid, r in recs.items() if pid.startswith("strong-")}
    assert len(ready) == 4 and len(trained) == 4
    assert all(r["status"] == "ok" and r["world_size"] == 2 for r in ready.values())
    status = {r["point"]["model"]["impl"]: r for r in trained.values()}
    assert all(status[i]["status"] == "ok" for i in ("kanscale", "examples/tiny_kan.py:build",
                                                      "examples/inkan_kan.py:build"))
    # DDP refuses a parameter that gets no gradient: the broken module's point failed, with DDP's reason
    broken = status["models/broken_kan.py:drifting"]
    assert broken["status"] == "failed" and "reduction" in broken["reason"], broken.get("reason")
    verdicts = json.loads((work / "results/own/ddp_readiness.json").read_text())
    good = ("kan-bspline [2,8,1]", "tiny_kan.py:build [2,8,1]", "inkan_kan.py:build [2,8,1]")
    assert set(verdicts) == {*good, "broken_kan.py:drifting [2,8,1]"}
    for name in good:
        assert [c["pass"] for c in verdicts[name]] == [True] * 5, verdicts[name]
    assert stray_names(work / "results/own") == {}  # every file names each model as the tables do
    bad = {c["check"]: c for c in verdicts["broken_kan.py:drifting [2,8,1]"]}
    assert bad["unused_parameters"]["pass"] is False and "forgotten" in bad["unused_parameters"]["detail"]
    assert bad["buffers_in_sync"]["pass"] is False and "grid" in bad["buffers_in_sync"]["detail"]
    html = (work / "reports/own/report.html").read_text()
    assert not findings(html, gpu=False), "\n".join(findings(html, gpu=False)[:20])  # CPU ranks: no GPU-hours
    section = html[html.index('<section id="readiness">'):]
    section = section[:section.index("</section>")]
    for name in good:
        assert f"<h3>{name}: <span class=\"badge pass\">ready</span></h3>" in section, section[:3000]
    assert "cuda_graph_capture" in section  # the capture check's row, beside the DDP checks
    assert re.search(r"broken_kan.py:drifting \[2,8,1\]: <span class=\"badge fail\">not ready: unused_parameters, "
                     r"buffers_in_sync</span>", section), section[:3000]
    # `make report` re-renders a finished study from its records: the readiness verdicts (a step outside
    # the analysis made them) stay, as do the critical batch and the tuned rate where a study has them
    again = subprocess.run([sys.executable, "workflow/scripts/study.py", "report", "study.yaml"], cwd=work,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    rerendered = (work / "reports/own/report.html").read_text()
    assert section in rerendered
    # the strong table lists the working implementations side by side
    strong = html[html.index('<section id="strong">'):]
    for name in ("kan-bspline [2,8,1]", "tiny_kan.py:build [2,8,1]", "inkan_kan.py:build [2,8,1]"):
        assert name in strong
