"""The stop flag, the signal handling of a run, tail windows and the progress a tailing task records."""

from __future__ import annotations

import pickle
import signal
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from mm2py.engine.shutdown import Shutdown
from mm2py.errors import KafkaError
from mm2py.formats import OffsetSync
from mm2py.source.copy.partition import PartitionCopy, Pending
from mm2py.source.copy.stop_flag import StopFlag
from mm2py.source.copy.tail import TailWindow
from mm2py.source.copy.tail_commit import BUSY_RECORDS, BUSY_S, TailProgress, written_of
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.source.sync_history import all_syncs, history_syncs, to_commit, unwritten
from mm2py.types import TP

TP0: TP = ("t", 0)


def test_a_raised_flag_is_seen_by_every_copy_of_it(tmp_path: Path) -> None:
    flag = StopFlag.in_folder(str(tmp_path))
    other = pickle.loads(pickle.dumps(flag))  # as a task or a planner process gets it
    assert not other.raised()
    flag.raise_()
    other._checked_at = float("-inf")  # past its check interval
    assert other.raised() and flag.raised()
    assert not StopFlag(None).raised()


def test_the_first_signal_asks_for_an_orderly_stop_and_the_second_forces_it(tmp_path: Path) -> None:
    ended: list[int] = []
    killed: list[tuple[int, int]] = []
    shutdown = Shutdown(StopFlag.in_folder(str(tmp_path)), 60, end=ended.append,
                        kill=lambda pid, sig: killed.append((pid, sig)))
    shutdown.jvm_pid = 4242
    shutdown.handle(signal.SIGTERM)
    assert shutdown.stop.is_set() and shutdown.flag.raised() and not ended and not killed
    shutdown.handle(signal.SIGINT)
    assert killed == [(4242, signal.SIGKILL)] and ended == [128 + signal.SIGINT]
    shutdown.done()


def test_a_stop_past_its_bound_is_forced(tmp_path: Path) -> None:
    ended: list[int] = []
    shutdown = Shutdown(StopFlag.in_folder(str(tmp_path)), 0.0, end=ended.append, kill=lambda *_: None)
    shutdown.handle(signal.SIGTERM)
    assert shutdown._timer is not None
    shutdown._timer.join(10)
    assert ended == [1]


def test_a_tail_window_closes_for_good_at_its_end_or_on_the_stop_flag(tmp_path: Path) -> None:
    now = [0.0]
    flag = StopFlag.in_folder(str(tmp_path))
    window = TailWindow(10.0, flag, clock=lambda: now[0])
    assert window.open()
    flag.raise_()
    assert not window.open()
    timed = TailWindow(10.0, clock=lambda: now[0])
    now[0] = 10.0
    assert not timed.open()
    now[0] = 0.0
    assert not timed.open(), "closed for good"


class Sink:
    def __init__(self, fail: KafkaError | None = None):
        self.calls: list[tuple[str, object]] = []
        self.fail = fail

    def write_syncs(self, syncs: Sequence[OffsetSync], history: Sequence[OffsetSync]) -> None:
        if self.fail is not None:
            raise self.fail
        self.calls.append(("syncs", [(s.upstream_offset, s.downstream_offset) for s in syncs]))
        self.calls.append(("history", [(s.upstream_offset, s.downstream_offset) for s in history]))

    def save_positions(self, positions: Mapping[TP, int], epochs: Mapping[TP, int] | None = None) -> None:
        self.calls.append(("positions", dict(positions)))


def copy_of(start: int = 0) -> PartitionCopy:
    return PartitionCopy.of(PartitionRange("t", 0, start, start + 30, "A.t"))


def land(part: PartitionCopy, first: int, count: int, downstream: int) -> None:
    """Queue, send and acknowledge a batch of ``count`` records from ``first`` landing at ``downstream``."""
    part.enqueue((b"x",), Pending(first, count, 1), rebuilt=False)
    part.send_next()
    part.acked(downstream, 1000)
    part.next_fetch = first + count


