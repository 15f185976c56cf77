"""The whole local study on a tiny config, started as README says (`make demo`, which makes .venv
inside the checkout), from a checkout whose path holds a space and a `$(...)`; then, with that
.venv's snakemake, what an operator does to it: `make status` and `make report` while it runs ->
what is done and what is missing, the study undisturbed; nothing changed -> nothing runs; a record
deleted, failed, truncated, emptied or hand-written, and a width added -> exactly those points run
(one run); kill -9 of snakemake mid-point -> no orphan, and after docs/running.md's --unlock the same
command runs the point again; SIGTERM of that run -> the point is cancelled and the report says so;
the next run measures it once, with no concurrent duplicate."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from waiting import PROGRESS, PROGRESS_LINE, wait_for
from workflow_runs import job_counts, measured

import workflow_runs
from kan.contract import record as records

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
STUDY = "tiny"


def _in_checkout(workdir: Path) -> dict:
    # the documented local command with the checkout's own .venv (made by `make demo`) and the
    # profile by its absolute path (keep-going, rerun-incomplete, one point at a time)
    return {"profile": None, "python": workdir / ".venv" / "bin" / "python"}


def command(workdir: Path, configfile: Path, *extra: str) -> list[str]:
    return workflow_runs.command(workdir, [configfile], "--profile", str(workdir / "profiles" / "local"), *extra,
                                 **_in_checkout(workdir))


def copy_checkout(dest: Path) -> None:
    """What a clone of this checkout holds now: tracked files and untracked ones git does not ignore."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def snakemake(workdir: Path, configfile: Path, *extra: str) -> str:
    return workflow_runs.snakemake(workdir, [configfile], "--profile", str(workdir / "profiles" / "local"), *extra,
                                   **_in_checkout(workdir)).out


