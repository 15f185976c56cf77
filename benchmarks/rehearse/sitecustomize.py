"""The device check's rehearsal (REHEARSE=1 bash benchmarks/device_check.sh DIR): every Python the check
starts finds this file first on PYTHONPATH, and from then on imports only what the GPU machine's image
has (benchmarks/gpu-image-packages.txt, read off the image), the standard library, and the
repository's own modules. Anything else raises ModuleNotFoundError naming the list, as it would on the
GPU machine, where nothing can be installed: so a missing package costs a rehearsal here, not the
device's 15 minutes.

A module a third-party package imports for itself (its own dependencies, which the image's list does
not spell out) is let through: only what the repository's code and the standard library ask for is
held against the list.
"""

from __future__ import annotations

import importlib.machinery
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "benchmarks" / "gpu-image-packages.txt"
# distribution names whose import name differs
IMPORT_NAMES = {"pyyaml": "yaml", "pillow": "PIL", "scikit-learn": "sklearn", "scikit-image": "skimage",
                "opencv-python-headless": "cv2", "python-dateutil": "dateutil", "py-cpuinfo": "cpuinfo",
                "protobuf": "google", "nvidia-ml-py": "pynvml", "absl-py": "absl", "markdown-it-py": "markdown_it",
                "pytorch-lightning": "pytorch_lightning", "pyre-extensions": "pyre_extensions",
                "typing-extensions": "typing_extensions", "sentencepiece": "sentencepiece", "msgpack": "msgpack"}


def _allowed() -> set[str]:
    names = set()
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        dist = line.split()[0].lower()
        names.add(IMPORT_NAMES.get(dist, dist.replace("-", "_")))
        if dist.startswith("nvidia-"):
            names.add("nvidia")
        if dist.startswith("cuda-"):
            names.add("cuda")
    return names


ALLOWED = _allowed() | set(sys.stdlib_module_names) | set(sys.builtin_module_names) | {"sitecustomize"}
VENV = ROOT / ".venv"


def _in_repo(origin: str | None) -> bool:
    if not origin:
        return False
    p = Path(origin).resolve()
    return ROOT in p.parents and VENV not in p.parents and ".venv-pykan" not in p.parts


STDLIB = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")}


def _in_stdlib(origin: str) -> bool:
    p = Path(origin).resolve()
    return any(d in p.parents for d in STDLIB) and "site-packages" not in p.parts


def _importer_is_third_party() -> bool:
    """Whether the import statement runs in an installed package (not the repository, not the
    standard library): the first frame outside the import machinery."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith("<frozen") or "importlib" in f.f_code.co_filename
                             or f.f_code.co_filename == __file__):
        f = f.f_back
    if f is None:
        return False
    name = f.f_code.co_filename
    return ("site-packages" in name or "dist-packages" in name) and not _in_repo(name)


class ImageOnly:
    """A meta path finder that refuses top-level modules the GPU machine's image lacks."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if path is not None or fullname in ALLOWED:
            return None  # a submodule follows its package; a listed or standard one imports as usual
        spec = importlib.machinery.PathFinder.find_spec(fullname)
        origin = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), None))
        if origin and (_in_repo(origin) or _in_stdlib(origin)):
            return None  # the repository's own code, or the interpreter's (_sysconfigdata_*, lib-dynload)
        if _importer_is_third_party():
            return None
        raise ModuleNotFoundError(f"No module named {fullname!r} on the GPU machine: not in its image "
                                  f"(benchmarks/gpu-image-packages.txt); carry it as a wheel, or do not need it "
                                  f"(the device check's rehearsal, benchmarks/rehearse)", name=fullname)


sys.meta_path.insert(0, ImageOnly())
