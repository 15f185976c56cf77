"""The code's layout stays findable: kan/'s top level is the model and the trainer (at most 14
modules), every subpackage is named in kan/__init__.py's map and every module in its package's map,
no two modules share a base name, no Python file grows past 450 lines and no function in kan/ past
120."""

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [ROOT / "kan", ROOT / "workflow" / "scripts"]
MAX_LINES = 450


def modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts and ".egg-info" not in str(p))


def test_kan_top_level_is_small_and_maps_its_subpackages():
    top = [p.name for p in (ROOT / "kan").glob("*.py")]
    assert len(top) <= 14, sorted(top)
    doc = (ROOT / "kan" / "__init__.py").read_text()
    subpackages = [p.parent.name for p in (ROOT / "kan").glob("*/__init__.py")]
    assert subpackages and all(f"{name}/" in doc for name in subpackages), subpackages
    assert all(name.removesuffix(".py") in doc for name in top if name != "__init__.py")


def test_each_package_map_names_its_modules():
    missing = []
    for init in [*(ROOT / "kan").glob("*/__init__.py"), *(ROOT / "workflow" / "scripts").glob("*/__init__.py"),
                 *(ROOT / "workflow" / "scripts" / "scaling").glob("*/__init__.py")]:
        doc = init.read_text()
        for mod in init.parent.glob("*.py"):
            name = mod.stem
            if name != "__init__" and not re.search(rf"\b{re.escape(name)}\b", doc):
                missing.append(f"{mod.relative_to(ROOT)} is not in {init.relative_to(ROOT)}'s map")
    assert missing == []


def test_no_two_modules_share_a_base_name():
    names = Counter(p.name for folder in PACKAGES for p in modules(folder) if p.name not in ("__init__.py", "main.py"))
    assert [n for n, k in names.items() if k > 1] == []


def test_no_python_file_is_longer_than_the_limit():
    files = [p for folder in (ROOT / "kan", ROOT / "workflow", ROOT / "tests", ROOT / "benchmarks") for p in modules(folder)]
    long = [f"{p.relative_to(ROOT)}: {n}" for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == []


MAX_FUNCTION_LINES = 120


def test_no_function_in_kan_is_longer_than_a_screenful_or_two():
    """kan/ reads top to bottom: train_rank's step modes are named functions, not 200 inline lines."""
    import ast

    long = [f"{p.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for p in modules(ROOT / "kan") for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long
