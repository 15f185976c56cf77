"""Snakemake's own tools see kanscale: --lint finds only the two kinds docs/developing.md explains, snakefmt has
nothing to change, and the workflow runs as a module of another workflow in another folder."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_runs import snakemake, tiny

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# docs/developing.md "Snakemake's own tools": why each remaining lint is there on purpose
ALLOWED_LINTS = ("Specify a conda environment or container for each rule.",)
ALLOWED_GLOBALS = {"PYTHON", "LAUNCHER", "PYKAN_ENV", "LAUNCH_JSON", "LIMITS_JSON", "SNAKEMAKE_PID", "SCRIPTS_DIR",
                   "STUDY_CONFIG_JSON"}


def lints(text: str) -> list[tuple[str, str]]:
    """(where, title) of every finding in --lint's text output ("Lints for rule X (...):", "    * title:").
    (Snakemake 9's CLI ignores `--lint json`.)"""
    out, where = [], None
    for line in text.splitlines():
        m = re.match(r"Lints for (.*?) \(", line)
        if m:
            where = m.group(1)
        m = re.match(r"    \* (.*):$", line)
        if m:
            out.append((where, m.group(1)))
    return out


def test_lint_finds_only_what_readme_explains():
    r = subprocess.run([str(BIN / "snakemake"), "--lint", "--configfile", "config/local.yaml"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    found = lints(r.stdout + r.stderr)
    assert found, "lint reported nothing: the allow-list below is out of date"
    unexpected = []
    for rule, title in found:
        if title in ALLOWED_LINTS:
            continue
        if title.startswith("Shell command directly uses variable ") and \
                title.split("variable ")[1].split(" ")[0] in ALLOWED_GLOBALS:
            continue
        unexpected.append((rule, title))
    assert not unexpected, unexpected


def test_snakefmt_has_nothing_to_change():
    r = subprocess.run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_workflow_runs_as_a_module_of_another_workflow(tmp_path):
    cfg = tiny(strong={"non_ddp_baseline": False}, allreduce={"enabled": False})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "Snakefile").write_text(f'''configfile: "tiny.yaml"


module kanscale:
    snakefile:
        "{ROOT / "Snakefile"}"
    config:
        config


use rule * from kanscale as kanscale_*


rule all:
    default_target: True
    input:
        rules.kanscale_all.input,
''')
    # another workflow's own Snakefile and config: no profile, no --configfile
    snakemake(tmp_path, [], "--cores", "2", "--resources", "measure_slots=1", profile=None)
    points = sorted(p.name for p in (tmp_path / "results" / "tiny" / "points").glob("*.json"))
    assert len(points) == 2, points
    assert (tmp_path / "reports" / "tiny" / "report.html").stat().st_size > 0
    shutil.rmtree(tmp_path / ".snakemake", ignore_errors=True)
