"""Range ownership and task assignment of the source connector."""

from __future__ import annotations

from mm2py.source.ranges import PartitionRange, assign, split_key, tp_key


def rng(p: int, start: int, end: int) -> PartitionRange:
    return PartitionRange("t", p, start, end, "A.t")


def test_tp_key_round_trips_topic_names_with_dots_and_dashes():
    assert split_key(tp_key("a.b-c_d", 12)) == ("a.b-c_d", 12)


def test_assign_balances_by_offsets_and_drops_empty_ranges():
    ranges = [rng(0, 0, 100), rng(1, 0, 60), rng(2, 0, 50), rng(3, 5, 5)]
    groups = assign(ranges, 2)
    assert sorted(sum(r.size for r in g) for g in groups) == [100, 110]
    assert all(r.size > 0 for g in groups for r in g)


def test_assign_never_makes_more_groups_than_ranges():
    assert len(assign([rng(0, 0, 10)], 8)) == 1
    assert assign([], 4) == []
