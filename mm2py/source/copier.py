"""Copies partition ranges from the source cluster to the target with raw batches.

Fetches raw batches (read_committed), re-stamps them with an idempotent producer state (the
one this worker's last task left in ``producer_slot``, with each partition's next sequence,
else a fresh one: mm2py.source.producer_slot), and produces them to the same partition number
of the remote topic, one batch per partition per request with several requests in flight per
broker. Produce
responses give each batch's target base offset, from which the exact offset syncs follow.

Invariants:
- batches of one partition reach the target in source order (one in flight per request,
  requests to a broker are answered in order, and the producer id's sequences enforce it);
- a partition's first batch is alone in flight until acknowledged: a broker takes any
  sequence from a producer id new to a partition, so a refused first batch would otherwise
  let the next one land ahead of it;
- a range ends only after every batch it owns (base offset in ``[start, end)``) is acked; the
  batch straddling an exact start (mm2py.source.ranges: a flow's first range, a restart) is
  copied from ``start`` on, rebuilt without the records before it, while one straddling a
  boundary start is left to the range before, which copied it whole (``owned_from``);
- given a ``TailWindow`` (mm2py.source.tail), a partition that copied its range goes on copying
  what arrives after it while the window is open, and is then done with the batch it was at:
  ``next_offset`` is still the first offset not copied, so the sink records only acked data;
- the window's ``progress`` (every at-least-once task has a window, tailing or not) records what
  was acknowledged every ``copy.tail.commit.ms`` and once at the task's end, before the
  micro-batch commits (mm2py.source.tail_commit);
- a write the target refuses for a retriable reason (a leader moved, a broker restarting) is
  sent again in place, sequences unchanged, until ``delivery.timeout.ms`` (mm2py.source.resend);
- a fetch that fails at the connection is sent again to the leader the source names then;
- any other error fails the task; Spark's retry re-copies the ranges (at-least-once), and the
  positions on the target move only after the whole micro-batch succeeded;
- except where the target refuses one partition for good (a batch larger than the remote
  topic's max.message.bytes, or the remote topic deleted): that partition *stalls*. It stops
  at the refused batch (next_offset is its base offset, so nothing past it counts as
  mirrored), the rest of the task goes on, and the result row carries the offset, size and
  reason; the planner re-plans it from there (mm2py.source.stalls);
- records deleted from the source before they were mirrored (retention, DeleteRecords) are
  skipped: the copy goes on from the log start, the batch holding it copied from there on
  (rebuilt, so its offset syncs map each record it keeps), and the lost range (from where the
  copy stood to the log start) is reported in the result row rather than failing the flow;
- a partition whose fetch returned only part of a batch (a batch larger than
  max.partition.fetch.bytes, behind another partition's data) is asked for first in the next
  request to that broker, where the broker returns its first batch whole (KIP-74); the others
  rotate, so that fetch.max.bytes starves none of them;
- fetches to a broker go in a fetch session (KIP-227, mm2py.kafka.fetch_session) only while every
  partition fetched from it tails: an answer may then leave out partitions with nothing new, which
  owe nothing; while any partition still owes planned data, requests are full and sessionless;
- with client.rack set, a partition is fetched from the replica its leader names (KIP-392) until
  an error or an empty answer from that replica sends it back to the leader;
- given a transactional ``ProducerState`` (exactly-once mode), batches are stamped with it and the
  transactional bit, and a target broker gets no second request while one carrying a partition's
  first batch is unanswered (the leader adds that partition to the transaction; two such requests
  at once are refused). Committing is the caller's (``mm2py.source.transactional``);
- given a ``Provenance`` (a flow on an identity cycle, mm2py.source.provenance), a batch first
  written on the target is left out like an aborted one (the offset syncs break there), and
  every other batch is stamped with the producer id ``producer_for`` gives its origin; batches
  gathered for coalescing never mix producer ids.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

import kafka.errors as kerr
from kafka.future import Future

from mm2py.config.model import FlowConfig
from mm2py.errors import AuthenticationError, AuthorizationError, DataLossError, KafkaError, missing_acl
from mm2py.kafka import batches as rb
from mm2py.kafka.classify import Action, action_for
from mm2py.kafka.merge import merged_batch
from mm2py.kafka.wire import FetchedPartition, RawClient, error_for, to_kafka_error
from mm2py.source.aborted import AbortedFilter
from mm2py.source.partition import PartitionCopy, Pending
from mm2py.source.producer_slot import KeptProducer, ProducerSlot
from mm2py.source.provenance import Provenance
from mm2py.source.ranges import PartitionRange, RangeResult, owned_from
from mm2py.source.resend import ResendBook, resendable
from mm2py.source.tail import TailWindow
from mm2py.types import TP

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
TOO_LARGE = (kerr.MessageSizeTooLargeError, kerr.RecordListTooLargeError)
# while a fetch is unanswered, produce answers are read this often (Copier._wait_fetch)
FETCH_POLL_MS = 5
# the broker keeps sequence state for the last 5 batches of a producer per partition
MAX_IN_FLIGHT_PER_PARTITION = 5


@dataclass(frozen=True)
class CopySettings:
    """Tuning of one copy task; picklable, sent with the task.

    ``for_flow`` reads them from the flow's replication consumer and data producer settings (the
    Java client setting each field stands for is named beside it); mm2py's defaults apply where the
    file says nothing.
    """

    partition_max_bytes: int = 8 << 20  # max.partition.fetch.bytes
    fetch_max_bytes: int = 64 << 20  # fetch.max.bytes (also bounds what a task holds unsent)
    fetch_max_wait_ms: int = 200  # fetch.max.wait.ms
    fetch_min_bytes: int = 1  # fetch.min.bytes
    produce_timeout_ms: int = 30000  # the data producer's request.timeout.ms, sent in each Produce request
    request_timeout_ms: int = 60000  # admin.timeout.ms: the longest wait for any answer
    verify_crc: bool = False  # check.crcs
    offset_lag_max: int = 100
    retry_backoff_ms: int = 200  # retry.backoff.ms: the pause before fetching again after a leader moved
    produce_backoff_ms: int = 100  # the producer's retry.backoff.ms: the pause before a refused write is resent
    delivery_timeout_ms: int = 120000  # delivery.timeout.ms: the longest a partition's writes go refused
    max_in_flight_per_partition: int = MAX_IN_FLIGHT_PER_PARTITION  # the producer's max.in.flight..., up to 5
    coalesce_bytes: int = 0  # batch.coalesce.bytes: merge runs of small batches up to this size (0: never)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> CopySettings:
        """The copy settings of ``flow`` (``flow.source.consumer``, ``flow.target.producer``)."""
        consumer, producer = flow.source.consumer, flow.target.producer

        def number(settings: Mapping[str, str], key: str, default: int) -> int:
            return int(settings[key]) if key in settings else default

        in_flight = number(producer, "max.in.flight.requests.per.connection", MAX_IN_FLIGHT_PER_PARTITION)
        return cls(
            # 0 is legal in Kafka (a fetch still returns a first batch whole); here it would fetch nothing
            partition_max_bytes=max(1, number(consumer, "max.partition.fetch.bytes", cls.partition_max_bytes)),
            fetch_max_bytes=max(1, number(consumer, "fetch.max.bytes", cls.fetch_max_bytes)),
            fetch_max_wait_ms=number(consumer, "fetch.max.wait.ms", cls.fetch_max_wait_ms),
            fetch_min_bytes=number(consumer, "fetch.min.bytes", cls.fetch_min_bytes),
            produce_timeout_ms=number(producer, "request.timeout.ms", cls.produce_timeout_ms),
            request_timeout_ms=flow.admin_timeout_ms,
            verify_crc=consumer.get("check.crcs", str(cls.verify_crc)).strip().lower() == "true",
            offset_lag_max=flow.offset_lag_max,
            retry_backoff_ms=number(consumer, "retry.backoff.ms", cls.retry_backoff_ms),
            produce_backoff_ms=number(producer, "retry.backoff.ms", cls.produce_backoff_ms),
            delivery_timeout_ms=number(producer, "delivery.timeout.ms", cls.delivery_timeout_ms),
            max_in_flight_per_partition=max(1, min(in_flight, MAX_IN_FLIGHT_PER_PARTITION)),
            coalesce_bytes=flow.batch_coalesce_bytes,
        )


@dataclass(frozen=True)
class ProducerState:
    """The producer id and epoch the copier stamps batches with; ``transactional_id`` in exactly-once mode."""

    producer_id: int
    epoch: int
    transactional_id: str | None = None


class SmallRun:
    """Consecutive small batches of one partition's fetch, to be written as one (``batch.coalesce.bytes``).

    A batch joins when it is plain (v2, contiguous offsets, CreateTime, not transactional, not
    control), at most an eighth of ``limit`` bytes, and of the codec of the run's first batch;
    the run is full at ``limit`` bytes (never above the remote topic's ``max_batch_bytes``).
    Offsets stay in source order, so the merged batch maps its records one for one.
    """

    def __init__(self, limit: int, max_batch_bytes: int = 0):
        self.limit = min(limit, max_batch_bytes) if max_batch_bytes else limit
        self.views: list[rb.BatchView] = []
        self.size = 0
        self.codec = -1

    def eligible(self, view: rb.BatchView) -> bool:
        """Whether ``view`` may be merged at all: plain and small."""
        return (view.passes_unchanged and not view.is_transactional and not view.is_control
                and view.size * 8 <= self.limit)

    def fits(self, codec: int, view: rb.BatchView) -> bool:
        """Whether an eligible ``view`` of ``codec`` may join the run as it stands."""
        return not self.views or (codec == self.codec and self.size + view.size <= self.limit)

    def add(self, codec: int, view: rb.BatchView) -> None:
        self.views.append(view)
        self.size += view.size
        self.codec = codec

    def full(self) -> bool:
        return self.size * 8 >= self.limit * 7

    def take(self) -> list[rb.BatchView]:
        views, self.views, self.size, self.codec = self.views, [], 0, -1
        return views


class Copier:
    """Copies ``ranges`` from ``src`` to ``dst``: one task's work, started by ``run``.

    The constructor takes its clients and does no I/O; ``run`` gets a producer id and the
    leaders, then copies. ``src`` and ``dst`` need the ``RawClient`` methods used here
    (fetch, poll, wait, fetched, produce, produced, leaders, log_start_offset, init_producer_id).
    """

    def __init__(self, src: RawClient, dst: RawClient, ranges: list[PartitionRange], settings: CopySettings,
                 principals: tuple[str | None, str | None] = (None, None), producer: ProducerState | None = None,
                 provenance: Provenance | None = None,
                 producer_for: Callable[[str], tuple[int, int]] | None = None, *, tail: TailWindow | None = None,
                 producer_slot: ProducerSlot | None = None):
        self.src, self.dst, self.settings = src, dst, settings
        # the idempotent producer id kept across this worker's tasks (mm2py.source.producer_slot)
        self.producer_slot = producer_slot
        self._kept: KeptProducer | None = None
        # tailing (mm2py.source.tail): partitions past their planned end copy what arrives while it is open
        self.tail = tail
        self.tailing: set[TP] = set()
        # provenance: the origin of each batch, and the (producer id, epoch) a task writes an origin with
        self.provenance = provenance
        self.producer_for = producer_for
        self._origin_producers: dict[str, tuple[int, int]] = {}
        self.principals = principals
        self.ranges = ranges
        self.parts = {(r.topic, r.partition): PartitionCopy.of(r) for r in ranges}
        self.producer = producer  # None: an idempotent producer id of its own, got in run()
        self.transactional_id = producer.transactional_id if producer else None
        self.producer_id, self.epoch = (producer.producer_id, producer.epoch) if producer else (-1, -1)
        self._opening: dict[int, Future] = {}  # per target broker: the last request carrying first batches
        self.src_leaders: dict[TP, int] = {}
        self.dst_leaders: dict[TP, int] = {}
        # per request: its future, broker, and each target partition's copy with its generation when sent
        self.produce_futures: deque[tuple[Future, int, dict[TP, tuple[PartitionCopy, int]]]] = deque()
        self.resend = ResendBook(settings.produce_backoff_ms / 1000, settings.delivery_timeout_ms / 1000)
        self.read_from: dict[TP, int] = {}  # a replica other than the leader to fetch from (client.rack)
        self.ask_first: set[TP] = set()  # partitions whose last answer was part of a batch
        self._turn = 0  # rotates the order of partitions in fetch requests
        # partitions that may have batches queued (checked on use): sending scans these, not every partition
        self._queued: dict[TP, PartitionCopy] = {}
        self._fetch_failing_since: float | None = None

    def _start(self) -> None:
        ranges = self.ranges
        if self.producer is None and self.provenance is None:
            self._kept = self.producer_slot.take() if self.producer_slot is not None else None
            if self._kept is None:
                with self._acl("WRITE", "TOPIC", ranges[0].target_topic if ranges else "", target=True):
                    self._kept = KeptProducer(*self.dst.init_producer_id())
            self.producer_id, self.epoch = self._kept.producer_id, self._kept.epoch
            for part in self.parts.values():
                part.sequence = self._kept.next_sequence.get(part.target, 0)
        with self._acl("DESCRIBE", "TOPIC", ", ".join(sorted({r.topic for r in ranges}))):
            self.src_leaders = self.src.leaders({r.topic for r in ranges})
        self.dst_leaders = self._target_leaders({r.target_topic for r in ranges})
        for tp, part in self.parts.items():
            if part.range.end <= part.range.start and not part.stalled:
                self._reached_end(tp, part)  # planned empty: only a tail copies here

    @contextlib.contextmanager
    def _acl(self, operation: str, resource_type: str, name: str, *, target: bool = False) -> Iterator[None]:
        """Turn an authorization failure into one naming the ACL that is missing."""
        try:
            yield
        except AuthorizationError as e:
            client = self.dst if target else self.src
            raise missing_acl(operation, resource_type, name, cluster=client.alias,
                              principal=self.principals[1 if target else 0], cause=e) from e

    def _target_leaders(self, topics: set[str]) -> dict[TP, int]:
        """Leaders of the remote topics; partitions of a remote topic that is gone stall."""
        with self._acl("DESCRIBE", "TOPIC", ", ".join(sorted(topics)), target=True):
            try:
                return self.dst.leaders(topics)
            except KafkaError as e:
                if isinstance(e, AuthorizationError) or not e.topic:
                    raise
            leaders: dict[TP, int] = {}
            for topic in sorted(topics):  # one by one, to find which are missing
                try:
                    leaders.update(self.dst.leaders({topic}))
                except KafkaError as e:
                    if isinstance(e, AuthorizationError) or not e.topic:
                        raise
                    for part in self.parts.values():
                        if part.target[0] == topic:
                            part.stall(part.next_fetch, -1,
                                       f"remote topic {topic} is missing on the target (or has no leader)")
            return leaders

    def run(self) -> list[RangeResult]:
        self._start()
        fetches: dict[int, tuple[Future, TP | None]] = {}  # by broker: the fetch and the partition it led with
        while True:
            if self.tail is not None:
                if self.tailing and not self.tail.open():
                    self._end_tail()
                if self.tail.progress is not None and self.tail.progress.due(self._caught_up):
                    self.tail.progress.record(self.parts.items())
            for node, tps in self._fetch_plan().items():
                if node not in fetches:
                    positions = {tp: self.parts[tp].next_fetch for tp in tps}
                    # every partition tailing: nothing is owed, so a fetch session may leave the idle
                    # ones out of requests and answers (KIP-227); the broker then orders the partitions
                    session = self.tailing.issuperset(tps)
                    try:
                        future = self.src.fetch(
                            node, positions,
                            partition_max_bytes=self.settings.partition_max_bytes,
                            max_bytes=self.settings.fetch_max_bytes,
                            max_wait_ms=self.settings.fetch_max_wait_ms,
                            min_bytes=self.settings.fetch_min_bytes,
                            closest_replica=True,
                            session=session,
                        )
                    except KafkaError as e:  # the broker is not reachable
                        self._fetch_failed(e)
                        break
                    fetches[node] = (future, None if session else tps[0])
            if not fetches:
                if all(p.done for p in self.parts.values()):
                    break
                # every open partition has a full queue: drain before fetching more
                self._drain_once()
                continue
            node, (future, first) = next(iter(fetches.items()))
            del fetches[node]
            try:
                response = self._wait_fetch(future)
            except KafkaError as e:  # the connection failed or the fetch went unanswered
                self._fetch_failed(e)
                continue
            self._fetch_failing_since = None
            for tp, data in self.src.fetched(response).items():
                self._handle_fetched(tp, data, node, first=tp == first)
                if self.parts[tp].queue:
                    self._queued[tp] = self.parts[tp]
            self._send_produce()
            self._reap_produce(block=False)
        while self.produce_futures or self._any_queued():
            self._drain_once()
        self._keep_producer()
        progress = self.tail.progress if self.tail is not None else None
        if progress is not None:  # durable now, not only when the whole micro-batch commits
            progress.record(self.parts.items())
        results = [p.result() for p in self.parts.values()]
        if progress is not None and progress.written:  # the syncs the task wrote already (tail_commit)
            results = [replace(r, syncs_written=progress.written.get((r.topic, r.partition), 0)) for r in results]
        return results

    def _keep_producer(self) -> None:
        """Every batch is acknowledged: the producer id goes back to the slot with its next sequences."""
        if self._kept is None or self.producer_slot is None or any(p.stalled for p in self.parts.values()):
            return
        self._kept.next_sequence.update((p.target, p.sequence) for p in self.parts.values())
        self.producer_slot.put_back(self._kept)

    def _drain_once(self) -> None:
        """Send what may go and wait for every answer; with nothing in flight, wait out a resend's backoff."""
        self._send_produce()
        if self.produce_futures:
            self._reap_produce(block=True)
            return
        if not self._any_queued():
            return
        wake = self.resend.next_wake()
        if wake is None:
            raise RuntimeError("copier: batches queued that no rule lets go")  # a bug, never a hang
        time.sleep(max(0.0, wake - time.monotonic()))

    def _wait_fetch(self, future: Future) -> object:
        """The fetch's answer; meanwhile produce answers are read and the batches they free are sent.

        The two clients read their sockets only when polled: without this, acknowledgements would
        wait for the fetch (up to fetch.max.wait.ms when the source has nothing new), and batches
        queued behind a partition's full in-flight window with them.
        """
        while not future.is_done and self.produce_futures:
            self.src.poll(FETCH_POLL_MS, future)
            self.dst.poll()
            self._reap_produce(block=False)
            self._send_produce()
        return self.src.wait(future)

    def _fetch_failed(self, error: KafkaError) -> None:
        """A fetch failed at the connection (a source broker restarting): look the leaders up again and go on.

        Nothing was read, so nothing is lost or repeated; failures for longer than the request
        timeout without a fetch answered in between fail the task, naming the cause.
        """
        now = time.monotonic()
        since = self._fetch_failing_since = self._fetch_failing_since or now
        if not error.retriable or isinstance(error, AuthenticationError) or (
                now - since > self.settings.request_timeout_ms / 1000):
            raise error
        with contextlib.suppress(KafkaError):  # a failed lookup is tried again after the next failure
            self._source_moved()

    def _source_moved(self) -> None:
        """After retry.backoff.ms, fetch from the leaders the source names now."""
        time.sleep(self.settings.retry_backoff_ms / 1000)
        self.read_from.clear()
        self.src_leaders = self.src.leaders({p.range.topic for p in self.parts.values()})

    def _reached_end(self, tp: TP, part: PartitionCopy) -> bool:
        """``part`` copied its planned range: True when it is done, False when it tails on."""
        if self.tail is not None and not part.stalled and self.tail.open():
            self.tailing.add(tp)
            part.tail_from = part.records
            return False
        part.done = True
        return True

    def _caught_up(self) -> bool:
        """Every planned range copied and acknowledged: each open partition tails, nothing in flight."""
        return bool(self.tailing) and not self.produce_futures and all(
            p.done or tp in self.tailing for tp, p in self.parts.items())

    def _end_tail(self) -> None:
        """The tail's time is up: every tailing partition is done where it stands."""
        for tp in self.tailing:
            self.parts[tp].done = True
        self.tailing.clear()

    def _fetch_plan(self) -> dict[int, list[TP]]:
        """Partitions to fetch next, by leader.

        Memory is bounded in bytes: queued batches are views of the fetch responses they came
        in, so a partition with a fetch's worth still queued, or a task with ``fetch_max_bytes``
        queued, waits for produce to catch up; the responses' buffers are then reused.
        """
        plan: dict[int, list[TP]] = {}
        if sum(p.queued_bytes for p in self.parts.values()) >= self.settings.fetch_max_bytes:
            return plan
        for tp, part in self.parts.items():
            if not part.done and part.queued_bytes < self.settings.partition_max_bytes:
                plan.setdefault(self.read_from.get(tp, self.src_leaders[tp]), []).append(tp)
        self._turn += 1
        for tps in plan.values():
            turn = self._turn % len(tps)
            tps[:] = sorted(tps[turn:] + tps[:turn], key=lambda tp: tp not in self.ask_first)
        return plan

    def _handle_fetched(self, tp: TP, data: FetchedPartition, node: int = -1, *, first: bool = True) -> None:
        """One partition of a fetch answered by broker ``node``; ``first``: it led the request."""
        part = self.parts[tp]
        r = part.range
        if part.stalled or part.done:
            return  # a fetch sent before the partition stalled, or before its tail ended
        if not data.error_code and data.preferred_read_replica >= 0 and data.preferred_read_replica != node:
            self.read_from[tp] = data.preferred_read_replica  # the leader names a closer replica (client.rack)
            return
        if data.error_code and tp in self.tailing:
            # past its planned range nothing is owed: a tailing partition that errs (its topic deleted,
            # its leader moving) ends its tail where it stands, and the next plan takes it from there
            self.tailing.discard(tp)
            part.done = True
            return
        follower = tp in self.read_from
        if data.error_code and follower:
            del self.read_from[tp]  # whatever the replica's trouble (behind, moved), the leader knows better
            if action_for(data.error_code).retriable or data.error_code == OFFSET_OUT_OF_RANGE:
                return
        if data.error_code == OFFSET_OUT_OF_RANGE:
            start = self.src.log_start_offset(self.src_leaders[tp], tp)
            if start <= part.next_fetch:
                if self.src.list_offsets([tp], "latest").get(tp, part.next_fetch) < part.next_fetch:
                    # the log went back (topic re-created, truncated): the planner finds it and acts
                    # by source.reset.policy (mm2py.source.resets); waiting here would never end
                    part.stall(part.next_fetch, -1, "source log ends below the position (topic re-created "
                               "or log truncated)")
                return  # else the log moved under us (leader change): fetch again
            # gone for good: waiting cannot bring them back, and failing would stop every other
            # partition too. Skip to the log start (as MM2 does, silently) and report the range.
            lost_from = part.lost[0] if part.lost else part.next_fetch
            part.lost = (lost_from, start)
            part.next_fetch = start
            if start >= r.end and tp not in self.tailing:
                self._reached_end(tp, part)
            return
        if action_for(data.error_code) in (Action.RETRY, Action.REFRESH):  # leader moved, broker restarting
            self._source_moved()
            return
        if data.error_code:
            if issubclass(error_for(data.error_code), kerr.AuthorizationError):
                raise missing_acl("READ", "TOPIC", r.topic, cluster=self.src.alias, principal=self.principals[0],
                                  cause=to_kafka_error(data.error_code, cluster=self.src.alias, topic=r.topic,
                                                       partition=r.partition))
            raise to_kafka_error(
                data.error_code, cluster=self.src.alias, topic=r.topic, partition=r.partition,
                offset=part.next_fetch,
            )
        buf = data.records
        aborted = AbortedFilter(data.aborted)
        progressed = False
        run = SmallRun(self.settings.coalesce_bytes, r.max_batch_bytes) if self.settings.coalesce_bytes > 0 else None
        end = sys.maxsize if tp in self.tailing else r.end
        for view in rb.split_batches(buf):
            left_out = aborted.left_out(view)  # every batch, in order: it tracks transactions' state
            if view.next_offset <= part.next_fetch:
                continue  # the fetch starts at the batch holding fetch_offset
            if view.base_offset >= end:
                if self._reached_end(tp, part):
                    break
                end = sys.maxsize
            progressed = True
            if self.settings.verify_crc:
                rb.verify_crc(buf, view)
            # the batch straddling an exact start or the log start the copy skipped to is copied
            # from there on, rebuilt without the records before; below a boundary start, not at all
            first = owned_from(r, view.base_offset, part.lost[1] if part.lost else -1)
            trim_before = first if first is not None and first > view.base_offset else None
            if first is None:
                pass  # owned by the previous range, which mirrored it whole
            elif left_out:
                self._enqueue_run(part, buf, run)
                part.dropped += min(view.record_count, view.next_offset - first)
            elif self.provenance is not None and not self._use_origin(part, buf, view, run):
                part.went_home += view.record_count
            elif r.max_batch_bytes and view.size > r.max_batch_bytes:
                # never sent: batches after it would reach the target ahead of it
                self._enqueue_run(part, buf, run)
                part.stall(view.base_offset, view.size,
                           f"batch too large for the remote topic (max.message.bytes {r.max_batch_bytes})")
                break
            elif view.record_count > 0:
                if run is None or trim_before is not None or not run.eligible(view):
                    self._enqueue_run(part, buf, run)  # what was gathered before it goes first
                    self._enqueue(part, buf, view, trim_before)
                else:
                    self._gather(part, buf, view, run)
                if view.max_timestamp > part.max_timestamp:
                    part.max_timestamp, part.fetched_ms = view.max_timestamp, int(time.time() * 1000)
            part.next_fetch = view.next_offset
            if view.last_offset >= end - 1:
                if self._reached_end(tp, part):
                    break
                end = sys.maxsize
        self._enqueue_run(part, buf, run)
        if progressed:
            self.ask_first.discard(tp)
        elif not part.done and buf and not any(True for _ in rb.split_batches(buf)) and not first:
            self.ask_first.add(tp)  # only part of a batch came, behind other partitions' data: lead next time
            return
        if not progressed and not part.done and buf and not any(True for _ in rb.split_batches(buf)):
            raise KafkaError(
                f"a batch at offset {part.next_fetch} is larger than the fetch size "
                f"({self.settings.partition_max_bytes} bytes); raise max.partition.fetch.bytes",
                cluster=self.src.alias, topic=r.topic, partition=r.partition, offset=part.next_fetch,
            )
        if not progressed and tp in self.tailing:
            return  # nothing new has arrived yet
        if not progressed and not part.done and follower:
            # the replica has not caught up with the range yet (its high watermark lags the leader's):
            # back to the leader, which knows where the log ends
            del self.read_from[tp]
            return
        if not progressed and not part.done:
            # nothing at or after next_fetch below the end: the range's tail is not readable
            # (e.g. end beyond the last stable offset); finish where the log stands now
            readable_end = data.last_stable_offset if data.last_stable_offset >= 0 else data.high_watermark
            if part.next_fetch >= readable_end and not buf:
                raise DataLossError(
                    f"source log ends at {readable_end}, below offset {r.end} planned from it earlier: "
                    "the partition was truncated (unclean leader election or deleted records)",
                    cluster=self.src.alias, topic=r.topic, partition=r.partition, offset=part.next_fetch,
                )

    def _use_origin(self, part: PartitionCopy, buf: bytes, view: rb.BatchView, run: SmallRun | None) -> bool:
        """Stamp what comes next with the producer id of ``view``'s origin; False when it goes home."""
        assert self.provenance is not None and self.producer_for is not None
        origin = self.provenance.origin_of(view.producer_id)
        if origin == self.provenance.home:
            self._enqueue_run(part, buf, run)
            return False
        producer = self._origin_producers.get(origin)
        if producer is None:
            with self._acl("WRITE", "TOPIC", part.target[0], target=True):
                producer = self._origin_producers[origin] = self.producer_for(origin)
        if producer[0] != part.producer_id or producer[0] != self.producer_id:
            self._enqueue_run(part, buf, run)  # what was gathered goes with the producer id it was gathered for
            self.producer_id, self.epoch = producer
            part.use_producer(producer[0])
        return True

    def stamp(self, buf: bytes, view: rb.BatchView, part: PartitionCopy) -> rb.Pieces:
        """The batch at ``view`` re-stamped with this task's producer state and ``part``'s next sequence."""
        return rb.patch_for_target(buf, view, self.producer_id, self.epoch, part.sequence,
                                   self.transactional_id is not None)

    def _enqueue(self, part: PartitionCopy, buf: bytes, view: rb.BatchView, trim_before: int | None) -> None:
        if view.passes_unchanged and trim_before is None:
            part.enqueue(self.stamp(buf, view, part), Pending(view.base_offset, view.record_count, view.size),
                         rebuilt=False)
            return
        records = rb.decode(buf, view)
        if trim_before is not None:
            records = [rec for rec in records if rec.offset >= trim_before]
        self._enqueue_rebuilt(part, records, rb.codec_of(buf, view))

    def _enqueue_rebuilt(self, part: PartitionCopy, records: list[rb.Record], codec: int) -> None:
        """Queue ``records`` (source order, gaps allowed) as one new batch with ``codec``."""
        rebuilt = rb.rebuild(records, codec, self.producer_id, self.epoch, part.sequence,
                             self.transactional_id is not None)
        if rebuilt is None:
            return
        part.enqueue((rebuilt,), Pending.rebuilt([rec.offset for rec in records], len(rebuilt)), rebuilt=True)

    def _gather(self, part: PartitionCopy, buf: bytes, view: rb.BatchView, run: SmallRun) -> None:
        """Add an eligible small batch to ``run``, writing the run out first when it does not fit."""
        codec = rb.codec_of(buf, view)
        if not run.fits(codec, view):
            self._enqueue_run(part, buf, run)
        run.add(codec, view)
        if run.full():
            self._enqueue_run(part, buf, run)

    def _enqueue_run(self, part: PartitionCopy, buf: bytes, run: SmallRun | None) -> None:
        """Queue the small batches gathered so far: one alone as it is, several as one rebuilt batch."""
        views = run.take() if run is not None and run.views else ()
        if len(views) == 1:
            self._enqueue(part, buf, views[0], None)
        elif views:
            merged = merged_batch(buf, views, self.producer_id, self.epoch, part.sequence,
                                  self.transactional_id is not None)
            offsets = [offset for view in views for offset in range(view.base_offset, view.next_offset)]
            part.enqueue((merged,), Pending.rebuilt(offsets, len(merged)), rebuilt=True)

    def _send_produce(self) -> None:
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
                    node = self.dst_leaders[part.target]
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
                self.produce_futures.append((future, node, rounds[node]))
            self._reap_produce(block=False)

    def _reap_produce(self, *, block: bool) -> None:
        while self.produce_futures:
            future, _node, parts = self.produce_futures[0]
            if not future.is_done and not block:
                return
            try:
                response = self.dst.wait(future)
            except KafkaError as e:  # the connection failed or the request went unanswered
                self.produce_futures.popleft()
                self._refused(parts.values(), e)
                continue
            self.produce_futures.popleft()
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
            if block and self._any_queued():
                self._send_produce()

    def _refused(self, parts: Iterable[tuple[PartitionCopy, int]], error: KafkaError) -> None:
        """A request's writes were refused for a retriable reason: queue them again (mm2py.source.resend)."""
        if self.transactional_id is not None or not error.retriable:
            raise error
        for part, generation in parts:
            if generation == part.generation and part.in_flight:
                self.resend.refused(part.target, error)
                part.resend()
                self._queued[(part.range.topic, part.range.partition)] = part

    def _any_queued(self) -> bool:
        return any(p.queue for p in self._queued.values())

    def _refresh_leaders(self) -> None:
        """Look up the leaders of remote topics whose writes were refused; a failed lookup is tried again."""
        topics = self.resend.stale_topics
        try:
            leaders = self.dst.leaders(topics)
        except KafkaError as e:
            if not e.retriable:
                raise
            return
        self.dst_leaders.update({tp: node for tp, node in leaders.items() if node >= 0})
        if all(node >= 0 for node in leaders.values()):
            topics.clear()

    def _stalls(self, part: PartitionCopy, code: int, detail: str | None) -> bool:
        """True when the target refused ``part``'s oldest in-flight batch for good: stall it there."""
        exc = error_for(code)
        tp = part.target
        if issubclass(exc, kerr.AuthorizationError):
            raise missing_acl("WRITE", "TOPIC", tp[0], cluster=self.dst.alias, principal=self.principals[1],
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


