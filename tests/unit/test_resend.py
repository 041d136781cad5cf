"""Refused writes sent again in place: order, exact syncs, no duplicate, a deadline (mm2py.source.copy.resend).

The fake target models a broker's idempotence: a producer's batch is taken only at the next
expected sequence of its partition (else OUT_OF_ORDER_SEQUENCE), and a batch already written
is answered with the offset it was written at (a duplicate).
"""

from __future__ import annotations

import pytest

from mm2py.errors import KafkaError
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings, ProducerState
from mm2py.source.copy.resend import ResendBook, resendable
from mm2py.source.ranges import PartitionRange
from mm2py.types import TP
from tests.fakes.copy_path import (
    NOT_LEADER,
    OUT_OF_ORDER_SEQUENCE,
    REQUEST_TIMED_OUT,
    Answer,
    FakeSource,
    IdempotentTarget,
    batch,
)


def run(target: IdempotentTarget, settings: CopySettings | None = None, producer: ProducerState | None = None):
    logs = {("t", 0): [batch(o, 5) for o in range(0, 50, 5)]}
    c = Copier(FakeSource(logs), target, [PartitionRange("t", 0, 0, 50, "A.t")],  # type: ignore[arg-type]
               settings or CopySettings(offset_lag_max=1000, produce_backoff_ms=0), CopyMode(producer=producer))
    c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
    return c, c.run()


@pytest.mark.parametrize("code, write_anyway", [(NOT_LEADER, False), (REQUEST_TIMED_OUT, True),
                                                (REQUEST_TIMED_OUT, False)])
def test_a_refused_write_is_sent_again_in_order_once_with_exact_syncs(code: int, write_anyway: bool) -> None:
    target = IdempotentTarget({15: (code, 2, write_anyway)})
    c, [result] = run(target)
    assert target.log[("A.t", 0)] == [(s, 5) for s in range(0, 50, 5)], "every batch once, in order"
    assert result.next_offset == 50 and result.records == 50 and result.batches == 10
    assert result.syncs == ((0, 0), (50, 50)), "one linear run: the resend broke nothing"
    assert target.leader_lookups >= 1, "the leaders were looked up again"
    # a batch written before its refusal is answered as a duplicate on the first resend
    assert c.resend.resends == (1 if write_anyway else 2) and target.sent.count(15) == c.resend.resends + 1


def test_a_broker_that_cannot_be_reached_is_retried() -> None:
    target = IdempotentTarget(down_once=True)
    _, [result] = run(target)
    assert target.log[("A.t", 0)] == [(s, 5) for s in range(0, 50, 5)]
    assert result.next_offset == 50


def test_writes_refused_past_delivery_timeout_fail_naming_the_partition() -> None:
    target = IdempotentTarget({10: (NOT_LEADER, 10**6, False)})
    with pytest.raises(KafkaError, match=r"delivery.timeout.ms.*topic=A.t partition=0") as e:
        run(target, CopySettings(produce_backoff_ms=1, delivery_timeout_ms=50))
    assert "NotLeader" in str(e.value)


def test_a_transactional_write_is_not_resent() -> None:
    target = IdempotentTarget({0: (NOT_LEADER, 1, False)})
    with pytest.raises(KafkaError, match="NotLeader"):
        run(target, producer=ProducerState(9, 1, "mm2py-A-B-0"))


def test_a_lost_producer_state_is_not_resent() -> None:
    assert resendable(NOT_LEADER) and resendable(REQUEST_TIMED_OUT)
    assert not resendable(OUT_OF_ORDER_SEQUENCE) and not resendable(59)  # UNKNOWN_PRODUCER_ID
    assert not resendable(10)  # MESSAGE_TOO_LARGE


def test_book_holds_a_partition_for_the_backoff_and_looks_leaders_up_once_per_backoff() -> None:
    book = ResendBook(backoff_s=1.0, deadline_s=10.0)
    error = KafkaError("NotLeaderOrFollowerError", cluster="B", retriable=True)
    book.refused(("A.t", 0), error, now=100.0)
    assert book.waiting(("A.t", 0), 100.5) and not book.waiting(("A.t", 0), 101.0)
    assert not book.lookup_due(100.5) and book.lookup_due(101.0) and not book.lookup_due(101.5)
    book.refused(("A.t", 0), error, now=109.0)
    with pytest.raises(KafkaError, match="over delivery.timeout.ms"):
        book.refused(("A.t", 0), error, now=110.5)
    book.written(("A.t", 0))
    book.refused(("A.t", 0), error, now=200.0)  # a success starts the deadline again


class FlakySource(FakeSource):
    """A source whose first ``failures`` fetches fail at the connection."""

    def __init__(self, logs: dict, failures: int):
        super().__init__(logs)
        self.failures = failures
        self.lookups = 0

    def leaders(self, topics: set[str]) -> dict[TP, int]:
        self.lookups += 1
        return super().leaders(topics)

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        if self.failures:
            self.failures -= 1
            raise KafkaError("broker 1 not reachable", cluster="A", retriable=True)
        return super().fetch(node, positions, **kw)


def test_a_fetch_that_fails_at_the_connection_is_sent_again() -> None:
    logs = {("t", 0): [batch(o, 5) for o in range(0, 50, 5)]}
    source, target = FlakySource(logs, failures=3), IdempotentTarget()
    c = Copier(source, target, [PartitionRange("t", 0, 0, 50, "A.t")],  # type: ignore[arg-type]
               CopySettings(offset_lag_max=1000, retry_backoff_ms=0))
    c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
    [result] = c.run()
    assert target.log[("A.t", 0)] == [(s, 5) for s in range(0, 50, 5)] and result.next_offset == 50
    assert source.lookups == 1 + 3, "the leaders were looked up after each failure"


def test_fetches_failing_past_the_request_timeout_fail_the_task() -> None:
    source = FlakySource({("t", 0): [batch(0, 5)]}, failures=10**6)
    c = Copier(source, IdempotentTarget(), [PartitionRange("t", 0, 0, 5, "A.t")],  # type: ignore[arg-type]
               CopySettings(retry_backoff_ms=1, request_timeout_ms=30))
    c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
    with pytest.raises(KafkaError, match="not reachable"):
        c.run()
