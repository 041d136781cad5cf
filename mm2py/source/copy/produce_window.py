"""The writes of one copy task on their way to the target: sent, in flight, acknowledged or refused.

Invariants:
- each round sends one request per target broker, with at most one batch per partition; a
  partition's batches are sent in queue order (source order) and the broker answers a
  connection's requests in order, so they land in order;
- a partition's first batch is alone in flight until acknowledged (a broker takes any sequence
  from a producer id new to a partition), then up to ``max_in_flight_per_partition``;
- with a transactional id, a broker gets no second request while one carrying a partition's
  first batch is unanswered (the leader adds that partition to the transaction; two such
  requests at once are refused);
- an answer for a partition whose batches were queued again since it was sent (its generation
  moved) is moot and ignored;
- a write refused for a retriable reason goes out again in place, sequences unchanged, until
  ``delivery.timeout.ms`` (mm2py.source.copy.resend); with a transactional id, or for a reason that
  is not retriable, the refusal fails the task;
- the target refusing a batch for good (too large, remote topic gone) stalls its partition at
  that batch (``PartitionCopy.stall``): nothing past it counts as mirrored.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable

import kafka.errors as kerr
from kafka.future import Future

from mm2py.errors import KafkaError, missing_acl
from mm2py.kafka import batches as rb
from mm2py.kafka.classify import UNKNOWN_TOPIC_OR_PARTITION
from mm2py.kafka.wire import RawClient, error_for, to_kafka_error
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.resend import ResendBook, resendable
from mm2py.types import TP

TOO_LARGE = (kerr.MessageSizeTooLargeError, kerr.RecordListTooLargeError)

# per request: its future, broker, and each target partition's copy with its generation when sent
InFlight = tuple[Future, int, dict[TP, tuple[PartitionCopy, int]]]


class ProduceWindow:
    """Sends the queued batches of a task's partitions to ``dst`` and reads the answers.

    ``leaders`` (target partition -> broker) is filled by the copier before the first send.
    Constructor does no I/O.
    """

    def __init__(self, dst: RawClient, settings: CopySettings, transactional_id: str | None = None,
                 principal: str | None = None):
        self.dst, self.settings = dst, settings
        self.transactional_id = transactional_id
        self.principal = principal  # named in a missing-ACL error
        self.leaders: dict[TP, int] = {}
        self.futures: deque[InFlight] = deque()
        self.resend = ResendBook(settings.produce_backoff_ms / 1000, settings.delivery_timeout_ms / 1000)
        self._opening: dict[int, Future] = {}  # per target broker: the last request carrying first batches
        # partitions that may have batches queued (checked on use): sending scans these, not every partition
        self._queued: dict[TP, PartitionCopy] = {}

    def queued(self, tp: TP, part: PartitionCopy) -> None:
        """``part`` (source partition ``tp``) may have batches to send."""
        self._queued[tp] = part

    def any_queued(self) -> bool:
        return any(p.queue for p in self._queued.values())

    def send(self) -> None:
        """Send one request per target broker per round, each with one batch per partition."""
        while True:
            rounds: dict[int, dict[TP, tuple[PartitionCopy, int]]] = {}
            payloads: dict[int, dict[TP, rb.Pieces]] = {}
            resending = bool(self.resend.held_until or self.resend.stale_topics)
            now = time.monotonic()
            if resending and self.resend.lookup_due(now):
                self._refresh_leaders()
            for tp, part in list(self._queued.items()):
                if not part.queue:
                    del self._queued[tp]
                    continue
                most = self.settings.max_in_flight_per_partition if part.answered else 1
                if part.may_send(most):
                    if resending and self.resend.waiting(part.target, now):
                        continue
                    node = self.leaders[part.target]
                    opening = self._opening.get(node)
                    if not part.answered and opening is not None and not opening.is_done:
                        continue
                    rounds.setdefault(node, {})[part.target] = (part, part.generation)
                    payloads.setdefault(node, {})[part.target] = part.send_next()
            if not rounds:
                return
            for node, batch_map in payloads.items():
                try:
                    future = self.dst.produce(node, batch_map, timeout_ms=self.settings.produce_timeout_ms,
                                              transactional_id=self.transactional_id)
                except KafkaError as e:  # the leader's broker is not reachable
                    self._refused(rounds[node].values(), e)
                    continue
                if self.transactional_id is not None and not all(p.answered for p, _ in rounds[node].values()):
                    self._opening[node] = future
                self.futures.append((future, node, rounds[node]))
            self.reap(block=False)

    def reap(self, *, block: bool) -> None:
        """Read the answers that came (``block``: wait for every one), queueing refused writes again."""
        while self.futures:
            future, _node, parts = self.futures[0]
            if not future.is_done and not block:
                return
            try:
                response = self.dst.wait(future)
            except KafkaError as e:  # the connection failed or the request went unanswered
                self.futures.popleft()
                self._refused(parts.values(), e)
                continue
            self.futures.popleft()
            for tp, result in self.dst.produced(response).items():
                part, generation = parts[tp]
                if generation != part.generation:
                    continue  # sent before its partition's batches were queued again: moot
                if result.error_code and part.past_stall():
                    # batches sent after the refused one fail on their sequence numbers
                    part.uncount(part.take_oldest())
                    continue
                if result.error_code and self._stalls(part, result.error_code, result.error_message):
                    continue
                if result.error_code:
                    error = to_kafka_error(result.error_code, cluster=self.dst.alias, topic=tp[0], partition=tp[1],
                                           detail=result.error_message)
                    if not resendable(result.error_code):
                        raise error
                    self._refused([(part, generation)], error)
                    continue
                part.acked(result.base_offset, self.settings.offset_lag_max)
                part.acked_ms = int(time.time() * 1000)
                self.resend.written(tp)
            if block and self.any_queued():
                self.send()

    def _refused(self, parts: Iterable[tuple[PartitionCopy, int]], error: KafkaError) -> None:
        """A request's writes were refused for a retriable reason: queue them again (mm2py.source.copy.resend)."""
        if self.transactional_id is not None or not error.retriable:
            raise error
        for part, generation in parts:
            if generation == part.generation and part.in_flight:
                self.resend.refused(part.target, error)
                part.resend()
                self._queued[(part.range.topic, part.range.partition)] = part

    def _refresh_leaders(self) -> None:
        """Look up the leaders of remote topics whose writes were refused; a failed lookup is tried again."""
        topics = self.resend.stale_topics
        try:
            leaders = self.dst.leaders(topics)
        except KafkaError as e:
            if not e.retriable:
                raise
            return
        self.leaders.update({tp: node for tp, node in leaders.items() if node >= 0})
        if all(node >= 0 for node in leaders.values()):
            topics.clear()

    def _stalls(self, part: PartitionCopy, code: int, detail: str | None) -> bool:
        """True when the target refused ``part``'s oldest in-flight batch for good: stall it there."""
        exc = error_for(code)
        tp = part.target
        if issubclass(exc, kerr.AuthorizationError):
            raise missing_acl("WRITE", "TOPIC", tp[0], cluster=self.dst.alias, principal=self.principal,
                              cause=to_kafka_error(code, cluster=self.dst.alias, topic=tp[0], partition=tp[1]))
        if exc in TOO_LARGE:
            reason = f"the target refused a batch as too large ({exc.__name__}{': ' + detail if detail else ''})"
        elif code == UNKNOWN_TOPIC_OR_PARTITION:
            reason = f"remote topic {tp[0]} does not exist on the target (deleted?)"
        else:
            return False
        batch = part.take_oldest()
        part.uncount(batch)
        part.stall(batch.first, batch.size, reason)
        return True
