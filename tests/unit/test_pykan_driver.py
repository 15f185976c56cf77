"""The pykan driver's way in (workflow/scripts/pykan_train.py): it loads the folder the launcher names
(launch/commands.py KAN_DIR) as the package `kanscale`, since in pykan's environment `kan` is pykan.
Checked here without pykan: the folder is kan/ itself, and the whole trainer, its subpackages
included, loads under the other name without ever importing `kan`."""

import subprocess
import sys
from pathlib import Path

from kan.contract.point import LaunchSettings, ModelConfig, Placement, Point, TrainConfig
from launch import commands

ROOT = Path(__file__).resolve().parents[2]


def test_the_launcher_names_the_kan_package_folder():
    assert commands.KAN_DIR == ROOT / "kan" and (commands.KAN_DIR / "train.py").is_file()
    argv = commands.train_argv(_pykan_point(), LaunchSettings(), "out.json")
    assert argv[:2] == [str(commands.PYKAN_DRIVER), f"--kanscale={ROOT / 'kan'}"]


def test_the_trainer_loads_as_kanscale_without_importing_kan():
    code = (f"import sys; sys.argv = ['pykan_train.py', '--kanscale={commands.KAN_DIR}']\n"
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('driver', {str(commands.PYKAN_DRIVER)!r})\n"
            "driver = importlib.util.module_from_spec(spec); spec.loader.exec_module(driver)\n"
            "from kanscale import train, loop, rank_summary\n"
            "from kanscale.probes import readiness, capture, anatomy, kernel_choice, allreduce\n"
            "from kanscale.data import datasets, user_tables, feynman\n"
            "from kanscale.kernels import numba_bspline, triton_bspline\n"
            "print(sorted(m for m in sys.modules if m == 'kan' or m.startswith('kan.')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _pykan_point() -> Point:
    return Point(study="s", experiment="strong", model=ModelConfig(impl="pykan", widths=(2, 8, 1)),
                 train=TrainConfig(samples=1024, batch_per_rank=64, epochs=1, warmup_steps=2), placement=Placement(nodes=1, gpus_per_node=1))
