"""Create pykan's own virtual environment (never .venv: its import name `kan` is kanscale's there).

    python workflow/scripts/pykan_env.py .venv-pykan

Uses this interpreter's base Python, installs workflow/envs/pykan-requirements.txt (torch pinned
like kanscale's, so pip never pulls another torch), checks that `import kan` is pykan's KAN and
writes <venv>/.installed last: a half-made environment is never taken for a finished one.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parents[1] / "envs" / "pykan-requirements.txt"


def make(venv: Path) -> None:
    t0 = time.monotonic()
    marker = venv / ".installed"
    marker.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    py = venv.absolute() / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
                   check=True)
    # outside the repository (cwd /): `kan` must be pykan's
    check = "import kan, sys; assert hasattr(kan, 'MultKAN') or hasattr(kan, 'KAN'); print(kan.__file__)"
    where = subprocess.run([str(py), "-c", check], check=True, capture_output=True, text=True, cwd="/").stdout.strip()
    marker.write_text(f"pykan from {where}; made in {time.monotonic() - t0:.0f} s from {REQUIREMENTS}\n")
    print(marker.read_text(), end="")


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else ".venv-pykan"))
