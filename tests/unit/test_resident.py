"""Resident copiers' pure parts: the handover's range continuation, delta rows, snapshots, and the
release across processes through the flow's folder (mm2py.source.copy.resident, .handover)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import uuid

import pytest

from mm2py.source.copy import handover
from mm2py.source.copy.resident import SnapshotProgress, delta
from mm2py.source.copy.resident_task import ResidentLease, continue_after, handed_over, settle
from mm2py.source.ranges import PartitionRange, RangeResult

T = "orders"


def rng(p: int, start: int, end: int) -> PartitionRange:
    return PartitionRange(T, p, start, end, f"A.{T}")


def row(p: int, start: int, end: int, next_offset: int, records: int = 0, **kw) -> RangeResult:
    return RangeResult(T, p, start, end, next_offset, records=records, bytes=records * 100, **kw)


def test_ranges_continue_where_the_released_copier_ended() -> None:
    ranges = [rng(0, 100, 150), rng(1, 10, 20), rng(2, 5, 5)]
    out = continue_after(ranges, {(T, 0): (180, 100), (T, 1): (15, 10)})
    # past the planned end: a range that only tails from there, its start an exact record position
    assert out[0] == PartitionRange(T, 0, 180, 150, f"A.{T}", exact=True)
    assert out[1] == PartitionRange(T, 1, 15, 20, f"A.{T}", exact=True)
    assert out[2] == ranges[2]  # no copier held it


def test_a_continued_range_carries_the_released_copiers_last_sync() -> None:
    ranges = [rng(0, 100, 150), rng(1, 0, 50)]
    out = continue_after(ranges, {(T, 0): (180, 100), (T, 1): (620, 500)}, {(T, 0): (180, 1180), (T, 1): (620, 9)})
    assert out[0].prior_sync == (180, 1180)
    assert out[1] == ranges[1], "a reset does not continue the copier's run"


def test_a_reset_below_the_copiers_planned_end_keeps_its_plan() -> None:
    ranges = [rng(0, 0, 50)]  # the topic was re-created: the planner starts below the copier's range
    assert continue_after(ranges, {(T, 0): (620, 500)}) == ranges


def test_a_copier_behind_the_plan_changes_nothing() -> None:
    ranges = [rng(0, 300, 350)]
    assert continue_after(ranges, {(T, 0): (250, 200)}) == ranges


def test_delta_is_what_the_copier_did_after_its_snapshot() -> None:
    base = row(0, 0, 100, 120, records=120, tailed=20, transformed=(("Filter", 120, 100, 20, 0),))
    final = row(0, 0, 100, 200, records=200, tailed=100, transformed=(("Filter", 200, 170, 30, 0),))
    d = delta(final, base)
    assert (d.start, d.next_offset, d.records, d.bytes, d.tailed) == (120, 200, 80, 8000, 80)
    assert d.transformed == (("Filter", 80, 70, 10, 0),)
    assert delta(final, None) == final


def test_delta_leaves_a_gap_the_snapshot_reported_to_the_ledger_once() -> None:
    base = row(0, 0, 100, 120, lost_start=10, lost_end=20)
    assert delta(row(0, 0, 100, 130, lost_start=10, lost_end=20), base).lost_start == -1
    assert delta(row(0, 0, 100, 130, lost_start=125, lost_end=127), row(0, 0, 100, 120)).lost_start == 125


class FakeTail:
    def __init__(self) -> None:
        self.written: dict = {(T, 0): 2}
        self.closed: dict = {}
        self.recorded = 0

    def due(self, caught_up=lambda: False, unrecorded=lambda: 0) -> bool:
        return False

    def unrecorded(self, parts) -> int:
        return 0

    def record(self, parts) -> None:
        self.recorded += 1


class FakePart:
    def __init__(self, r: RangeResult, acked: int) -> None:
        self.r, self.acked = r, acked
        self.syncs = list(r.syncs)

    def result(self) -> RangeResult:
        self.syncs.append((99, 99))  # result() closes the syncs
        return self.r

    def acked_next(self) -> int:
        return self.acked

    def epoch_below(self, offset: int) -> int:
        return 7


def test_a_snapshot_is_taken_only_once_asked_and_the_planned_ends_are_reached() -> None:
    inner = FakeTail()
    progress = SnapshotProgress(inner)  # type: ignore[arg-type]
    reached = [False]
    progress.ready = lambda: reached[0]
    # fetched to 12, acknowledged to 11: a batch is still in flight
    parts = [((T, 0), FakePart(row(0, 0, 10, 12, syncs=((0, 0), (5, 5), (11, 11))), acked=11))]
    assert not progress.due()
    progress.wanted.set()
    assert not progress.due()  # asked, but a planned range is not at its end yet
    progress.record(parts)  # type: ignore[arg-type]
    assert not progress.taken.is_set()
    reached[0] = True
    assert progress.due()
    progress.record(parts)  # type: ignore[arg-type]
    assert progress.taken.is_set() and not progress.wanted.is_set()
    assert progress.rows[0].syncs_written == 2  # the tail's record wrote two of its syncs
    # the snapshot is what the target acknowledged, and the copy's syncs stay open
    assert (progress.rows[0].next_offset, progress.rows[0].leader_epoch) == (11, 7)
    assert parts[0][1].syncs == [(0, 0), (5, 5), (11, 11)]
    assert inner.recorded == 2


class FakeResident:
    def __init__(self, tps, rows) -> None:
        self.tps = frozenset(tps)
        self.rows = rows
        self.ended = threading.Event()
        self.released = 0

    def release(self, timeout_s: float):
        self.released += 1
        self.ended.set()
        return self.rows, {(r.topic, r.partition): (r.next_offset, r.end) for r in self.rows}


def _hold(key: str, ready, done) -> None:
    handover.register(key, FakeResident({(T, 0), (T, 1)}, [row(0, 0, 10, 42)]))  # type: ignore[arg-type]
    ready.set()
    done.wait(30)


@pytest.fixture
def key() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def test_release_ends_only_the_copiers_holding_the_partitions(key: str) -> None:
    mine, other = FakeResident({(T, 0)}, [row(0, 0, 10, 30)]), FakeResident({(T, 5)}, [])
    handover.register(key, mine)  # type: ignore[arg-type]
    handover.register(key, other)  # type: ignore[arg-type]
    rows, held, ends = handover.release(key, {(T, 0), (T, 1)}, 5)
    assert rows == [row(0, 0, 10, 30)] and held == {(T, 0)} and ends == {(T, 0): (30, 10)}
    assert (mine.released, other.released) == (1, 0)
    assert handover.release(key, {(T, 0)}, 5) == ([], set(), {})  # released once


class StuckResident(FakeResident):
    """A copier that does not end within the first release's timeout (its writes still refused)."""

    timed_out = False

    def release(self, timeout_s: float):
        if not self.timed_out:
            self.timed_out = True
            raise TimeoutError("did not end")
        return super().release(timeout_s)


