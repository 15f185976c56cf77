"""Create pykan's own virtual environment (never .venv: its import name `kan` is kanscale's there).

    python workflow/scripts/pykan_env.py .venv-pykan

Uses this interpreter's base Python, installs workflow/envs/pykan-requirements.txt (torch pinned
like kanscale's, so pip never pulls another torch), checks that `import kan` is pykan's KAN and
writes <venv>/.installed last: a half-made environment is never taken for a finished one.

When this interpreter is kanscale's own environment and holds the pinned torch, the new one sees its
site-packages after its own (a .pth line): pip then finds torch and the shared pins installed and
adds only pykan and what kanscale lacks, instead of unpacking another 1 GB of torch (about 90 s on
a 2-core VM). A path added by a .pth line does not run that folder's own .pth files, so kanscale's
editable install (whose import name is also `kan`) stays invisible there; the check below proves it.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import time
from importlib.metadata import version
from pathlib import Path

from launch.commands import PYKAN_VENV

REQUIREMENTS = Path(__file__).resolve().parents[1] / "envs" / "pykan-requirements.txt"


def pinned(name: str) -> str | None:
    for line in REQUIREMENTS.read_text().splitlines():
        if line.split("==")[0].strip() == name and "==" in line:
            return line.split("==")[1].strip()
    return None


def shared_site() -> str | None:
    """This interpreter's site-packages when it is a virtual environment holding the pinned torch."""
    if sys.prefix == sys.base_prefix:
        return None
    try:
        if version("torch").split("+")[0] != pinned("torch"):
            return None
    except Exception:
        return None
    return sysconfig.get_paths()["purelib"]


def make(venv: Path) -> None:
    t0 = time.monotonic()
    marker = venv / ".installed"
    marker.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    py = venv.absolute() / "bin" / "python"
    shared = shared_site()
    if shared:
        own = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
        (Path(own) / "kanscale-shared.pth").write_text(shared + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
                   check=True)
    # outside the repository (cwd /): `kan` must be pykan's
    check = "import kan, sys; assert hasattr(kan, 'MultKAN') or hasattr(kan, 'KAN'); print(kan.__file__)"
    where = subprocess.run([str(py), "-c", check], check=True, capture_output=True, text=True, cwd="/").stdout.strip()
    marker.write_text(f"pykan from {where}; made in {time.monotonic() - t0:.0f} s from {REQUIREMENTS}"
                      + (f"; torch and the shared pins from {shared}" if shared else "") + "\n")
    print(marker.read_text(), end="")


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else PYKAN_VENV)
