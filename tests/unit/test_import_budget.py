"""What each entry point loads when imported: the planner (every snakemake start, each Slurm job's
own included, imports it) loads neither pandas nor torch nor the plotting stack; the trainer's entry
point loads no pandas. Run in a fresh interpreter, so nothing another test imported counts."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "workflow" / "scripts"
HEAVY = ("pandas", "torch", "scipy", "matplotlib", "seaborn")


def loaded(module: str) -> list[str]:
    code = (f"import sys; import {module}; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=SCRIPTS, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": f"{SCRIPTS}:{SCRIPTS.parents[1]}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


@pytest.mark.parametrize("module, allowed", [("plan", ()), ("launch", ()), ("kan.train", ("torch",))])
def test_an_entry_point_loads_only_what_it_needs(module, allowed):
    extra = [m for m in loaded(module) if m not in allowed]
    assert not extra, f"import {module} loads {extra}: keep those imports inside the functions that need them"