def test_a_copier_that_did_not_end_in_time_is_released_again_by_the_retry(key: str) -> None:
    stuck = StuckResident({(T, 0)}, [row(0, 0, 10, 30)])
    handover.register(key, stuck)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        handover.release(key, {(T, 0)}, 1)
    # still registered: the task's retry waits for it rather than writing beside it
    assert handover.release(key, {(T, 0)}, 1)[1] == {(T, 0)}
    assert stuck.released == 1


def test_release_reaches_a_copier_in_another_process(key: str) -> None:
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(key, ready, done))
    child.start()
    try:
        assert ready.wait(30)
        rows, held, ends = handover.release(key, {(T, 1)}, 5)
        assert rows == [row(0, 0, 10, 42)] and held == {(T, 0), (T, 1)} and ends == {(T, 0): (42, 10)}
    finally:
        done.set()
        child.join(30)
    assert child.exitcode == 0


def test_a_stale_socket_is_removed(key: str) -> None:
    stale = handover.folder(key) / "999999999.sock"
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(stale))  # bound, never listening: connections are refused
    assert handover.release(key, {(T, 0)}, 5) == ([], set(), {})
    assert not stale.exists()


def test_a_task_on_a_cluster_waits_the_grace_unless_every_partition_was_handed_over(key: str) -> None:
    slept: list[float] = []
    lease = ResidentLease(key, 2.5, one_host=False, timeout_s=5)
    handover.register(key, FakeResident({(T, 0)}, [row(0, 0, 10, 30)]))  # type: ignore[arg-type]
    ranges, rows = handed_over(lease, [rng(0, 10, 20)], sleep=slept.append)
    assert slept == [] and ranges[0].start == 30 and rows == [row(0, 0, 10, 30)]
    handed_over(lease, [rng(0, 20, 30)], sleep=slept.append)
    assert slept == [2.5]
    handed_over(ResidentLease(key, 2.5, one_host=True, timeout_s=5), [rng(0, 20, 30)], sleep=slept.append)
    assert slept == [2.5]
    assert os.path.isdir(handover.folder(key))


