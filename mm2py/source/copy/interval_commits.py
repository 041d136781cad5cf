"""Exactly-once copy intervals: a task's transactions, one per commit period, over its slice's id.

An exactly-once copy task of a copy interval (mm2py.source.copy.continuous) copies for
``batch.duration.ms``; one transaction for all of it would hide its records from read_committed
consumers until the interval's end. ``TransactionPeriods`` commits the task's transaction every
``copy.tail.commit.ms`` instead, with the positions (and offset syncs) of what it holds, and once
more at the task's end; a read_committed consumer waits at most a commit period and the drain
before the commit.

Invariants:
- one writer per partition, fenced by the producer epoch: the task holds its slice's
  transactional id (mm2py.source.copy.transactional) for the whole interval; its InitProducerId
  at the interval's start bumps the id's epoch and aborts any open transaction of an earlier
  holder (Spark's failed attempt, the same slice of an earlier interval still running, a killed
  run's task), and the brokers refuse that holder's later produce and EndTxn (an older epoch).
  A run's start fences every id of the flow (mm2py.source.copy.exactly_once). Each EndTxn bumps
  the epoch again (transaction version 2): the task stamps what it sends next with the epoch the
  coordinator answered;
- a commit holds every batch the task sent since the last one, each acknowledged (the copier
  drains before ``record``), and the positions ``acked_next - 1`` of the partitions that moved:
  a committed position is never ahead of what committed transactions hold, and everything a
  committed transaction holds lies at or below its positions;
- each sync is written once, in order, before (or in) the commit of the position it maps;
- after a commit every partition's sequence starts again at 0 and its first batch goes alone
  (the leader adds the partition to the new transaction);
- a crash at any point leaves at most the open transaction, aborted by the id's next
  InitProducerId or the coordinator's timeout; the next copy of each partition starts after its
  committed position (the planner, or Spark's retry: ``after_committed``), so read_committed
  consumers see nothing twice and miss nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from mm2py.formats import SourceOffset
from mm2py.source.copy.copy_settings import ProducerState
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.tail_commit import gather
from mm2py.source.copy.transactional import TaskTransaction
from mm2py.types import TP


class TransactionPeriods:
    """Commits one exactly-once task's transaction every ``interval_s``. Constructor does no I/O."""

    drains = True  # a transaction commits only acknowledged batches: nothing may be in flight

    def __init__(self, txn: TaskTransaction, interval_s: float, clock: Callable[[], float] = time.monotonic):
        self.txn = txn
        self.interval_s = interval_s
        self.clock = clock
        self._last = clock()
        self.written: dict[TP, int] = {}  # per source partition: how many leading syncs were committed
        self.closed: dict[TP, tuple[int, int]] = {}  # left empty: exactly-once rows count only ``written``
        self.positions: dict[TP, int] = {}  # per source partition: the last position committed
        self.commits = 0
        self._sent = 0  # batches sent as of the last commit

    def due(self, caught_up: Callable[[], bool] = lambda: False, unrecorded: Callable[[], int] = lambda: 0) -> bool:
        """A commit period passed since the last commit (or the task's start)."""
        return self.clock() - self._last >= self.interval_s

    def unrecorded(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> int:
        return 0  # only the period makes a commit due

    def record(self, parts: Iterable[tuple[TP, PartitionCopy]]) -> ProducerState | None:
        """Commit what was sent since the last commit, with its positions and syncs; the next
        transaction's producer state, or None when there was nothing to commit."""
        self._last = self.clock()
        parts = list(parts)
        spec = self.txn.spec
        got = gather(parts, self.positions, self.written, syncs=spec.syncs_topic is not None,
                     history=spec.history_topic is not None)  # a gap's position too, as TaskTransaction.commit
        sent = sum(part.batches for _, part in parts)
        if not got.positions and sent == self._sent:
            return None
        if got.positions:
            state = self.txn.commit_positions(
                [SourceOffset(spec.source_alias, tp[0], tp[1], at, leader_epoch=got.epochs.get(tp))
                 for tp, at in got.positions.items()], got.syncs, got.history)
            self.commits += 1
        else:  # sent but nothing acknowledged moved a position: none of it counts, so none stays
            self.txn.txn.abort()
            state = self.txn.state()
        self.written.update(got.counts)
        self.positions.update(got.positions)
        self._sent = sent
        for _, part in parts:  # a new epoch: sequences from 0, each partition added to the transaction again
            part.sequence = 0
            part.answered = False
        return state

    def finish(self) -> None:
        """At the task's end, after the copier's last ``record``: a task that committed nothing ends its
        transaction (as ``TaskTransaction.commit`` with nothing moved)."""
        if not self.commits:
            self.txn.abort()
