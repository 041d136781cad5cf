"""An exactly-once copy interval's transactions (mm2py.source.copy.interval_commits) on the copier's fakes.

The fake target keeps what each produce carried (producer id, epoch, base sequence, the unanswered
writes) so the tests see, per commit, what was in flight and how the batches after it were stamped.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mm2py.formats import OffsetSync, SourceOffset
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings, ProducerState
from mm2py.source.copy.interval_commits import TransactionPeriods
from mm2py.source.copy.tail import TailWindow
from mm2py.source.copy.transactional import ExactlyOnce
from mm2py.source.ranges import PartitionRange
from mm2py.types import TP
from tests.fakes.copy_path import Answer, FakeSource, FakeTarget, batch

SPEC = ExactlyOnce("A", "B", "mm2-offsets.A.internal", syncs_topic="mm2-offset-syncs.B.internal")


class StampedTarget(FakeTarget):
    """A ``FakeTarget`` that keeps (epoch, base sequence) of every batch it was sent, per partition."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: dict[TP, list[tuple[int, int]]] = {}

    def produce(self, node: int, batches: dict[TP, tuple], *, timeout_ms: int,
                transactional_id: str | None = None) -> Answer:
        for tp, pieces in batches.items():
            raw = b"".join(bytes(p) for p in pieces)
            self.stamps.setdefault(tp, []).append((struct.unpack_from(">h", raw, 51)[0],
                                                   struct.unpack_from(">i", raw, 53)[0]))
        return super().produce(node, batches, timeout_ms=timeout_ms, transactional_id=transactional_id)


@dataclass
class Committed:
    positions: dict[TP, int]
    syncs: list[tuple[int, int, int]]  # (partition, upstream, downstream)
    in_flight: int  # writes the target had not answered at the commit
    sent: int  # batches the target had been sent by then


@dataclass
class RecordingTransaction:
    """The ``TaskTransaction`` surface the periods use; each commit bumps the epoch, as transaction version 2."""

    target: StampedTarget
    spec: ExactlyOnce = SPEC
    epoch: int = 3
    commits: list[Committed] = field(default_factory=list)
    aborts: int = 0

    @property
    def txn(self) -> RecordingTransaction:
        return self

    def state(self) -> ProducerState:
        return ProducerState(7, self.epoch, "mm2py-A->B-0")

    def commit_positions(self, positions: Sequence[SourceOffset], syncs: Sequence[OffsetSync],
                         history: Sequence[OffsetSync]) -> ProducerState:
        self.commits.append(Committed({(p.topic, p.partition): p.offset for p in positions if p.offset is not None},
                                      [(s.partition, s.upstream_offset, s.downstream_offset) for s in syncs],
                                      sum(self.target.unanswered.values()),
                                      sum(len(s) for s in self.target.stamps.values())))
        self.epoch += 1
        return self.state()

    def abort(self) -> None:
        self.aborts += 1
        self.epoch += 1


class Ticks:
    """A clock that moves one second at each reading: every look at ``due`` finds a period passed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def interval_copy(logs: dict[TP, list[bytes]], ranges: list[PartitionRange],
                  until: float) -> tuple[StampedTarget, RecordingTransaction, TransactionPeriods, list]:
    target = StampedTarget()
    txn = RecordingTransaction(target)
    periods = TransactionPeriods(txn, 1.0, clock=Ticks())  # type: ignore[arg-type]
    mode = CopyMode(producer=txn.state(), tail=TailWindow(until, progress=periods))
    c = Copier(FakeSource(logs), target, ranges, CopySettings(offset_lag_max=1000), mode)  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {(r.target_topic, r.partition): 2 for r in ranges}  # type: ignore[method-assign]
    return target, txn, periods, c.run()


def test_each_period_commits_what_was_acknowledged_and_the_batches_after_it_take_the_next_epoch() -> None:
    logs = {("t", 0): [batch(o, 10) for o in range(0, 100, 10)], ("t", 1): [batch(o, 5) for o in range(0, 50, 5)]}
    target, txn, periods, results = interval_copy(
        logs, [PartitionRange("t", 0, 0, 60, "A.t"), PartitionRange("t", 1, 0, 20, "A.t")], time.monotonic() + 0.3)
    assert len(txn.commits) >= 3, txn.commits
    assert all(c.in_flight == 0 for c in txn.commits), "a transaction commits only acknowledged batches"
    # positions move forward, each commit's at what was acknowledged by then; the last at the copy's end
    for tp in (("t", 0), ("t", 1)):
        moves = [c.positions[tp] for c in txn.commits if tp in c.positions]
        assert moves == sorted(set(moves)), moves
    assert {tp: at for c in txn.commits for tp, at in c.positions.items()} == {("t", 0): 99, ("t", 1): 49}
    assert {(r.partition, r.next_offset) for r in results} == {(0, 100), (1, 50)}, "the interval copied past the plan"
    # every batch carries the epoch of the transaction it went in, sequences from 0 in each
    for stamps in target.stamps.values():
        by_epoch: dict[int, list[int]] = {}
        for epoch, sequence in stamps:
            by_epoch.setdefault(epoch, []).append(sequence)
        assert len(by_epoch) >= 2, stamps
        assert all(seqs[0] == 0 and seqs == sorted(seqs) for seqs in by_epoch.values()), stamps
        assert sorted(by_epoch) == [e for e, _ in dict.fromkeys(stamps)], "epochs only go up"
    sent = [c.sent for c in txn.commits]
    assert sent == sorted(sent) and sent[-1] == sum(len(s) for s in target.stamps.values())
    assert target.logs[("A.t", 0)] == list(range(0, 100, 10)), "in order, each batch once"
    # each sync committed once, in order, before or with the position it maps
    for partition in (0, 1):
        syncs = [(up, down) for c in txn.commits for p, up, down in c.syncs if p == partition]
        assert syncs[0] == (0, 0) and syncs == sorted(set(syncs)), syncs
    periods.finish()
    assert txn.aborts == 0, "a task that committed leaves no transaction to end"


def test_an_interval_that_copied_nothing_ends_its_transaction_without_a_commit() -> None:
    logs: dict[TP, list[bytes]] = {("t", 0): []}
    _target, txn, periods, results = interval_copy(logs, [PartitionRange("t", 0, 5, 5, "A.t")],
                                                   time.monotonic() + 0.05)
    assert not txn.commits and results[0].next_offset == 5
    periods.finish()
    assert txn.aborts == 1
