"""The copy path's functions take a spec and at most four other parameters.

Every function and method in ``mm2py/source/copy/`` and in the copy entry points (the Spark
source connector that starts a task, the worker's clients, the translating writer) takes at most
five parameters besides ``self``/``cls``: collaborators that travel together are passed as one
object (``CopySpec``, ``TaskRun``, ``CopyMode``, ``TaskParts``, ``TaskSlots``), not loose. Read
from the source text with ``ast``, so nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COPY_PATH = sorted((REPO / "mm2py" / "source" / "copy").glob("*.py"))
ENTRY_POINTS = [REPO / "connectors" / "source.py", REPO / "mm2py" / "worker.py"]
MAX_PARAMETERS = 5  # a spec and at most four others


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters of ``node`` besides a method's ``self``/``cls``, ``*args`` and ``**kwargs`` counted."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return names + [f"*{p.arg}" for p in (a.vararg,) if p] + [f"**{p.arg}" for p in (a.kwarg,) if p]


def too_long(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = parameters(node)
                if len(names) > MAX_PARAMETERS:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}({', '.join(names)})")
    return found


def test_the_copy_path_is_where_this_test_looks():
    assert len(COPY_PATH) > 10 and all(p.exists() for p in ENTRY_POINTS)
    assert REPO / "mm2py" / "source" / "copy" / "copier.py" in COPY_PATH


def test_copy_path_functions_take_at_most_five_parameters():
    assert too_long(COPY_PATH + ENTRY_POINTS) == []


def test_the_check_counts_keyword_only_and_starred_parameters():
    tree = ast.parse("class C:\n    def f(self, a, b, /, c, *d, e, f, **g): pass\n")
    method = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert parameters(method) == ["a", "b", "c", "e", "f", "*d", "**g"]
