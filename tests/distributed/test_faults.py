"""Faults caused as an operator causes them, on real processes (the launcher, kan.train, gloo):
SIGKILL of a rank, SIGTERM of the launcher, SIGKILL of the launcher, death of the snakemake that
started it, a second launcher of the same point, a bad command-line value, CUDA on a CPU machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import PROGRESS, PROGRESS_LINE, wait_for

from kan.contract import record as records
from kan.contract.point import LaunchSettings, ModelConfig, Placement, Point, TrainConfig

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "workflow" / "scripts" / "launch_point.py"


def long_point(gpus: int = 1, rep: int = 0, device: str = "cpu") -> Point:
    """A point that trains for a minute or more on 2 cores: time to hit it mid-run."""
    return Point(study="f", rep=rep, model=ModelConfig(widths=(2, 64, 1)),
                 train=TrainConfig(samples=20000, epochs=50, batch_per_rank=64, warmup_steps=2),
                 placement=Placement(device=device, gpus_per_node=gpus))


def short_point(**place) -> Point:
    return Point(study="f", model=ModelConfig(widths=(2, 8, 1), grid_size=5),
                 train=TrainConfig(samples=1024, epochs=1, batch_per_rank=64, warmup_steps=2),
                 placement=Placement(**{"device": "cpu", **place}))


def start(tmp: Path, p: Point, *extra: str, env: dict | None = None) -> tuple[subprocess.Popen, Path, Path]:
    """The launcher on point p: (its process, the record's path, its log: the trainers' output too)."""
    out = tmp / "results" / "f" / "points" / f"{p.id}.json"
    d = p.to_json()
    d.pop("limits")
    cmd = [sys.executable, str(LAUNCHER), "--point", json.dumps(d),
           "--launch", json.dumps(LaunchSettings(runtime_min=5, pg_timeout_s=30).to_json()), "--out", str(out), *extra]
    log = tmp / f"{p.id}.{time.monotonic_ns()}.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                env={**os.environ, **PROGRESS, **(env or {})})
    return proc, out, log


def ranks_of(p: Point) -> list[int]:
    """pids of this point's kan.train processes."""
    out = subprocess.run(["pgrep", "-f", f"kan.train .*--out=.*{p.id}"], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def wait_training(p: Point, log: Path, n: int = 1) -> list[int]:
    """pids of p's n ranks, once its log holds a progress line: past imports and the process group,
    inside the training loop (the log's writer started with PROGRESS in its environment)."""
    wait_for(lambda: PROGRESS_LINE in log.read_text(), 120, f"a progress line of {p.id} in {log}")
    return wait_for(lambda: len(ranks_of(p)) >= n and ranks_of(p), 30, f"{n} rank(s) of {p.id}")


@pytest.mark.parametrize("gpus", [1, 2])
def test_sigkill_of_a_rank_is_a_killed_record_naming_the_signal(tmp_path, gpus):
    p = long_point(gpus)
    proc, out, log = start(tmp_path, p)
    victim = wait_training(p, log, gpus)[-1]
    os.kill(victim, signal.SIGKILL)
    assert proc.wait(timeout=60) == 0
    rec = records.read(out, p.id)
    assert rec["status"] == "killed" and "signal 9 (SIGKILL)" in rec["reason"], rec["reason"]
    assert not ranks_of(p)


def test_sigterm_of_the_launcher_is_a_cancelled_record_and_ends_the_tree(tmp_path):
    p = long_point(2)
    proc, out, log = start(tmp_path, p)
    wait_training(p, log, 2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0  # the launcher ends after its tree
    rec = records.read(out, p.id)
    assert rec["status"] == "cancelled" and "SIGTERM" in rec["reason"]
    assert not ranks_of(p)


def test_sigkill_of_the_launcher_leaves_no_rank_and_no_record(tmp_path):
    p = long_point(2)
    proc, out, log = start(tmp_path, p)
    wait_training(p, log, 2)
    proc.kill()
    proc.wait()
    wait_for(lambda: not ranks_of(p), 10, "the ranks to die with their launcher (parent-death signal)")
    assert not out.exists()
    # the claim it left is stale: the next attempt takes the point over and measures it
    claim = out.parent.parent / "attempts" / p.id / "claim.json"
    assert claim.exists()


def test_death_of_the_watched_process_stops_the_point_within_seconds(tmp_path):
    p = long_point(1)
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    proc, out, log = start(tmp_path, p, "--watch-pid", str(watched.pid))
    wait_training(p, log)
    watched.kill()  # kill -9 of snakemake
    watched.wait()
    proc.wait(timeout=10)  # within seconds: the launcher ends after its tree
    assert not ranks_of(p)
    assert not out.exists()  # nothing half-measured is committed
    outcome = json.loads(next((out.parent.parent / "attempts" / p.id).glob("*/outcome.json")).read_text())
    assert outcome["status"] == "cancelled" and "died" in outcome["reason"]


def test_a_second_launcher_waits_and_never_duplicates(tmp_path):
    slow = long_point(1)
    # the same point id twice: hold the claim with a long attempt of `slow`, then start a second one
    first, out, first_log = start(tmp_path, slow)
    wait_training(slow, first_log)
    second, _, second_log = start(tmp_path, slow)
    wait_for(lambda: "is being measured by a live earlier" in second_log.read_text(), 120,
             "the second launcher to find the first one's claim")
    assert len(ranks_of(slow)) == 1  # the second one waits: no concurrent duplicate
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0
    # the first attempt ended (cancelled); the second now measures the point itself
    wait_for(lambda: len(ranks_of(slow)) == 1, 60, "the second attempt to start")
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=30)
    assert records.read(out, slow.id)["status"] == "cancelled"
    assert len(list((out.parent.parent / "attempts" / slow.id).glob("*/outcome.json"))) == 2


def test_bad_command_line_value_names_the_flag(tmp_path):
    p = short_point()
    proc, out, log = start(tmp_path, p, env={"KANSCALE_FAULT": "bad-flag"})
    assert proc.wait(timeout=120) == 0
    rec = records.read(out, p.id)
    assert rec["status"] == "failed" and "argument --grid-size: must be >= 1" in rec["reason"], rec["reason"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("gpus", [1, 2])
def test_cuda_requested_on_a_cpu_machine_names_the_missing_device(tmp_path, gpus):
    p = short_point(device="cuda", gpus_per_node=gpus)
    proc, out, log = start(tmp_path, p)
    assert proc.wait(timeout=120) == 0
    rec = records.read(out, p.id)
    assert rec["status"] == "failed" and "no usable CUDA device" in rec["reason"], rec["reason"]
