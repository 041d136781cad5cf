"""The layers hold: no import cycle between modules or between packages, and ``mm2py/`` names its
Spark adapters in one place only.

The graphs are ``tests/layers.py``'s (``python -m tests.layers`` prints the package graph; so does
``pytest -s tests/unit/test_layers.py``). Module imports are read from the source text (every
``import``, at module level or inside a function), so a cycle hidden behind a lazy import counts
too; the package graph also counts the ``__init__`` of every package an import passes through.

``connectors/`` (the repository's top-level folder) installs as the package ``mm2py.connectors``:
``mm2py/connectors/`` does not exist on disk, and ``mm2py.connectors.source`` is ``connectors/source.py``.
docs/design.md's module map (its Layout block) names every module, on its package's lines.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.layers import (
    REPO,
    SOURCE_SIDES,
    find_cycle,
    import_graph,
    imports,
    module_files,
    package_graph,
    package_of,
    render,
    side_of,
)

# the one module of mm2py/ allowed to import the adapters: the engine's composition root
COMPOSITION_ROOT = "mm2py.engine.driver"


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
    for module, path in module_files().items():
        if module.startswith("mm2py.connectors"):
            lines = path.read_text().splitlines()
            code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
            assert len(code) <= 120, f"{path} has {len(code)} lines: move its logic into mm2py/"


def test_every_package_is_installed() -> None:
    """pyproject lists packages by hand (connectors/ maps to mm2py.connectors): none is forgotten."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {m for m, p in module_files().items() if p.name == "__init__.py"}
    assert packages == listed


def test_no_package_import_cycle() -> None:
    """Packages form layers: none imports, at run time, one that imports it back (printed with -s)."""
    graph = package_graph()
    print("\n" + render(graph))
    cycle = find_cycle(graph)
    assert cycle is None, "package import cycle: " + " -> ".join(cycle or [])


def test_the_package_graph_counts_lazy_imports_and_every_init(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mm2py.config.model import X\n"
                      "def f():\n    from mm2py.kafka.admin import Admin\n")
    known = {"mm2py", "mm2py.config", "mm2py.config.model", "mm2py.kafka", "mm2py.kafka.admin"}
    assert imports("m", source, known) == {"mm2py.config.model", "mm2py.kafka.admin"}
    assert imports("m", source, known, runtime_only=True) == {"mm2py.kafka.admin"}
    # mm2py.source.x -> mm2py.config.model passes through mm2py.config's __init__: one package edge
    assert package_of("mm2py.config.model") == package_of("mm2py.config") == "mm2py.config"
    assert package_of("mm2py.connectors.source") == "mm2py.connectors"


def test_the_source_sides_stay_apart() -> None:
    """mm2py.source.plan (driver) and mm2py.source.copy (executor) never import each other, lazily or for
    types; the shared contract at mm2py.source's top level imports neither."""
    graph = import_graph()
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module.startswith("mm2py.source.")
        for target in targets
        if side_of(target) and side_of(target) != side_of(module)
    )
    assert offenders == []
    for side in SOURCE_SIDES:  # both sides are there, with modules of their own
        assert any(side_of(module) == side and module != side for module in graph)


def test_connectors_install_as_mm2py_connectors() -> None:
    """connectors/ is the package mm2py.connectors: pyproject maps it, and no mm2py/connectors/ exists."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"mm2py.connectors": "connectors"}
    assert not (REPO / "mm2py" / "connectors").exists()
    assert module_files()["mm2py.connectors.source"] == REPO / "connectors" / "source.py"


def test_bench_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph((("bench", "bench"),)))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _module_map() -> dict[str, set[str]]:
    """The words of design.md's module map (its Layout block), by the package whose lines hold them."""
    text = (REPO / "docs" / "design.md").read_text()
    block = text.split("## Layout\n", 1)[1].split("```", 2)[1]
    words: dict[str, set[str]] = {}
    package: str | None = None
    for line in block.splitlines():
        if folder := re.match(r"  ([a-z_]+)/\s", line):
            package = f"mm2py.{folder.group(1)}"
        elif re.match(r"  [a-z_]+\.py", line):
            package = "mm2py"  # a line of mm2py's top-level modules
        elif line.startswith("connectors/"):
            package = "mm2py.connectors"
        elif line and not line.startswith(" "):
            package = None
        if package:
            words.setdefault(package, set()).update(re.findall(r"[a-z_][a-z0-9_]*", line))
    return words


def test_the_module_map_lists_every_module() -> None:
    """docs/design.md's Layout names every module of mm2py/ and connectors/ on its package's lines."""
    words = _module_map()
    missing = []
    for module, path in module_files().items():
        if path.name == "__init__.py":
            continue
        parts = module.split(".")
        package = "mm2py" if len(parts) == 2 else package_of(module)
        if parts[-1] not in words.get(package, set()):
            missing.append(f"{module} ({path.relative_to(REPO)})")
    assert missing == [], "add to docs/design.md's Layout: " + ", ".join(missing)


def test_no_test_module_imports_another() -> None:
    """Tests share helpers through helper modules (mirror_helpers, target_checks, tests/fakes), never by
    importing another test module: a test file stays free to change without breaking its neighbours."""
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for match in re.finditer(r"^\s*(?:from|import)\s+tests\.[\w.]*\btest_\w+", path.read_text(), re.M):
            found.append(f"{path.relative_to(REPO)}: {match.group(0).strip()}")
    assert found == [], found
