"""Run the workflow the way the end-to-end and Slurm tests do: a copy of it in a folder of the test's
own (the checkout's results/ are never touched), a config written there, and snakemake with the
local profile or the test Slurm profile (profiles/slurm + tests/slurm/profile).

    work = copy_workflow(tmp / "w", config=cfg)          # cfg: a dict, a path, or None
    out = snakemake(work, ["study.yaml"]).out            # asserts exit 0 unless check=False
    measured(out), job_counts(out), records(work, "tiny")
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# what a study needs of the checkout: the workflow itself, its configs and profiles
WORKFLOW = ("Snakefile", "workflow", "config", "profiles")
PROFILES = {
    "local": ["--profile", "profiles/local"],
    # the second profile holds only what the local Slurm of tests/slurm/slurm-local.sh needs;
    # --verbose prints the plugin's `sbatch call:` lines the Slurm tests read
    "slurm": ["--profile", "profiles/slurm", "--profile", "tests/slurm/profile", "--verbose"],
    None: [],
}
CONFIG_NAME = "study.yaml"


def copy_workflow(dest: Path, config: dict | Path | None = None, extra: tuple[str, ...] = ()) -> Path:
    """`dest` (made if missing) holding the workflow and the checkout's `extra` paths; `config`, when
    given, written as dest/study.yaml (CONFIG_NAME). Modification times are kept (copy2)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in (*WORKFLOW, *extra):
        src, dst = ROOT / name, dest / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    if isinstance(config, dict):
        (dest / CONFIG_NAME).write_text(yaml.safe_dump(config))
    elif config is not None:
        shutil.copy(config, dest / CONFIG_NAME)
    return dest


def tiny(**experiments) -> dict:
    """tests/configs/tiny.yaml with `experiments` replaced where given (a name: None drops it)."""
    cfg = yaml.safe_load((ROOT / "tests" / "configs" / "tiny.yaml").read_text())
    if experiments:
        base = cfg["experiments"]
        cfg["experiments"] = {name: ({**base.get(name, {}), **over} if isinstance(over, dict) else base[name])
                              for name, over in experiments.items() if over is not None}
    return cfg


def command(work: Path, configfiles=(CONFIG_NAME,), *args: str, targets=(), profile: str | None = "local",
            python: str | Path = sys.executable) -> list[str]:
    """snakemake's command line: targets first (--configfile takes every word after it), the
    config files last."""
    configs = ["--configfile", *map(str, configfiles)] if configfiles else []
    return [str(python), "-m", "snakemake", *targets, *PROFILES[profile], *args, *configs]


@dataclass
class Run:
    returncode: int
    out: str  # stdout + stderr
    wall_s: float


def snakemake(work: Path, configfiles=(CONFIG_NAME,), *args: str, targets=(), profile: str | None = "local",
              python: str | Path = sys.executable, env: dict | None = None, timeout: int = 900,
              check: bool = True) -> Run:
    """Run snakemake in `work`; with check, assert it exited 0 (the log's tail in the message)."""
    t0 = time.monotonic()
    r = subprocess.run(command(work, configfiles, *args, targets=targets, profile=profile, python=python),
                       cwd=work, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    run = Run(r.returncode, r.stdout + r.stderr, time.monotonic() - t0)
    if profile == "slurm":  # every sbatch line, for a kept work folder (KANSCALE_KEEP_SLURM_WORKDIR=1)
        (work / f"snakemake-{time.time_ns()}.log").write_text(run.out)
    if check:
        assert run.returncode == 0, run.out[-6000:]
    return run


def job_counts(log: str) -> dict[str, int]:
    """Snakemake's 'Job stats' table -> {rule: count} ({} when nothing ran)."""
    m = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\ntotal", log, re.S)
    if not m:
        return {}
    return {rule: int(n) for rule, n in (ln.split() for ln in m.group(1).strip().splitlines())}


def measured(log: str) -> set[str]:
    """The point ids a run measured (each measure_point job's message)."""
    return set(re.findall(r"Job \d+: measure ([^\s:]+)", log))


def records(work: Path, study: str, pattern: str = "*.json") -> dict[str, dict]:
    """{point id: record} of the study's points folder, read as plain JSON."""
    return {p.stem: json.loads(p.read_text()) for p in (work / "results" / study / "points").glob(pattern)}
