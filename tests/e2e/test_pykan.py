"""impl: pykan through the normal workflow on CPU: the workflow makes pykan's own environment
(.venv-pykan, never .venv), pykan's points go through kanscale's loop, record, tables and report, and
the report compares the two implementations."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kan import record as records

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_pykan_study_runs_beside_kanscale(tmp_path):
    for name in ("Snakefile", "workflow", "config", "profiles"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, tmp_path / name)
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--profile", "profiles/local", "--configfile",
           "config/pykan.yaml", "--config", "repeats=1"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
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
    where = subprocess.run([sys.executable, "-c", "import kan.config, kan; print(kan.__file__)"], cwd="/",
                           capture_output=True, text=True, check=True).stdout
    assert str(ROOT / "kan") in where
