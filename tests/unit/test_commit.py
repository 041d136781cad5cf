"""The source connector's commit step: what it writes, in which order, on fakes of our interfaces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from mm2py.config import load_text
from mm2py.errors import KafkaError
from mm2py.flow_policy import policy_for
from mm2py.formats import OffsetSync
from mm2py.source.plan.commit import FlowCommitter
from mm2py.source.ranges import RangeResult
from mm2py.source.sync_history import run_starts
from mm2py.types import TP

FLOW = load_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                 "A->B.enabled = true\n").enabled_flows[0]


class Journal:
    """Fakes of the position store, the sync writer and the source admin, writing to one log."""

    def __init__(self, fail_syncs: bool = False):
        self.events: list[tuple[str, object]] = []
        self.history: list[list[tuple[str, int, int, int]]] = []
        self.fail_syncs = fail_syncs

    def open(self) -> None:
        self.events.append(("opened", None))

    def save(self, positions: Mapping[TP, int], epochs: Mapping[TP, int] | None = None) -> None:
        self.events.append(("positions", dict(positions)))
        self.epochs = dict(epochs or {})

    def write(self, syncs: Iterable[OffsetSync], history: Iterable[OffsetSync] = ()) -> int:
        if self.fail_syncs:
            raise KafkaError("syncs topic unreachable", cluster="A", retriable=True)
        syncs = list(syncs)
        self.events.append(("syncs", [(s.topic, s.partition, s.upstream_offset, s.downstream_offset) for s in syncs]))
        self.history.append([(s.topic, s.partition, s.upstream_offset, s.downstream_offset) for s in history])
        return len(syncs)

    def list_offsets(self, tps: list[TP], spec: str) -> dict[TP, int]:
        return {tp: 100 for tp in tps}

    def close(self) -> None:
        self.events.append(("closed", None))


def committer(journal: Journal) -> FlowCommitter:
    return FlowCommitter(FLOW, policy_for(FLOW), journal, journal, journal)


def test_syncs_are_written_before_positions_and_positions_are_what_was_copied() -> None:
    journal = Journal()
    committer(journal).commit([
        RangeResult("t", 0, 0, 50, 40, records=40, syncs=((0, 0), (40, 40))),  # stopped short at 40
        RangeResult("t", 1, 10, 20, 20, records=10, syncs=((10, 5), (20, 15))),
        RangeResult("t", 2, 7, 9, 7),  # nothing copied: no position
    ], batch_id=3)
    assert [kind for kind, _ in journal.events] == ["syncs", "positions"]
    assert journal.events[0][1] == [("t", 0, 0, 0), ("t", 0, 40, 40), ("t", 1, 10, 5), ("t", 1, 20, 15)]
    assert journal.events[1][1] == {("t", 0): 39, ("t", 1): 19}


def test_each_position_carries_the_leader_epoch_of_its_batch_where_known() -> None:
    journal = Journal()
    committer(journal).commit([RangeResult("t", 0, 0, 50, 50, records=50, leader_epoch=4),
                               RangeResult("t", 1, 0, 9, 9, records=9)], batch_id=0)  # a legacy batch: unknown
    assert journal.events[-1][1] == {("t", 0): 49, ("t", 1): 8} and journal.epochs == {("t", 0): 4}


def test_positions_do_not_move_when_syncs_cannot_be_written() -> None:
    journal = Journal(fail_syncs=True)
    c = committer(journal)
    c.max_outage_s = 0  # the outage outlasts what a commit waits for
    with pytest.raises(KafkaError):
        c.commit([RangeResult("t", 0, 0, 10, 10, records=10, syncs=((0, 0), (10, 10)))], 0)
    assert journal.events == [], "a failed micro-batch is retried from the old positions"


def test_an_empty_micro_batch_writes_nothing_and_totals_add_up() -> None:
    journal = Journal()
    c = committer(journal)
    c.commit([], 0)
    assert journal.events == []
    c.commit([RangeResult("t", 0, 0, 10, 10, records=10, bytes=1000)], 1)
    c.commit([RangeResult("t", 0, 10, 15, 15, records=5, bytes=500)], 2)
    assert (c.totals.batches, c.totals.records, c.totals.bytes) == (2, 15, 1500)
    assert c.totals.positions == {("t", 0): 14}


def test_the_log_line_rates_a_micro_batch_over_its_whole_cycle_not_its_commit(monkeypatch) -> None:
    from structlog.testing import capture_logs

    import mm2py.source.plan.commit as commit_module

    # the committer's reads of the clock: at its start; then per commit its start, the end of its
    # writes, the lag field's check, its end and the rate field
    clock = iter([100.0, 130.0, 130.5, 130.5, 130.5, 130.5, 142.0, 142.25, 142.25, 142.25, 142.25])
    monkeypatch.setattr(commit_module.time, "monotonic", lambda: next(clock))
    c = committer(Journal())
    c.clock = lambda: 0.0  # the outage deadline's clock, apart
    with capture_logs() as logs:
        c.commit([RangeResult("t", 0, 0, 10, 10, records=10, bytes=30_000_000)], 1)
        c.commit([RangeResult("t", 0, 10, 20, 20, records=10, bytes=11_750_000)], 2)
    lines = [e for e in logs if e["event"] == "micro-batch mirrored"]
    assert [(e["batch_seconds"], e["commit_seconds"], e["mb_per_s"]) for e in lines] == [
        (30.5, 0.5, 1.0),  # the first cycle counts from the flow's start
        (11.75, 0.25, 1.0),  # then from the previous commit's end: its copy, planning and commit
    ]


def test_without_offset_syncs_only_positions_are_written() -> None:
    journal = Journal()
    FlowCommitter(FLOW, policy_for(FLOW), journal, None, journal).commit(
        [RangeResult("t", 0, 0, 10, 10, records=10, syncs=((0, 0),))], 0)
    assert [kind for kind, _ in journal.events] == ["positions"]


def test_open_starts_both_writers_before_anything_is_written() -> None:
    journal = Journal()
    c = committer(journal)
    c.open()
    c.commit([RangeResult("t", 0, 0, 10, 10, records=10, syncs=((0, 0), (10, 10)))], 0)
    assert [kind for kind, _ in journal.events] == ["opened", "opened", "syncs", "positions"]


def test_an_outage_while_recording_is_waited_out_not_copied_again() -> None:
    class Flaky(Journal):
        def __init__(self) -> None:
            super().__init__()
            self.refusals = 3

        def save(self, positions: Mapping[TP, int], epochs: Mapping[TP, int] | None = None) -> None:
            if self.refusals:
                self.refusals -= 1
                raise KafkaError("could not record positions", cluster="B", retriable=True)
            super().save(positions, epochs)

    journal = Flaky()
    c = committer(journal)
    slept: list[float] = []
    c.sleep = slept.append
    c.commit([RangeResult("t", 0, 0, 10, 10, records=10, syncs=((0, 0), (10, 10)))], 0)
    assert [kind for kind, _ in journal.events] == ["syncs", "positions"] and slept == [0.5, 1.0, 2.0]


def test_a_refusal_that_waiting_cannot_fix_fails_at_once() -> None:
    class Refused(Journal):
        def save(self, positions: Mapping[TP, int], epochs: Mapping[TP, int] | None = None) -> None:
            raise KafkaError("not authorized", cluster="B", retriable=False)

    c = committer(Refused())
    c.sleep = lambda s: None
    with pytest.raises(KafkaError, match="not authorized"):
        c.commit([RangeResult("t", 0, 0, 10, 10, records=10)], 0)


def test_a_retried_exactly_once_task_starts_after_what_its_dead_attempt_committed():
    from mm2py.source.copy.task import after_committed
    from mm2py.source.ranges import PartitionRange

    ranges = [PartitionRange("t", 0, 100, 200, "A.t"), PartitionRange("t", 1, 100, 200, "A.t"),
              PartitionRange("t", 2, 100, 200, "A.t")]
    left, done = after_committed(ranges, {("t", 0): 199, ("t", 1): 149})
    assert [(r.partition, r.start, r.exact) for r in left] == [(1, 150, True), (2, 100, False)]
    assert [(d.partition, d.next_offset, d.records) for d in done] == [(0, 200, 0)]


def test_transactional_positions_land_where_connect_puts_them():
    """murmur2 as Java's producer (and librdkafka's murmur2_random, checked on a broker): 3, 11, 7."""
    from mm2py.formats import SourceOffset
    from mm2py.source.copy.transactional import partition_for

    keys = [SourceOffset("A", "orders", p, 1).key_bytes() for p in range(3)]
    assert [partition_for(k, 25) for k in keys] == [3, 11, 7]


def test_an_exactly_once_task_that_moved_nothing_aborts_its_empty_transaction():
    from mm2py.source.copy.transactional import ExactlyOnce, TaskTransaction
    from mm2py.source.ranges import RangeResult

    class Coordinator:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def commit(self) -> None:
            self.calls.append("commit")

        def abort(self) -> None:
            self.calls.append("abort")

    task = TaskTransaction(None, ExactlyOnce("A", "B", "mm2-offsets.A.internal"), 0)  # type: ignore[arg-type]
    task.txn = Coordinator()  # type: ignore[assignment]
    stalled = RangeResult("t", 0, 100, 200, 100, stall_offset=100, stall_bytes=2 << 20, stall_reason="too large")
    task.commit([stalled])
    assert task.txn.calls == ["abort"]


def test_the_history_covers_every_synced_topic_before_the_syncs_are_written() -> None:
    journal = Journal()

    class History:
        def cover(self, topics: Iterable[str]) -> None:
            journal.events.append(("history", sorted(topics)))

    FlowCommitter(FLOW, policy_for(FLOW), journal, journal, journal, history=History()).commit([
        RangeResult("t", 0, 0, 5, 5, records=5, syncs=((0, 0), (5, 5))),
        RangeResult("u", 0, 0, 5, 5, records=5, syncs=((0, 0), (5, 5)))], batch_id=1)
    assert [kind for kind, _ in journal.events] == ["history", "syncs", "positions"]
    assert journal.events[0][1] == ["t", "u"]


def test_the_history_gets_run_starts_only_across_micro_batches() -> None:
    journal = Journal()

    class History:
        def cover(self, topics: Iterable[str]) -> None:
            pass

    c = FlowCommitter(FLOW, policy_for(FLOW), journal, journal, journal, history=History())
    c.commit([RangeResult("t", 0, 0, 300, 300, records=300, syncs=((0, 7), (100, 107), (300, 307)))], batch_id=1)
    # the next range continues the run, then a compacted gap (300..350) starts another
    c.commit([RangeResult("t", 0, 300, 500, 500, records=150, syncs=((300, 307), (350, 307), (500, 457)))],
             batch_id=2)
    assert journal.history == [[("t", 0, 0, 7)], [("t", 0, 350, 307)]]
    # MM2's topic: all but the range's start, which repeats the last range's end
    assert journal.events[2][1] == [("t", 0, 350, 307), ("t", 0, 500, 457)]


def test_run_starts_keep_breaks_and_recopies_and_drop_points_on_the_line() -> None:
    assert run_starts([(0, 0), (100, 100), (200, 200)]) == [(0, 0)]
    assert run_starts([(0, 0), (100, 100), (150, 100), (200, 150)]) == [(0, 0), (150, 100)]
    assert run_starts([(250, 250), (300, 300)], before=(0, 0)) == []
    assert run_starts([(250, 251)], before=(0, 0)) == [(250, 251)]  # a marker on the target
    assert run_starts([(100, 400)], before=(300, 300)) == [(100, 400)]  # a re-copy from an earlier position
