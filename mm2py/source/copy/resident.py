"""A resident copier: a tail's copy that outlives its Spark task, so a caught-up flow has no gap.

Between two tails (mm2py.source.copy.tail) a micro-batch's cycle passes: the last task ends, the
sink commits, the next plan is made and its task launched, and records arriving meanwhile wait
(0.5-0.7 s on two cores). With ``copy.resident.enabled`` a tailing task runs its copier in a
thread of the Python worker and returns at its window's end with a *snapshot* of what the
target acknowledged, while the copier goes on for up to ``copy.resident.grace.ms`` more (its
lease). The next task of the flow that holds any of its partitions *releases* it
(mm2py.source.copy.handover): the copier ends where it stands, with nothing in flight, and the
task goes on from its acknowledged ends.

Invariants:
- one writer per partition: a copier writes only while its lease runs; a task releases every
  resident copier of its flow on this host holding any of its partitions, and waits for it to
  end, before its own copier starts; with executors on other hosts (a non-local master) a task
  that did not release all its partitions here waits the grace first, which outlasts any lease
  the previous micro-batch's tasks left, as they returned before this task started;
- a snapshot is taken in the copier's thread, after its progress was recorded, once the target
  acknowledged every planned range to its end (or it stalled): Spark's offsets stay a lower bound;
  a snapshot row's ``next_offset`` is ``acked_next``, never a fetch position past batches still
  queued or in flight, which a failure would lose;
- what a copier copied after its snapshot reaches the sink once, as a *delta* row returned by the
  task that released it (``ResidentCopy.release``); its progress was recorded by the copier itself
  (mm2py.source.copy.tail_commit), syncs once each; rows of a partition planned back (a reset)
  and of a copier a reset ended are dropped, never written after the reset's
  (mm2py.source.copy.resident_task: ``went_back``, ``settle``);
- a copier's clients are lent to it (mm2py.worker.lend_clients): no other task of the worker uses
  them until it ended;
- a copier that failed is released with no rows: the task starts at its plan, after the recorded
  positions (at-least-once: what was acknowledged since, copied again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from mm2py.source.copy.copier import Copier
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.tail import TailWindow
from mm2py.source.copy.tail_commit import TailProgress, written_of
from mm2py.source.ranges import RangeResult
from mm2py.types import TP

COUNTS = ("records", "bytes", "batches", "rebuilt", "dropped", "went_home", "tailed", "schema_passed",
          "schema_dead_lettered")


class SnapshotProgress:
    """A resident copier's progress: the tail's (``TailProgress``), and a snapshot when asked.

    Runs in the copier's thread. ``ready`` says every planned range reached its end or stalled.
    """

    drains = False

    def __init__(self, inner: TailProgress):
        self.inner = inner
        self.ready: Callable[[], bool] = lambda: False
        self.wanted = threading.Event()
        self.taken = threading.Event()
        self.rows: list[RangeResult] = []
        self.written: dict[TP, int] = inner.written  # the same dicts: the tail's record fills them
        self.closed: dict[TP, tuple[int, int]] = inner.closed

    def due(self, caught_up: Callable[[], bool] = lambda: False, unrecorded: Callable[[], int] = lambda: 0) -> bool:
        return (self.wanted.is_set() and self.ready()) or self.inner.due(caught_up, unrecorded)

    def unrecorded(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> int:
        return self.inner.unrecorded(parts)

    def record(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> None:
        parts = list(parts)
        self.inner.record(parts)
        if self.wanted.is_set() and self.ready():
            self.rows = [with_written(acked_row(p), self.written, self.closed) for _, p in parts]
            self.wanted.clear()
            self.taken.set()


def acked_row(part: PartitionCopy) -> RangeResult:
    """``part``'s row as of what the target acknowledged, taken while it copies on: ``next_offset``
    is ``acked_next`` (batches queued or in flight are not mirrored yet), and its syncs stay open."""
    kept = len(part.syncs)
    row = part.result()
    del part.syncs[kept:]  # result() closes the syncs for good; the copy goes on
    acked = part.acked_next()
    if acked < row.next_offset:
        row = replace(row, next_offset=acked, leader_epoch=part.epoch_below(acked))
    return row


def with_written(r: RangeResult, written: dict[TP, int], closed: dict[TP, tuple[int, int]]) -> RangeResult:
    """``r`` saying how many of its leading syncs its copier wrote already (``written_of``)."""
    return replace(r, syncs_written=written_of(r, written, closed))


def delta(final: RangeResult, base: RangeResult | None) -> RangeResult:
    """What ``final`` holds past the snapshot row ``base`` (the whole of it without one)."""
    if base is None:
        return final
    counts: dict[str, Any] = {name: getattr(final, name) - getattr(base, name) for name in COUNTS}
    if base.lost_start >= 0:  # the ledger has it already
        counts.update(lost_start=-1, lost_end=-1)
    before = {t[0]: t for t in base.transformed}
    counts["transformed"] = tuple(
        (t[0], t[1] - b[1], t[2] - b[2], t[3] - b[3], t[4] - b[4])
        for t in final.transformed for b in [before.get(t[0], (t[0], 0, 0, 0, 0))])
    return replace(final, start=base.next_offset, end=max(base.next_offset, final.end), **counts)


def ends_of(rows: Iterable[RangeResult]) -> dict[TP, tuple[int, int]]:
    """Per partition: where the copier's acknowledged writes end, and its planned range's end."""
    return {(r.topic, r.partition): (r.next_offset, r.end) for r in rows}


class ResidentCopy:
    """One copier running in a thread of this worker until its lease ends or a task releases it.

    Constructor does no I/O; ``start`` runs the copier. ``window``'s ``until`` is the lease; its
    progress must be ``progress``. ``on_end(failed)`` runs in the copier's thread once it ended
    (its clients given back).
    """

    def __init__(self, copier: Copier, window: TailWindow, progress: SnapshotProgress,
                 on_end: Callable[[bool], None] = lambda failed: None):
        self.copier = copier
        self.window = window
        self.progress = progress
        self.on_end = on_end
        self.tps: frozenset[TP] = frozenset(copier.parts)
        self.error: BaseException | None = None
        self.final: list[RangeResult] | None = None
        self.reported: dict[TP, RangeResult] = {}
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._claimed = False
        self._thread = threading.Thread(target=self._run, name="mm2py-resident-copier", daemon=True)
        progress.ready = self._ready

    def _ready(self) -> bool:
        """Every planned range acknowledged to its end, or stalled. A partition done short of its end
        (its tail or its copy stopped) is not: its row waits for the copier's final one."""
        return all(p.stalled or p.acked_next() >= p.range.end for p in self.copier.parts.values())

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.final = self.copier.run()
        except BaseException as e:  # handed to whoever waits for the copier
            self.error = e
        finally:
            self.on_end(self.error is not None)
            self.ended.set()

    def snapshot(self) -> list[RangeResult]:
        """The rows of what the target acknowledged, once every planned range reached its end; the
        final rows if the copier ended meanwhile (none if it failed: ``raise_failure``)."""
        progress = self.progress
        progress.taken.clear()
        progress.wanted.set()
        while not progress.taken.wait(0.02) and not self.ended.is_set():
            pass
        rows = self.copier.writer.finish(progress.rows) if progress.taken.is_set() else self._claim()
        self.reported = {(r.topic, r.partition): r for r in rows}
        return rows

    def release(self, timeout_s: float) -> tuple[list[RangeResult], dict[TP, tuple[int, int]]]:
        """End the copier where it stands (nothing in flight, progress recorded): its rows past the
        last snapshot, and ``ends_of`` its final rows. Raises TimeoutError while it still runs: it
        may still write."""
        self.window.until = float("-inf")
        if not self.ended.wait(timeout_s):
            raise TimeoutError(f"a resident copier of {sorted(self.tps)[:3]} did not end in {timeout_s:.0f} s")
        final = self._claim()
        return [delta(r, self.reported.get((r.topic, r.partition))) for r in final], ends_of(final)

    def _claim(self) -> list[RangeResult]:
        """The final rows, once: a copier that failed has none (its progress is recorded)."""
        self.ended.wait()
        with self._lock:
            if self._claimed or self.final is None:
                self._claimed = True
                return []
            self._claimed = True
            return list(self.final)

    def raise_failure(self) -> None:
        if self.error is not None:
            raise self.error
