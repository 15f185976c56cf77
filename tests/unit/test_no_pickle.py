"""No channel kanscale owns unpickles what it receives (SECURITY.md): the ranks' measurements travel
as JSON bytes, records and attempt files are JSON. A peer of a collective is whoever got into the
rendezvous, and a pickle from it is code."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# torch.distributed's object collectives pickle and unpickle
OBJECT_COLLECTIVES = {"all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                      "send_object_list", "recv_object_list"}
PICKLERS = {"pickle", "cloudpickle", "dill", "shelve", "marshal"}


def unpickling(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in OBJECT_COLLECTIVES:
                found.append((node.lineno, name))
            if (isinstance(node, ast.Attribute) and node.attr == "load" and isinstance(node.value, ast.Name)
                    and node.value.id == "torch"):
                found.append((node.lineno, "torch.load"))  # unpickles unless weights_only
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [(node.lineno, f"import {m}") for m in mods if m.split(".")[0] in PICKLERS]
    return found


def test_the_check_finds_what_it_looks_for():
    code = "import pickle\nimport torch.distributed as dist\ndist.all_gather_object(a, b)\ntorch.load(p)\n"
    assert [name for _, name in unpickling(ast.parse(code))] == ["import pickle", "all_gather_object", "torch.load"]


def test_no_unpickling_in_kan_or_the_workflow():
    found = []
    for folder in ("kan", "workflow/scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += [f"{path.relative_to(ROOT)}:{n}: {what}" for n, what in unpickling(ast.parse(path.read_text()))]
    assert not found, "\n".join(found)