def seed_venv(venv: Path) -> None:
    """An empty .venv in the odd path that sees the test run's own site-packages after its own (a
    .pth line): `make demo` still runs its venv and `pip install -e .[test]` steps there, in that
    path, but pip finds the locked dependencies installed and adds only this checkout's editable
    kanscale, instead of unpacking torch again (~90 s of CI). A from-scratch .venv is what `make
    test` itself makes on every CI run."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    own = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    (Path(own) / "test-shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    # a checkout path with a space and a command substitution: every shell path must stay quoted,
    # .venv's own python included (Snakemake's `script:` runs it unquoted: snakemake issue 2645)
    work = tmp_path_factory.mktemp("study") / "kan scale $(touch PWNED)"
    work.mkdir()
    copy_checkout(work)
    cfg = work / "tiny.yaml"
    shutil.copy(ROOT / "tests" / "configs" / "tiny.yaml", cfg)
    seed_venv(work / ".venv")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    out_path = work.parent / "demo.out"
    with open(out_path, "w") as out:
        demo = subprocess.Popen(["make", "demo", "CONFIG=tiny.yaml"], cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                text=True, env=env)
        beside = _status_and_report_beside(work, demo, env)
        rc = demo.wait(timeout=1800)
    log = out_path.read_text()
    assert rc == 0, log[-6000:]  # the study was not disturbed by the commands beside it
    printed = re.findall(r"^Report: (.*)$", log, re.M)
    assert printed == [str(work / "reports" / STUDY / "report.html")], printed
    assert Path(printed[0]).is_file()
    return work, cfg, log, beside


def _status_and_report_beside(work: Path, demo: subprocess.Popen, env: dict) -> dict:
    """README's `make status` and `make report` while `make demo` runs in the same folder (neither
    takes snakemake's lock or runs a point), once its first record exists: {status's output, the
    report page it made}. (Once a test of its own, with a study of its own: tests/e2e/test_study_commands.py.)"""
    end = time.monotonic() + 900
    while time.monotonic() < end and demo.poll() is None and not list(points_dir(work).glob("*.json")):
        time.sleep(0.2)
    assert demo.poll() is None, "the study ended before the commands could run beside it"
    runs = {}
    for name in ("status", "report"):
        r = subprocess.run(["make", "--no-print-directory", name, "CONFIG=tiny.yaml"], cwd=work, capture_output=True,
                           text=True, timeout=600, env=env)
        assert r.returncode == 0, (name, r.stdout[-3000:], r.stderr[-3000:])
        runs[name] = r.stdout
    return {"status": runs["status"], "report_html": (work / "reports" / STUDY / "report.html").read_text()}


def points_dir(work: Path) -> Path:
    return work / "results" / STUDY / "points"


def records_of(work: Path) -> dict[str, dict]:
    return {p.stem: records.read(p, p.stem) for p in points_dir(work).glob("*.json")}


def test_full_study_produces_records_tables_and_report(study):
    work, cfg, log, _ = study
    assert not list(work.parent.rglob("PWNED")) and not list(Path.cwd().glob("PWNED"))
    assert (work / ".venv" / "bin" / "python").exists()  # the venv lives inside the odd path
    recs = records_of(work)
    # strong 1x1, 1x2 + non-DDP; weak 1x1, 1x2 + non-DDP; comm 1x2, 2x1; model_size 2 widths; allreduce 1x2, 2x1
    assert len(recs) == 12, sorted(recs)
    assert job_counts(log)["measure_point"] == 12
    assert all(r["status"] == "ok" for r in recs.values()), {k: r["reason"] for k, r in recs.items()}
    two_node = [r for r in recs.values() if r["point"]["placement"]["nodes"] == 2 and "timing" in r]
    assert len(two_node) == 1 and two_node[0]["num_nodes"] == 2 and two_node[0]["world_size"] == 2
    import pandas as pd

    m = pd.read_csv(work / "results" / STUDY / "measurements.csv")
    assert len(m) == 12 and set(m["status"]) == {"ok"}
    assert set(m["experiment"]) == {"strong", "weak", "comm", "model_size", "allreduce"}
    assert set(m.loc[m["nodes"] == 2, "placement_class"]) == {"simulated inter-node (one host)"}
    # CPU ranks on one node are forked by the warm-start server; torchrun agents start fresh interpreters
    assert set(m.loc[m["nodes"] == 1, "started"]) == {"warm"} and set(m.loc[m["nodes"] == 2, "started"]) == {"exec"}
    training = m[m["experiment"] != "allreduce"]
    assert training["job_wall_s"].notna().all() and (training["overhead_s"] > 0).all()
    assert len(pd.read_csv(work / "results" / STUDY / "loss_curves.csv")) > 0
    sweep = pd.read_csv(work / "results" / STUDY / "allreduce.csv")
    assert len(sweep) == 2 * 8  # 2 topologies x 8 sizes
    assert (sweep["corun_slowdown"] > 0).all()  # each sweep point measured its ranks' co-run slowdown
    html = (work / "reports" / STUDY / "report.html").read_text()
    for section in ("answer", "strong", "weak", "comm", "model_size", "anatomy"):
        assert f'id="{section}"' in html, section
    # what bounds each training step, and which B-spline kernels ran (kan/probes/anatomy.py, kan/probes/kernel_choice.py)
    trained = [r for r in recs.values() if r["point"]["experiment"] != "allreduce"]
    assert all(r["anatomy"]["bound"] in ("dispatch", "compute", "communication") for r in trained)
    assert {r["kernels"]["path"] for r in trained} <= {"numba", "eager"} and all(r["kernels"]["why"] for r in trained)
    assert training["kernel_path"].notna().all() and set(training["step_kind"]) == {"eager"}
    assert re.search(r'id="table-anatomy">.*?<td>(numba|eager)</td>', html, re.S)
    # no launcher outlives its point, no claim is left behind
    assert not list((work / "results" / STUDY / "attempts").glob("*/claim.json"))


def test_status_and_report_while_the_study_runs(study):
    """make status / make report beside the running demo: some points done, some not yet; the
    partial report says what is missing; the demo ran on undisturbed (its exit 0: the fixture)."""
    _, _, _, beside = study
    status = beside["status"]
    assert " ok  " in status and ("not submitted" in status or "running" in status), status
    assert "missing" in beside["report_html"] or "running" in beside["report_html"]


def test_nothing_changed_runs_nothing(study):
    work, cfg, _, _ = study
    log = snakemake(work, cfg)
    assert job_counts(log) == {}, log[-3000:]
    assert "Nothing to be done" in log


def test_damaged_records_and_an_added_width_rerun_exactly_those_points(study):
    """What an operator (or a crash) does to records, and a width added to the config, in one run:
    each damaged point runs once more, the new width's point runs, nothing else."""
    work, cfg, _, _ = study
    recs = records_of(work)
    # one-node training points: warm-started, seconds each (a 2-node point starts fresh interpreters)
    names = [n for n in sorted(recs) if recs[n]["point"]["experiment"] != "allreduce"
             and recs[n]["point"]["placement"]["nodes"] == 1]
    damage = dict(zip(names, ["delete", "failed", "truncate", "empty", "hand-written ok", "another point's"]))
    for victim, how in damage.items():
        path = points_dir(work) / f"{victim}.json"
        st = path.stat()
        text = path.read_text()
        if how == "delete":
            path.unlink()
            continue
        if how == "failed":
            rec = records.failure(recs[victim]["point"], "oom", "simulated", launch={"attempt": "x", "retry_token": ""})
            records.write(path, rec)
        else:
            path.write_text({"truncate": text[: len(text) // 2], "empty": "", "hand-written ok": '{"status": "ok"}',
                             "another point's": (points_dir(work) / f"{names[-1]}.json").read_text()}[how])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: only the content says "run me again"
    before = set(recs)
    data = yaml.safe_load(cfg.read_text())
    data["experiments"]["model_size"]["hidden_widths"].append(12)
    cfg2 = work / "tiny-wider.yaml"
    cfg2.write_text(yaml.safe_dump(data))
    log = snakemake(work, cfg2)
    counts = job_counts(log)
    new = set(records_of(work)) - before
    assert len(new) == 1 and "2x12x1" in next(iter(new))
    assert measured(log) == set(damage) | new, (sorted(measured(log)), log[-3000:])
    assert counts.get("collect_measurements") == 1
    for victim in damage:
        assert records.read(points_dir(work) / f"{victim}.json", victim)["status"] == "ok"
    assert job_counts(snakemake(work, cfg2)) == {}  # and then they are done for good


def _point_processes(work: Path) -> list[int]:
    """pids of launchers and ranks working in this study folder (their working directory)."""
    out = subprocess.run(["pgrep", "-f", "launch_point.py|kan.train"], capture_output=True, text=True).stdout
    pids = []
    for pid in map(int, out.split()):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")) == work:
                pids.append(pid)
        except OSError:
            pass
    return pids


def _long_study(work: Path, cfg: Path, name: str, epochs: int) -> Path:
    """One 1x2 strong point that trains long enough to be hit mid-run (about 10 s on 2 cores)."""
    data = yaml.safe_load(cfg.read_text())
    data["training"]["max_steps"] = 0
    data["training"]["epochs"] = epochs
    data["experiments"] = {"strong": {**data["experiments"]["strong"], "non_ddp_baseline": False,
                                      "topologies": [{"nodes": 1, "gpus_per_node": 2}]},
                           "allreduce": {"enabled": False}}
    out = work / name
    out.write_text(yaml.safe_dump(data))
    return out


def _start_and_wait_for_the_point(work: Path, cfg: Path) -> subprocess.Popen:
    """snakemake on cfg, once its point's log (rewritten by each run) holds a progress line: the
    ranks are in the training loop, seconds from its end."""
    logs = work / "results" / STUDY / "logs"
    before = {f: f.read_bytes() for f in logs.glob("*.log")}

    def training() -> bool:
        return any(PROGRESS_LINE in f.read_text() for f in logs.glob("*.log") if f.read_bytes() != before.get(f))

    sm = subprocess.Popen(command(work, cfg), cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env={**os.environ, **PROGRESS})
    wait_for(training, 180, "the point's progress line")
    assert _point_processes(work), "the point's processes are not in its folder"
    return sm


def test_kill_9_then_unlock_rerun_then_sigterm_cancels_and_the_next_run_measures_once(study):
    """kill -9 of snakemake mid-point: no orphan; the same command is refused until docs/running.md's
    --unlock. That command, hit with SIGTERM (what a scheduler or `kill` sends) mid-point: the point
    is cancelled and the report says so. The next run measures it once: one ok attempt in all."""
    work, cfg, _, _ = study
    long = _long_study(work, cfg, "tiny-long.yaml", epochs=120)
    sm = _start_and_wait_for_the_point(work, long)
    sm.send_signal(signal.SIGKILL)
    sm.wait()
    wait_for(lambda: not _point_processes(work), 15, "no orphan of snakemake's kill -9 (parent-death signal)")
    # the documented recovery: unlock, then the same command
    rerun = command(work, long)
    locked = subprocess.run(rerun, cwd=work, capture_output=True, text=True, timeout=600)
    assert locked.returncode != 0 and "unlock" in (locked.stdout + locked.stderr).lower()
    subprocess.run([*rerun, "--unlock"], cwd=work, check=True, capture_output=True, timeout=120)

    sm = _start_and_wait_for_the_point(work, long)
    sm.send_signal(signal.SIGTERM)
    sm.wait(timeout=300)
    assert not _point_processes(work)
    recs = {k: r for k, r in records_of(work).items() if r["status"] != "ok"}
    assert [r["status"] for r in recs.values()] == ["cancelled"], recs
    report = work / "reports" / STUDY / "report.html"
    (pid,) = recs
    assert report.stat().st_mtime >= (points_dir(work) / f"{pid}.json").stat().st_mtime  # not the old report
    assert "cancelled" in report.read_text()

    log = snakemake(work, long)  # the next run measures the cancelled point
    assert measured(log) == {pid} and records.read(points_dir(work) / f"{pid}.json", pid)["status"] == "ok"
    outcomes = [json.loads(p.read_text()) for p in (work / "results" / STUDY / "attempts" / pid).glob("*/outcome.json")]
    # the killed attempt, the SIGTERM'd one, then exactly one that measured
    assert sorted(o["status"] for o in outcomes) == ["cancelled", "cancelled", "ok"], outcomes
    assert job_counts(snakemake(work, long)) == {}
