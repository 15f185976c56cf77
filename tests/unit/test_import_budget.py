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


# the pipeline runs plan -> launch -> analysis; what they share lives in kan/contract/, which imports
# none of them. {package folder: top-level packages its modules must not import}
LAYERS = {"workflow/scripts/plan": ("scaling", "launch"), "workflow/scripts/launch": ("scaling", "plan"),
          "kan/contract": ("scaling", "launch", "plan")}
# and kan/contract loads neither at import: a user's factory is built with torch inside a function
HEAVY_AT_IMPORT = {"kan/contract": ("torch", "pandas")}


def _imports(path: Path) -> set[tuple[str, int, bool]]:
    """(top-level package, line, at module level) of every absolute import in one file."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {(a.name.split(".")[0], node.lineno, id(node) not in inside) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add((node.module.split(".")[0], node.lineno, id(node) not in inside))
    return out


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_layers_follow_the_pipeline(folder):
    root = SCRIPTS.parents[1]
    heavy = HEAVY_AT_IMPORT.get(folder, ())
    bad = [f"{p.relative_to(root)}:{line} imports {mod}" for p in sorted((root / folder).rglob("*.py"))
           for mod, line, top in sorted(_imports(p)) if mod in LAYERS[folder] or (top and mod in heavy)]
    assert not bad, "shared code belongs in kan/contract/, not in a later stage:\n" + "\n".join(bad)
