"""The workflow's helper files (workflow/rules/common*.smk, read in the Snakefile's include order)
define every name before a later line uses it, so a reader meets a helper before its callers and
no file leans on one included after it. Python would accept a call to a function defined later (it
is looked up when called), which is why this is checked here and not by running Snakemake."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the Snakemake directives of these files, blanked so the rest parses as Python
DIRECTIVE = re.compile(r"^(?:wildcard_constraints|resource_scopes):\n(?:    .*\n)+", re.M)


def common_files() -> list[Path]:
    includes = re.findall(r'^include: "(.+)"', (ROOT / "Snakefile").read_text(), re.M)
    return [ROOT / f for f in includes if Path(f).name.startswith("common")]


def used_before_defined(files: list[Path]) -> list[str]:
    """'file:line uses NAME, defined later at file:line' for each top-level name of these files used
    (in a function body too) by a statement that comes before the one defining it."""
    defined, uses, order = {}, [], 0
    for path in files:
        text = DIRECTIVE.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())
        for node in ast.parse(text, filename=str(path)).body:
            order += 1
            if isinstance(node, ast.FunctionDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                names = []
            for name in names:
                defined.setdefault(name, (order, path.name, node.lineno))
            uses += [(n.id, order, path.name, n.lineno) for n in ast.walk(node)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return sorted({f"{f}:{line} uses {name}, defined later at {defined[name][1]}:{defined[name][2]}"
                   for name, at, f, line in uses if name in defined and defined[name][0] > at})


def test_the_include_order_reads_top_down():
    files = common_files()
    assert [f.name for f in files][0] == "common.smk" and len(files) >= 4
    assert used_before_defined(files) == []


def test_a_helper_used_before_its_file_is_included_is_found(tmp_path):
    first, second = tmp_path / "common.smk", tmp_path / "common_late.smk"
    first.write_text("X = 1\n\n\nwildcard_constraints:\n    study=X,\n\n\ndef early():\n    return late() + X\n")
    second.write_text("def late():\n    return 2\n")
    assert used_before_defined([first, second]) == ["common.smk:9 uses late, defined later at common_late.smk:1"]
    assert used_before_defined([second, first]) == []
