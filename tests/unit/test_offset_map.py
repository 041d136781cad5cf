"""Offset maps {topic: {partition: offset}}: parsing and the translated output shape."""

from __future__ import annotations

import io

import pytest

from mm2py.errors import Mm2pyError
from mm2py.ops.failover import PartitionPlan, Plan
from mm2py.ops.offset_map import plan_to_map, read_offset_map


def test_reads_flink_shaped_map():
    got = read_offset_map(io.StringIO('{"orders": {"0": 12, "2": 7}, "pay": {"1": 0}}'))
    assert got == {("orders", 0): 12, ("orders", 2): 7, ("pay", 1): 0}


@pytest.mark.parametrize("text", ["[]", '{"t": 3}', '{"t": {"x": 1}}', '{"t": {"0": -1}}', '{"t": {"0": true}}',
                                  "nope"])
def test_rejects_bad_maps(text):
    with pytest.raises(Mm2pyError):
        read_offset_map(io.StringIO(text))


def test_plan_to_map_uses_target_names_and_refuses_gaps():
    rows = (PartitionPlan("orders", "A.orders", 0, 12, 10, "syncs", None),
            PartitionPlan("orders", "A.orders", 1, 5, 4, "syncs", None))
    assert plan_to_map(Plan("f", "A", "B", rows)) == {"A.orders": {"0": 10, "1": 4}}
    gap = rows + (PartitionPlan("orders", "A.orders", 2, 9, None, "none", None),)
    with pytest.raises(Mm2pyError, match="orders-2"):
        plan_to_map(Plan("f", "A", "B", gap))
