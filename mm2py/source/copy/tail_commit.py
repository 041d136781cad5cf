"""A copy task's progress made durable as the target acknowledges it, not only at the micro-batch's commit.

A micro-batch commits after its last task ended and Spark wrote its logs; a tailing task
(mm2py.source.copy.tail) copies for ``copy.tail.ms`` before that. A process killed in between would
leave the positions where the last commit put them and copy the same, growing window again
after every restart (a crash loop). ``TailProgress`` records, every ``copy.tail.commit.ms``,
what the target has acknowledged so far, as the micro-batch's commit would
(mm2py.source.plan.commit); every ``FIRST_S`` until a task first has progress to record, so a run
killed seconds after its start has moved its positions; every ``BUSY_S`` while at least
``BUSY_RECORDS`` acknowledged records wait to be recorded (a backlog copied at many times the rate
it arrived at); once as soon as a tailing task's planned ranges are all acknowledged; and once at
every task's end. A kill then costs at most the interval's worth of arrivals copied again, or
about ``BUSY_RECORDS`` records per task while a backlog is copied.

Invariants:
- a position written is ``acked_next - 1`` of its partition (mm2py.source.copy.partition): every
  offset below it was acknowledged by the target; never ahead of that, and only when it moved;
- the syncs mapping the offsets below a position are written before it (syncs, then their
  history, then positions), so translation never lacks the mapping of a mirrored record;
- each of a partition's syncs is written once by the task: ``written`` says how many of its
  leading syncs went out, so the micro-batch's commit writes only those after them and the syncs
  topic never sees an older sync after a newer one; a range that continues a released copier
  (``prior_sync``, mm2py.source.copy.resident_task) does not write that copier's closing sync
  again, and its first sync on the same line starts no run in the history;
- a write refused for a retriable reason (an outage) is left for the next interval or the
  micro-batch's commit, which writes everything; other errors fail the task, as the copy would;
- a partition that lost records (deleted before they were mirrored) is left to the commit, which
  records the gap in the ledger before its position moves past it;
- only at-least-once tasks record here; exactly-once tasks commit in their transactions
  (mm2py.source.copy.interval_commits), from the same ``gather``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.formats import OffsetSync
from mm2py.source.copy.copy_settings import ProducerState
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.ranges import RangeResult
from mm2py.source.sync_history import history_for, run_starts
from mm2py.source.sync_writer import OffsetSyncWriter
from mm2py.stores.positions import PositionStore
from mm2py.types import TP

log = structlog.get_logger(__name__)

CHECK_S = 0.05  # least time between two looks at whether the planned ranges are all acknowledged
FIRST_S = 0.5  # until a task's first progress is written, it is looked for this often
BUSY_S = 0.25  # least time between two records made because many acknowledged records wait
BUSY_RECORDS = 5000  # acknowledged records waiting that make a record due after BUSY_S


class ProgressSink(Protocol):
    """Where a task's progress goes: the flow's syncs topic (and history), and its positions."""

    def write_syncs(self, syncs: Sequence[OffsetSync], history: Sequence[OffsetSync]) -> None: ...
    def save_positions(self, positions: Mapping[TP, int], epochs: Mapping[TP, int]) -> None: ...


class TaskProgress(Protocol):
    """What a copy task's window records its progress with: ``TailProgress`` (at-least-once), or an
    exactly-once task's transactions (mm2py.source.copy.interval_commits). With ``drains`` the copier
    waits for every write in flight before ``record``, and stamps the batches after it with the
    producer state ``record`` returns (a transaction's successor)."""

    drains: bool
    written: dict[TP, int]
    closed: dict[TP, tuple[int, int]]

    def due(self, caught_up: Callable[[], bool] = ..., unrecorded: Callable[[], int] = ...) -> bool: ...
    def unrecorded(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> int: ...
    def record(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> ProducerState | None: ...


class TailProgress:
    """Records one task's acknowledged progress every ``interval_s``. Constructor does no I/O."""

    drains = False  # positions are written as they are acknowledged, writes go on meanwhile

    def __init__(self, sink: ProgressSink, interval_s: float, *, syncs: bool = True, history: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self.sink = sink
        self.interval_s = interval_s
        self.syncs = syncs  # emit.offset-syncs.enabled
        self.history = history and syncs  # offset-syncs.history.enabled
        self.clock = clock
        self._last = clock()
        self._backlog_owed = True  # the planned ranges are recorded as soon as they are acknowledged
        self._checked = float("-inf")
        self.written: dict[TP, int] = {}  # per source partition: how many leading syncs went out
        self.closed: dict[TP, tuple[int, int]] = {}  # per source partition: the last sync written (``written_of``)
        self.positions: dict[TP, int] = {}  # per source partition: the last position written
        self._warned = False

    def due(self, caught_up: Callable[[], bool] = lambda: False, unrecorded: Callable[[], int] = lambda: 0) -> bool:
        """Time to record: the interval passed (``FIRST_S`` while nothing was written yet),
        ``caught_up()`` turned true for the first time, or ``BUSY_S`` passed with at least
        ``BUSY_RECORDS`` acknowledged records ``unrecorded()``.

        ``caught_up`` and ``unrecorded`` are asked at most every ``CHECK_S``.
        """
        now = self.clock()
        since = now - self._last
        if since >= (self.interval_s if self.positions else min(FIRST_S, self.interval_s)):
            return True
        if now - self._checked < CHECK_S:
            return False
        self._checked = now
        if self._backlog_owed and caught_up():
            self._backlog_owed = False
            return True
        return since >= BUSY_S and unrecorded() >= BUSY_RECORDS

    def unrecorded(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> int:
        """Records the target acknowledged that no position written by this task covers yet."""
        return sum(max(0, part.acked_next() - max(self.positions.get(tp, -1) + 1, part.range.start))
                   for tp, part in parts)

    def record(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> ProducerState | None:
        """Write the syncs, then the positions, of what the target acknowledged since the last call."""
        self._last = self.clock()
        # a partition that lost records waits for the commit, which records the gap first
        got = gather(((tp, p) for tp, p in parts if p.lost is None), self.positions, self.written,
                     syncs=self.syncs, history=self.history)
        if not got.positions:
            return None
        try:
            if got.syncs:
                self.sink.write_syncs(got.syncs, got.history)
            self.written.update(got.counts)
            self.closed.update(got.closing)
            self.sink.save_positions(got.positions, got.epochs)
        except KafkaError as e:
            if not e.retriable:
                raise
            if not self._warned:
                log.warning("a copy task could not record its progress; its micro-batch's commit will",
                            error=str(e))
                self._warned = True
            return None
        self.positions.update(got.positions)
        return None


@dataclass
class Gathered:
    """What a task has to record since its last record: positions (with the leader epoch of each, where
    known), the syncs and history mapping the offsets below them, and each partition's count of syncs."""

    positions: dict[TP, int] = field(default_factory=dict)
    epochs: dict[TP, int] = field(default_factory=dict)
    syncs: list[OffsetSync] = field(default_factory=list)
    history: list[OffsetSync] = field(default_factory=list)
    counts: dict[TP, int] = field(default_factory=dict)
    closing: dict[TP, tuple[int, int]] = field(default_factory=dict)  # each partition's last sync, closing its run


def written_of(r: RangeResult, written: Mapping[TP, int], closed: Mapping[TP, tuple[int, int]]) -> int:
    """How many of ``r``'s leading syncs its task wrote: ``written``'s count, and the sync closing the
    row too when it is the one the task wrote last. The commit writes only those after: a closing
    sync written again after the copier's newer syncs would supersede them (mm2py.checkpoint.translation)."""
    tp = (r.topic, r.partition)
    done = written.get(tp, 0)
    if len(r.syncs) == done + 1 and closed.get(tp) == r.syncs[-1]:
        return done + 1
    return done


def gather(parts: Iterable[tuple[TP, PartitionCopy]], recorded: Mapping[TP, int], written: Mapping[TP, int], *,
           syncs: bool, history: bool) -> Gathered:
    """The positions ``acked_next - 1`` that moved past ``recorded``, and the syncs after the ``written`` ones."""
    got = Gathered()
    for tp, part in parts:
        at = part.acked_next() - 1
        if at < part.range.start or at <= recorded.get(tp, -1):
            continue
        got.positions[tp] = at
        if (epoch := part.epoch_below(at + 1)) >= 0:  # the batch holding it (mm2py.source.plan.divergence)
            got.epochs[tp] = epoch
        if not syncs:
            continue
        done = written.get(tp, 0)
        closed = part.closed_syncs()
        pairs = closed[done:]
        before = part.syncs[done - 1] if done else part.range.prior_sync
        if not done and pairs and pairs[0] == before:
            pairs = pairs[1:]  # the copier before wrote it (its closing sync): the topic holds it
        got.syncs += [OffsetSync(tp[0], tp[1], up, down) for up, down in pairs]
        if history:
            got.history += [OffsetSync(tp[0], tp[1], up, down) for up, down in run_starts(pairs, before)]
        got.counts[tp] = len(part.syncs)
        if closed:
            got.closing[tp] = closed[-1]
    return got


class FlowProgressSink:
    """``ProgressSink`` over a flow's real clusters, with the committer's writers. Constructor does no I/O."""

    def __init__(self, flow: FlowConfig):
        timeout = flow.admin_timeout_ms
        self.positions = PositionStore(flow.target, flow.source.alias, timeout_ms=timeout)
        self.syncs = OffsetSyncWriter(flow) if flow.checkpoints.emit_offset_syncs_enabled else None
        checkpoints = flow.checkpoints
        self.history = (history_for(flow)
                        if checkpoints.emit_offset_syncs_enabled and checkpoints.offset_syncs_history_enabled else None)

    def open(self) -> FlowProgressSink:
        """Start the producers now, without waiting on them: librdkafka connects and fetches the
        idempotent producer id in the background while the task copies, so the first record
        does not wait for that (``PositionStore.open``)."""
        self.positions.open()
        if self.syncs is not None:
            self.syncs.open()
        return self

    def write_syncs(self, syncs: Sequence[OffsetSync], history: Sequence[OffsetSync]) -> None:
        if self.syncs is None:
            return
        if self.history is not None and history:
            self.history.cover({s.topic for s in syncs})
        self.syncs.write(syncs, history)

    def save_positions(self, positions: Mapping[TP, int], epochs: Mapping[TP, int]) -> None:
        self.positions.save(positions, epochs)
