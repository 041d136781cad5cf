"""The import graph of mm2py, by module and by package; ``python -m tests.layers`` prints the package graph.

Imports are read from the source text: every ``import``, at module level or inside a function
(so a cycle hidden behind a lazy import counts). Imports under ``if TYPE_CHECKING:`` never run
and are left out of the package graph; the module graph keeps them.

Packages are ``mm2py``'s subpackages and top-level modules (``mm2py.config``, ``mm2py.policy``),
and ``mm2py.connectors``: the Spark adapters live in the repository's top-level ``connectors/``
folder and install as ``mm2py.connectors`` (pyproject's ``package-dir``); no ``mm2py/connectors/``
exists on disk. Importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` too, so the
package graph counts an edge to each package on the way.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# (folder, the package it installs as): connectors/ installs as mm2py.connectors
FOLDERS = (("mm2py", "mm2py"), ("connectors", "mm2py.connectors"))
# mm2py.source's two sides, by where their code runs (the driver plans and commits, Spark's Python
# workers copy): neither imports the other; both import the contract at mm2py.source's top level
SOURCE_SIDES = ("mm2py.source.plan", "mm2py.source.copy")


def side_of(module: str) -> str | None:
    """The side of mm2py.source a module is on (its ``plan`` or ``copy`` subpackage), else None."""
    return next((side for side in SOURCE_SIDES if module == side or module.startswith(side + ".")), None)


def module_files(folders: tuple[tuple[str, str], ...] = FOLDERS) -> dict[str, Path]:
    """Module name -> file, for each (folder, package) pair; a package is named by its ``__init__``."""
    out = {}
    for folder, package in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, runtime_only: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        children = list(ast.iter_child_nodes(node))
        if runtime_only and _type_checking(node):
            children = [child for child in children if child in getattr(node, "orelse", [])]
        todo.extend(children)
    return found


def imports(module: str, path: Path, known: set[str], runtime_only: bool = False) -> set[str]:
    """The project modules ``module`` imports (a package import counts as its ``__init__``)."""
    found = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path)), runtime_only):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph(folders: tuple[tuple[str, str], ...] = FOLDERS, runtime_only: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    files = module_files(folders)
    known = set(files)
    return {module: imports(module, path, known, runtime_only) for module, path in files.items()}


def package_of(module: str) -> str:
    """``mm2py.x.y`` -> ``mm2py.x`` (``mm2py.connectors.x`` -> ``mm2py.connectors``); ``mm2py`` is itself."""
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, set[str]]:
    """Package -> the packages its modules import at run time, with every ``__init__`` on the way."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph(runtime_only=True).items():
        mine = package_of(module)
        edges = graph.setdefault(mine, set())
        for target in targets:
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):  # a.b.c runs a's and a.b's __init__ first
                other = package_of(".".join(parts[:depth]))
                if other != mine and not mine.startswith(other + "."):
                    edges.add(other)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None. Package ``__init__`` edges to parents skipped."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if node.startswith(nxt + "."):
                continue  # a module importing its own package's __init__ is how Python loads it
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def layers(graph: dict[str, set[str]]) -> list[list[str]]:
    """The packages in layers, lowest first: each imports only packages of the layers below it."""
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    out = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        out.append(ready)
        sorter.done(*ready)
    return out


def render(graph: dict[str, set[str]]) -> str:
    """The package graph as text: one line a package, lowest layer first, with what it imports."""
    try:
        levels = layers(graph)
    except CycleError as e:
        return "package import cycle: " + " -> ".join(e.args[1])
    short = {p: p.removeprefix("mm2py.") or "mm2py" for p in graph}
    lines = ["mm2py packages by layer, lowest first (layer: package -> the packages it imports)"]
    for level, packages in enumerate(levels):
        for package in packages:
            name = short[package] + (" (folder connectors/)" if package == "mm2py.connectors" else "")
            uses = ", ".join(sorted(short[p] for p in graph[package])) or "-"
            lines.append(f"{level:>2}: {name} -> {uses}")
    lines.append(f"no package import cycle ({len(graph)} packages), no import left out")
    lines.append("source's sides (side -> the parts of source it imports): " + "; ".join(
        f"{side.removeprefix('mm2py.')} -> {', '.join(sorted(uses)) or '-'}"
        for side, uses in source_sides().items()))
    return "\n".join(lines)


def source_sides() -> dict[str, set[str]]:
    """Each side of mm2py.source -> the parts of mm2py.source its modules import: the other side or the
    contract (mm2py.source's top-level modules), every import counted."""
    uses: dict[str, set[str]] = {side: set() for side in SOURCE_SIDES}
    for module, targets in import_graph().items():
        if (side := side_of(module)) is None:
            continue
        for target in targets:
            other = side_of(target)
            if other and other != side:
                uses[side].add(other.removeprefix("mm2py."))
            elif other is None and target.startswith("mm2py.source."):
                uses[side].add("source (contract)")
    return uses


if __name__ == "__main__":
    print(render(package_graph()))
