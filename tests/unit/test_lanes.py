"""make test's lanes (tests/lane_layout.py): each test module's tests of a marker run in exactly one
lane, and no two lanes' ports can meet, for every fixed port the tests' sources name."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

from tests.lane_layout import (
    INTEGRATION,
    KRB_MARKER,
    LANES,
    LONG,
    PORT_BAND,
    REST,
    Lane,
    default_lane,
    lane_of,
    selection,
)

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted((REPO / INTEGRATION).glob("test_*.py"))
# sources whose fixed ports integration tests listen on (test_rolling_restart starts bench's clusters)
PORT_SOURCES = [REPO / "tests" / "conftest.py", *sorted((REPO / INTEGRATION).glob("*.py")),
                REPO / "bench" / "rolling_restart.py"]
PORT_ROOM = 9  # a cluster of three brokers takes port..port+5, the Spark master port..port+7


def _long_modules() -> set[str]:
    return {path.name for path in MODULES if "pytest.mark.long" in path.read_text()}


def _runs(lane: Lane, module: str) -> bool:
    """Whether ``lane`` runs ``module``'s tests of its marker, as its pytest arguments say."""
    args = selection(lane)
    return f"{INTEGRATION}/{module}" in args or ("tests" in args and f"--ignore={INTEGRATION}/{module}" not in args)


def _ports(path: Path) -> set[int]:
    """Integers named as ports: ``N + PORT_OFFSET``, and every integer assigned to a name with PORT in it."""
    found: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            sides = (node.left, node.right)
            if any(isinstance(s, ast.Name) and s.id == "PORT_OFFSET" for s in sides):
                found |= {s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, int)}
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any("PORT" in name.id for t in targets for name in ast.walk(t) if isinstance(name, ast.Name)):
            value = node.value  # type: ignore[attr-defined]
            found |= {c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and type(c.value) is int
                      and c.value >= 1024}
    return found


def test_each_module_runs_in_exactly_one_lane_of_each_marker() -> None:
    long_modules = _long_modules()
    assert len(long_modules) >= 10, long_modules  # the scan finds the suite's long modules
    for marker, modules in ((LONG, long_modules), (REST, {path.name for path in MODULES})):
        for module in modules:
            running = [lane.name for lane in LANES if lane.marker == marker and _runs(lane, module)]
            assert running == [lane_of(module, marker).name], (marker, module, running)


def test_every_named_module_exists_once_per_marker_and_long_lanes_name_long_modules() -> None:
    for marker in (REST, LONG):
        named = [module for lane in LANES if lane.marker == marker for module in lane.modules]
        assert len(named) == len(set(named)), f"a module named by two lanes of {marker}"
        assert set(named) <= {path.name for path in MODULES}, set(named) - {path.name for path in MODULES}
    assert {m for lane in LANES if lane.marker == LONG for m in lane.modules} <= _long_modules()


def test_each_marker_has_one_default_lane_and_a_new_module_runs_there() -> None:
    assert {lane.marker for lane in LANES} == {REST, LONG, KRB_MARKER}
    assert LANES[0] == default_lane(REST), "the first lane streams: the rest's default, the longest report"
    assert [lane.name for lane in LANES if lane.krb] == [default_lane(KRB_MARKER).name]
    for marker in (REST, LONG):
        assert lane_of("test_a_module_no_lane_names_yet.py", marker) == default_lane(marker)
        assert _runs(default_lane(marker), "test_a_module_no_lane_names_yet.py")
    for lane in LANES:
        if lane.modules:
            assert selection(lane) == [f"{INTEGRATION}/{m}" for m in lane.modules]


def test_lanes_port_ranges_are_disjoint_and_below_the_ephemeral_range() -> None:
    for lane in LANES:
        low, high = lane.ports
        assert 1024 <= low <= high < 32768, lane
    offsets = [lane.offset for lane in LANES]
    assert len(set(offsets)) == len(offsets)
    for one, other in itertools.combinations(LANES, 2):
        assert one.ports[1] < other.ports[0] or other.ports[1] < one.ports[0], (one, other)


def test_every_fixed_test_port_lies_in_the_band() -> None:
    ports = {str(path.relative_to(REPO)): _ports(path) for path in PORT_SOURCES}
    assert {30092, 30892} <= ports["tests/conftest.py"]  # the shared clusters
    assert 29877 in ports[f"{INTEGRATION}/test_mirror_core.py"]  # the standalone Spark master
    assert 32292 in ports[f"{INTEGRATION}/test_exactly_once.py"]
    assert {31393, 31499} <= ports["bench/rolling_restart.py"]
    outside = {name: sorted(p for p in found if not PORT_BAND[0] <= p <= p + PORT_ROOM <= PORT_BAND[1])
               for name, found in ports.items()}
    assert not any(outside.values()), {name: p for name, p in outside.items() if p}
