"""The whole local study on a tiny config through real Snakemake, then the incremental cases:
nothing changed -> nothing runs; one record deleted -> only that point (and what depends on it);
a width added -> only the new points; a failed record -> only that point re-runs."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def snakemake(workdir: Path, configfile: Path, *extra: str) -> str:
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--configfile", str(configfile),
           "--cores", "2", "--resources", "measure_slots=1", "--keep-going", *extra]
    r = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    return out


def job_counts(log: str) -> dict[str, int]:
    """Snakemake's 'Job stats' table -> {rule: count} ({} when nothing ran)."""
    m = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\ntotal", log, re.S)
    if not m:
        return {}
    return {rule: int(n) for rule, n in (ln.split() for ln in m.group(1).strip().splitlines())}


def measured(log: str) -> set[str]:
    return set(re.findall(r"Job \d+: measure (\S+)", log))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = tmp_path_factory.mktemp("study")
    cfg = work / "tiny.yaml"
    shutil.copy(ROOT / "tests" / "configs" / "tiny.yaml", cfg)
    log = snakemake(work, cfg)
    return work, cfg, log


def records(work: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (work / "results" / "tiny" / "points").glob("*.json")}


def test_full_study_produces_records_tables_and_report(study):
    work, cfg, log = study
    recs = records(work)
    assert len(recs) == 8, sorted(recs)
    assert job_counts(log)["measure_point"] == 8
    assert all(r["status"] == "ok" for r in recs.values()), {k: r["reason"] for k, r in recs.items()}
    two_node = [r for r in recs.values() if r["point"]["nodes"] == 2]
    assert len(two_node) == 1 and two_node[0]["num_nodes"] == 2 and two_node[0]["world_size"] == 2
    import pandas as pd

    m = pd.read_csv(work / "results" / "tiny" / "measurements.csv")
    assert len(m) == 8 and set(m["status"]) == {"ok"}
    assert set(m["experiment"]) == {"strong", "weak", "comm", "model_size"}
    assert m["job_wall_s"].notna().all() and (m["overhead_s"] > 0).all()
    report = work / "reports" / "tiny" / "report.html"
    html = report.read_text()
    for section in ("strong", "weak", "comm", "model_size", "guidelines"):
        assert f'id="{section}"' in html, section
    guidelines = json.loads((work / "results" / "tiny" / "guidelines.json").read_text())["guidelines"]
    assert any(g["status"] == "advice" for g in guidelines)  # at least one computed guideline


def test_nothing_changed_runs_nothing(study):
    work, cfg, _ = study
    log = snakemake(work, cfg)
    assert job_counts(log) == {}, log[-3000:]
    assert "Nothing to be done" in log


def test_deleted_record_reruns_only_that_point(study):
    work, cfg, _ = study
    victim = sorted(records(work))[0]
    (work / "results" / "tiny" / "points" / f"{victim}.json").unlink()
    log = snakemake(work, cfg)
    counts = job_counts(log)
    assert counts.get("measure_point") == 1 and measured(log) == {victim}, counts
    assert counts.get("collect_measurements") == 1


def test_failed_record_reruns_only_that_point(study):
    work, cfg, _ = study
    recs = records(work)
    victim = sorted(recs)[-1]
    path = work / "results" / "tiny" / "points" / f"{victim}.json"
    st = path.stat()
    failed = {**recs[victim], "status": "oom", "reason": "simulated", "finished_utc": "2026-01-01T00:00:00"}
    path.write_text(json.dumps(failed))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: only the status says "run me again"
    log = snakemake(work, cfg)
    assert measured(log) == {victim}, log[-3000:]
    assert json.loads(path.read_text())["status"] == "ok"
    assert job_counts(snakemake(work, cfg)) == {}  # and then it is done for good


def test_added_width_runs_only_new_points(study):
    work, cfg, _ = study
    before = set(records(work))
    data = yaml.safe_load(cfg.read_text())
    data["experiments"]["model_size"]["hidden_widths"].append(12)
    cfg2 = work / "tiny-wider.yaml"
    cfg2.write_text(yaml.safe_dump(data))
    log = snakemake(work, cfg2)
    new = set(records(work)) - before
    assert len(new) == 1 and "2x12x1" in next(iter(new))
    assert measured(log) == new, log[-3000:]
