"""The layers hold: no import cycle, and ``mm2py/`` names its Spark adapters in one place only.

Imports are read from the source text (every ``import``, at module level or inside a
function), so a cycle hidden behind a lazy import counts too.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the one module of mm2py/ allowed to import the adapters: the engine's composition root
COMPOSITION_ROOT = "mm2py.engine.driver"


def _module_files() -> dict[str, Path]:
    """Module name -> file, for mm2py/ and connectors/ (installed as mm2py.connectors)."""
    out = {}
    for folder, package in (("mm2py", "mm2py"), ("connectors", "mm2py.connectors")):
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``module`` imports (a package import counts as its ``__init__``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = _module_files()
    known = set(files)
    return {module: _imports(module, path, known) for module, path in files.items()}


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


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_only_the_composition_root_imports_the_connectors() -> None:
    graph = import_graph()
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if not module.startswith("mm2py.connectors") and module != COMPOSITION_ROOT
        for target in targets
        if target.startswith("mm2py.connectors")
    )
    assert offenders == []
    assert any(t.startswith("mm2py.connectors") for t in graph[COMPOSITION_ROOT])


def test_connectors_are_thin() -> None:
    """Adapters hand off to the core: no adapter module holds more than a screenful of code."""
    for module, path in _module_files().items():
        if module.startswith("mm2py.connectors"):
            lines = path.read_text().splitlines()
            code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
            assert len(code) <= 120, f"{path} has {len(code)} lines: move its logic into mm2py/"


def test_every_package_is_installed() -> None:
    """pyproject lists packages by hand (connectors/ maps to mm2py.connectors): none is forgotten."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {m for m, p in _module_files().items() if p.name == "__init__.py"}
    assert packages == listed