def test_a_released_copiers_rows_of_a_partition_planned_back_are_not_committed(key: str) -> None:
    # the topic was re-created: partition 0 is planned from 0, below the copier's planned end 100;
    # the copier's rows of the old log (its syncs, its position) must not follow the reset's
    handover.register(key, FakeResident({(T, 0), (T, 1)}, [row(0, 0, 100, 130), row(1, 0, 10, 30)]))  # type: ignore[arg-type]
    lease = ResidentLease(key, 2.5, one_host=True, timeout_s=5)
    ranges, rows = handed_over(lease, [rng(0, 0, 40), rng(1, 10, 20)])
    assert rows == [row(1, 0, 10, 30)]
    assert ranges == [rng(0, 0, 40), PartitionRange(T, 1, 30, 20, f"A.{T}", exact=True)]


def test_settle_releases_on_one_host_and_waits_the_grace_elsewhere(key: str) -> None:
    copier = FakeResident({(T, 0), (T, 1)}, [row(0, 0, 100, 130)])
    handover.register(key, copier)  # type: ignore[arg-type]
    slept: list[float] = []
    settle(ResidentLease(key, 2.5, one_host=True, timeout_s=5), {(T, 0)}, sleep=slept.append)
    assert copier.released == 1 and slept == []
    assert handover.release(key, {(T, 1)}, 5) == ([], set(), {}), "released: it holds nothing any more"
    settle(ResidentLease(key, 2.5, one_host=False, timeout_s=5), {(T, 0)}, sleep=slept.append)
    assert slept == [2.5]


class ReadyCopier:
    def __init__(self, parts) -> None:
        self.parts = parts
        self.tails: set = set()


def test_a_snapshot_waits_for_a_done_partition_whose_batches_are_unacknowledged() -> None:
    """A partition done with batches still unacknowledged (its tail stopped, the target down) is not
    ready: a snapshot row below its planned end would be committed as the micro-batch's end."""
    from mm2py.source.copy.partition import PartitionCopy, Pending
    from mm2py.source.copy.resident import ResidentCopy

    part = PartitionCopy.of(rng(0, 0, 100))
    part.next_fetch, part.done = 150, True
    part.in_flight.append(Pending(60, 90, 900))
    copier = ReadyCopier({(T, 0): part})
    resident = ResidentCopy(copier, None, SnapshotProgress(FakeTail()))  # type: ignore[arg-type]
    assert not resident.progress.ready()
    part.in_flight.clear()
    assert resident.progress.ready(), "acknowledged past the planned end"
    part.next_fetch = 60
    part.stall(60, 10, "too large")
    assert resident.progress.ready(), "a stalled partition's row says where it stopped"


def test_a_snapshot_row_whose_closing_sync_the_tail_wrote_leaves_the_commit_no_sync() -> None:
    inner = FakeTail()
    inner.closed = {(T, 0): (11, 11)}  # the record just before wrote the row's closing sync
    progress = SnapshotProgress(inner)  # type: ignore[arg-type]
    progress.ready = lambda: True
    progress.wanted.set()
    progress.record([((T, 0), FakePart(row(0, 0, 10, 12, syncs=((0, 0), (5, 5), (11, 11))), acked=11))])  # type: ignore[list-item]
    assert progress.rows[0].syncs_written == 3
