"""Range ownership and task assignment of the source connector."""

from __future__ import annotations

from mm2py.source.ranges import PartitionRange, RangeResult, assign, owned_from, split_key, tp_key


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


def test_assign_balances_estimated_bytes_not_offsets():
    # partition 0 holds 1 KiB records, the others 10-byte ones: bytes decide the split
    size = {0: 1024, 1: 10, 2: 10}
    ranges = [rng(0, 0, 100), rng(1, 0, 1000), rng(2, 0, 1000)]
    groups = assign(ranges, 2, lambda r: r.size * size[r.partition])
    assert sorted([r.partition for r in g] for g in groups) == [[0], [1, 2]]


def test_assign_uses_only_as_many_tasks_as_the_bytes_justify():
    ranges = [rng(p, 0, 100) for p in range(16)]
    one_byte = lambda r: float(r.size)  # noqa: E731 - 1,600 bytes in all
    assert len(assign(ranges, 8, one_byte, min_task_size=10_000)) == 1
    assert len(assign(ranges, 8, one_byte, min_task_size=500)) == 4
    assert len(assign(ranges, 2, one_byte, min_task_size=1)) == 2


def test_a_tasks_results_round_trip_through_one_packed_row():
    results = [
        RangeResult("orders", 0, 0, 50, 40, records=40, bytes=4096, syncs=((0, 0), (40, 40)), stall_offset=40,
                    stall_bytes=2 << 20, stall_reason="max.message.bytes", lost_start=3, lost_end=7),
        RangeResult("a.b-c", 9, 10, 20, 20, records=10, tailed=4, schema_dead_lettered=1),
    ]
    row = RangeResult.pack(results)
    assert len(row) == 1 and RangeResult.spark_schema() == "results binary"
    assert RangeResult.unpack(bytearray(row[0])) == results  # Spark hands binary cells back as bytearray
    assert RangeResult.unpack(RangeResult.pack([])[0]) == []


def test_a_batch_straddling_an_exact_start_is_owned_from_the_start_and_one_below_a_boundary_not_at_all():
    exact, boundary = PartitionRange("t", 0, 500, 900, "A.t", exact=True), rng(0, 500, 900)
    assert owned_from(exact, 400) == 500, "a flow's first range: the records from its start"
    assert owned_from(boundary, 400) is None, "consecutive ranges: the range before copied it whole"
    assert owned_from(exact, 500) == owned_from(boundary, 500) == 500
    assert owned_from(boundary, 700) == 700, "a batch inside the range: whole"


def test_a_batch_holding_the_log_start_a_copy_skipped_to_is_owned_from_there_whatever_the_start():
    exact, boundary = PartitionRange("t", 0, 500, 900, "A.t", exact=True), rng(0, 500, 900)
    assert owned_from(exact, 600, log_start=650) == owned_from(boundary, 600, log_start=650) == 650
    assert owned_from(boundary, 400, log_start=520) == 520, "the range before may have skipped past it"
    assert owned_from(boundary, 700, log_start=650) == 700
