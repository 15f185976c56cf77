"""impl: pykan through the normal workflow on CPU: the workflow makes pykan's own environment
(.venv-pykan, never .venv), pykan's points go through kanscale's loop, record, tables and report, and
the report compares the two implementations."""

import subprocess
import sys

import pytest
from workflow_runs import ROOT, copy_workflow, snakemake

from kan.contract import record as records

pytestmark = pytest.mark.e2e


def test_pykan_study_runs_beside_kanscale(tmp_path):
    # config/pykan.yaml, one repeat, 20 bootstrap resamples instead of the schema's 500 (seconds of
    # the model's fit; no assertion reads a CI)
    copy_workflow(tmp_path, config={"report": {"bootstrap_samples": 20}})
    snakemake(tmp_path, ["config/pykan.yaml", "study.yaml"], "--config", "repeats=1", timeout=1500)
    assert (tmp_path / ".venv-pykan" / ".installed").exists()
    recs = [records.read(p, p.stem) for p in (tmp_path / "results" / "pykan" / "points").glob("*.json")]
    pykan = [x for x in recs if x["point"].get("model", {}).get("impl") == "pykan"]
    assert len(pykan) == 2 and all(x["status"] == "ok" for x in pykan), [x.get("reason") for x in pykan]
    # pykan's own parameter count for [2, 32, 1], grid 10: the seed paper's 2,726 (frozen ones included)
    assert {x["model"]["num_params"] for x in pykan} == {2726}
    assert all("pykan_train.py" in x["provenance"]["argv"][1] for x in pykan)
    assert {x["world_size"] for x in pykan} == {1, 2} and all(x["replicas_identical"] for x in pykan)
    html = (tmp_path / "reports" / "pykan" / "report.html").read_text()
    section = html[html.index('<section id="operator">'):html.index('<section id="method">')]
    assert "pykan [2,32,1]" in section and "kan-bspline [2,32,1]" in section
    # kanscale's own environment never gets pykan: there `kan` is kanscale's package
    where = subprocess.run([sys.executable, "-c", "import kan.contract.point, kan; print(kan.__file__)"], cwd="/",
                           capture_output=True, text=True, check=True).stdout
    assert str(ROOT / "kan") in where