def test_progress_writes_syncs_then_positions_of_acknowledged_records_only() -> None:
    part = copy_of()
    land(part, 0, 10, 100)
    land(part, 10, 10, 110)
    part.enqueue((b"x",), Pending(20, 10, 1), rebuilt=False)
    part.send_next()  # in flight, not acknowledged
    part.next_fetch = 30
    sink = Sink()
    progress = TailProgress(sink, 1.0)
    progress.record([(TP0, part)])
    assert sink.calls == [("syncs", [(0, 100), (20, 120)]), ("history", [(0, 100)]), ("positions", {TP0: 19})]
    assert progress.written == {TP0: 1}


def test_each_sync_goes_out_once_and_the_commit_writes_only_the_rest() -> None:
    part = copy_of()
    land(part, 0, 10, 100)
    sink = Sink()
    progress = TailProgress(sink, 1.0)
    progress.record([(TP0, part)])
    land(part, 10, 10, 200)  # the run breaks: a new sync
    progress.record([(TP0, part)])
    syncs = [c[1] for c in sink.calls if c[0] == "syncs"]
    assert syncs == [[(0, 100), (10, 110)], [(10, 200), (20, 210)]]
    # the micro-batch's commit: the syncs after those the task wrote, after its last one
    result = RangeResult("t", 0, 0, 30, 20, syncs=tuple(part.closed_syncs()), syncs_written=progress.written[TP0])
    pending, before = unwritten([result], {})
    assert [(s.upstream_offset, s.downstream_offset) for s in all_syncs(pending, before)] == [(20, 210)]
    assert history_syncs(pending, before) == []


def test_a_range_that_continues_a_released_copier_starts_no_run_in_the_history() -> None:
    # the copier before ended at 30, its closing sync (30, 130): this task's records land on its line
    part = PartitionCopy.of(PartitionRange("t", 0, 30, 30, "A.t", exact=True, prior_sync=(30, 130)))
    land(part, 30, 10, 130)
    sink = Sink()
    TailProgress(sink, 1.0).record([(TP0, part)])
    assert sink.calls[:2] == [("syncs", [(40, 140)]), ("history", [])]
    # a copier before whose records landed elsewhere: this task's first sync does start a run
    moved = PartitionCopy.of(PartitionRange("t", 0, 30, 30, "A.t", exact=True, prior_sync=(30, 100)))
    land(moved, 30, 10, 130)
    sink = Sink()
    TailProgress(sink, 1.0).record([(TP0, moved)])
    assert sink.calls[:2] == [("syncs", [(30, 130), (40, 140)]), ("history", [(30, 130)])]


def test_the_commit_does_not_write_again_the_closing_sync_the_task_wrote_last() -> None:
    """Written again at the commit, after the copy went on, it would supersede the newer syncs."""
    part = copy_of()
    land(part, 0, 10, 100)
    progress = TailProgress(Sink(), 1.0)
    progress.record([(TP0, part)])  # writes (0, 100) and the closing (10, 110)
    closed = RangeResult("t", 0, 0, 30, 10, syncs=tuple(part.closed_syncs()))
    assert written_of(closed, progress.written, progress.closed) == 2
    pending, before = unwritten([replace(closed, syncs_written=2)], {})
    assert all_syncs(pending, before) == [] and history_syncs(pending, before) == []
    land(part, 10, 10, 110)  # the run went on past what was written: its new end is the commit's to write
    moved = RangeResult("t", 0, 0, 30, 20, syncs=tuple(part.closed_syncs()))
    assert written_of(moved, progress.written, progress.closed) == 1


def test_nothing_moved_nothing_written_and_an_outage_is_left_to_the_commit() -> None:
    part = copy_of(5)
    sink = Sink()
    TailProgress(sink, 1.0).record([(TP0, part)])
    assert sink.calls == []
    land(part, 5, 10, 0)
    failing = TailProgress(Sink(KafkaError("down", retriable=True)), 1.0)
    failing.record([(TP0, part)])
    assert failing.written == {} and failing.positions == {}
    with pytest.raises(KafkaError):
        TailProgress(Sink(KafkaError("denied", retriable=False)), 1.0).record([(TP0, part)])


def test_progress_is_due_every_interval() -> None:
    now = [0.0]
    progress = TailProgress(Sink(), 2.0, clock=lambda: now[0])
    assert not progress.due()
    now[0] = 2.0
    assert progress.due()
    progress.record([])
    assert not progress.due()


def test_a_task_records_its_first_progress_within_half_a_second_then_every_interval() -> None:
    now = [0.0]
    progress = TailProgress(Sink(), 2.0, clock=lambda: now[0])
    now[0] = 0.5
    assert progress.due(), "nothing written yet: looked for every FIRST_S"
    progress.record([])  # nothing acknowledged yet: still nothing written
    now[0] = 1.0
    assert progress.due()
    part = copy_of()
    land(part, 0, 10, 100)
    progress.record([(TP0, part)])
    assert progress.positions == {TP0: 9}
    now[0] = 2.9
    assert not progress.due(), "written once: the interval from then on"
    now[0] = 3.0
    assert progress.due()


def test_the_planned_ranges_are_recorded_as_soon_as_they_are_acknowledged() -> None:
    now = [0.0]
    progress = TailProgress(Sink(), 60.0, clock=lambda: now[0])
    assert not progress.due(lambda: False)
    now[0] = 0.1
    assert progress.due(lambda: True), "the backlog is recorded without waiting for the interval"
    progress.record([])
    now[0] = 0.2
    assert not progress.due(lambda: True), "once"


def test_a_backlog_copied_fast_is_recorded_every_quarter_second_not_every_interval() -> None:
    now = [0.0]
    part = copy_of()
    progress = TailProgress(Sink(), 2.0, clock=lambda: now[0])
    land(part, 0, 10, 100)
    now[0] = 0.5
    assert progress.due()
    progress.record([(TP0, part)])
    assert progress.unrecorded([(TP0, part)]) == 0
    land(part, 10, 10, 110)
    assert progress.unrecorded([(TP0, part)]) == 10
    now[0] = 0.9
    assert not progress.due(unrecorded=lambda: BUSY_RECORDS - 1), "few waiting: the interval"
    now[0] = 1.0
    assert progress.due(unrecorded=lambda: BUSY_RECORDS), "many waiting: BUSY_S after the last record"
    progress.record([(TP0, part)])
    now[0] = 1.0 + BUSY_S / 2
    assert not progress.due(unrecorded=lambda: 10 * BUSY_RECORDS), "never more often than BUSY_S"


def test_a_partition_that_lost_records_is_left_to_the_commit_which_writes_the_ledger_first() -> None:
    part = copy_of()
    land(part, 0, 10, 100)
    part.lost = (10, 20)  # deleted on the source before they were mirrored
    land(part, 20, 10, 110)
    sink = Sink()
    TailProgress(sink, 1.0).record([(TP0, part)])
    assert sink.calls == []


def test_a_partitions_rows_commit_one_after_the_other_and_no_older_sync_after_a_newer() -> None:
    """A released copier's row, then the snapshot of the task that released it (seen in workload e:
    each row's last written sync was taken for the other's, and (119, 119) went out after (153, 153))."""
    released = RangeResult("t", 0, 103, 119, 119, syncs=((58, 58), (119, 119)), syncs_written=2)
    snapshot = RangeResult("t", 0, 119, 153, 153, syncs=((119, 119), (153, 153)), syncs_written=2)
    assert to_commit([released, snapshot], {}) == ([], [])
    # the snapshot's closing sync not written by its task: only it goes out, on the run's line
    syncs, history = to_commit([released, replace(snapshot, syncs_written=1)], {})
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs] == [(153, 153)] and history == []
    # the run broke in the snapshot's range: its run start goes to the history too
    broke = RangeResult("t", 0, 119, 153, 153, syncs=((119, 119), (130, 140), (153, 163)), syncs_written=1)
    syncs, history = to_commit([released, broke], {})
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs] == [(130, 140), (153, 163)]
    assert [(s.upstream_offset, s.downstream_offset) for s in history] == [(130, 140)]
