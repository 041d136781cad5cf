"""Copies partition ranges from the source cluster to the target with raw batches: one task's work.

Fetches raw batches (read_committed; mm2py.source.copy.fetch_schedule decides what and from where),
hands the batches each partition owns to its writer (mm2py.source.copy.batch_writer: re-stamped
with an idempotent producer state, the one this worker's last task left in ``producer_slot``
with each partition's next sequence, else a fresh one), and sends them to the same partition
number of the remote topic (mm2py.source.copy.produce_window). Produce responses give each batch's
target base offset, from which the exact offset syncs follow. A partition's state lives in one
``PartitionCopy`` (mm2py.source.copy.partition).

Invariants (the fetch and produce sides list their own):
- a range ends only after every batch it owns (base offset in ``[start, end)``) is acked; the
  batch straddling an exact start (mm2py.source.ranges: a flow's first range, a restart) is
  copied from ``start`` on, rebuilt without the records before it, while one straddling a
  boundary start is left to the range before, which copied it whole (``owned_from``);
- given a ``TailWindow`` (mm2py.source.copy.tail), a partition that copied its range goes on copying
  what arrives after it while the window is open, and is then done with the batch it was at:
  ``next_offset`` is still the first offset not copied, so the sink records only acked data;
- the window's ``progress`` (every at-least-once task has one) records what was acknowledged every
  ``copy.tail.commit.ms``, more often while many acknowledged records wait, and once at the task's
  end, before the micro-batch commits (mm2py.source.copy.tail_commit), after the writer settled;
- any error not handled below fails the task; Spark's retry re-copies the ranges
  (at-least-once), and positions never pass what the target acknowledged;
- a partition the target refuses for good *stalls* (mm2py.source.copy.produce_window); so does one
  whose source log went back below its position, or whose topic was re-created since the plan
  (fetched by its planned topic id, it never reads the new log; mm2py.source.plan.resets acts), and
  a batch larger than the remote topic's max.message.bytes is never sent. The rest of the task goes
  on; the result row carries the offset, size and reason, and the planner re-plans from there;
- records deleted from the source before they were mirrored (retention, DeleteRecords) are
  skipped: the copy goes on from the log start, the batch holding it copied from there on, and
  the lost range is reported in the result row (the commit writes it to the ledger);
- fetches to a broker go in a fetch session (KIP-227, mm2py.kafka.fetch_session) only while every
  partition fetched from it tails: an answer may then leave out partitions with nothing new, which
  owe nothing; while any partition still owes planned data, requests are full and sessionless;
- given a transactional ``ProducerState`` (exactly-once mode), batches carry it and the
  transactional bit; committing is the caller's (``mm2py.source.copy.transactional``), or, in a
  copy interval, the window's every commit period (``mm2py.source.copy.interval_commits``);
- given a ``Provenance`` (a flow on an identity cycle, mm2py.source.provenance), a batch first
  written on the target is left out like an aborted one (the offset syncs break there), and
  every other batch is stamped with the producer id ``producer_for`` gives its origin; batches
  gathered for coalescing never mix producer ids.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial

from kafka.future import Future

from mm2py.errors import AuthorizationError, KafkaError, missing_acl
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.batch_writer import BatchWriter
from mm2py.source.copy.copy_mode import PLAIN, CopyMode
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.fetch_schedule import FetchSchedule
from mm2py.source.copy.intake import Intake, OriginProducers, TaskParts
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.produce_window import ProduceWindow
from mm2py.source.copy.producer_slot import KeptProducer
from mm2py.source.copy.resend import ResendBook
from mm2py.source.copy.tail import Tails
from mm2py.source.copy.tail_commit import written_of
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.types import TP

# while a fetch is unanswered, produce answers are read this often (Copier._wait_fetch)
FETCH_POLL_MS = 5


class Copier:
    """Copies ``ranges`` from ``src`` to ``dst``: one task's work, started by ``run``.

    The constructor takes its clients and does no I/O; ``run`` gets a producer id and the
    leaders, then copies. ``src`` and ``dst`` need the ``RawClient`` methods used here and by
    the fetch schedule and produce window. ``mode``: how this copier writes (transaction,
    provenance, tailing, kept producer id, writer; mm2py.source.copy.copy_mode).
    """

    def __init__(self, src: RawClient, dst: RawClient, ranges: list[PartitionRange], settings: CopySettings,
                 mode: CopyMode = PLAIN):
        principals, producer, provenance = mode.principals, mode.producer, mode.provenance
        producer_for, tail, producer_slot, writer = mode.producer_for, mode.tail, mode.producer_slot, mode.writer
        self.src, self.dst, self.settings = src, dst, settings
        # the idempotent producer id kept across this worker's tasks (mm2py.source.copy.producer_slot)
        self.producer_slot = producer_slot
        self._kept: KeptProducer | None = None
        # tailing (mm2py.source.copy.tail): partitions past their planned end copy what arrives while it is open
        self.tail = tail
        self.tails = Tails(tail)
        # provenance: the origin of each batch, and the (producer id, epoch) a task writes an origin with
        self.provenance = provenance
        self.producer_for = producer_for
        self.principals = principals
        self.ranges = ranges
        self.parts = {(r.topic, r.partition): PartitionCopy.of(r) for r in ranges}
        self.producer = producer  # None: an idempotent producer id of its own, got in run()
        transactional_id = producer.transactional_id if producer else None
        self.writer = writer or BatchWriter(settings.coalesce_bytes)
        self.writer.transactional = transactional_id is not None
        if producer is not None:
            self.writer.producer_id, self.writer.epoch = producer.producer_id, producer.epoch
        self.fetching = FetchSchedule(src, settings)
        self.window = ProduceWindow(dst, settings, transactional_id, principals[1])
        origins = None if provenance is None else OriginProducers(provenance, self._origin_producer)
        self.intake = Intake(src, settings, TaskParts(self.parts, self.fetching, self.writer, self.tails),
                             principal=principals[0], origins=origins)

    def _origin_producer(self, origin: str, remote_topic: str) -> tuple[int, int]:
        """The producer id and epoch ``origin``'s batches are written with (provenance)."""
        assert self.producer_for is not None
        with self._acl("WRITE", "TOPIC", remote_topic, target=True):
            return self.producer_for(origin)

    @property
    def producer_id(self) -> int:
        """The producer id batches are stamped with now."""
        return self.writer.producer_id

    @property
    def resend(self) -> ResendBook:
        """The produce window's book of refused writes (mm2py.source.copy.resend)."""
        return self.window.resend

    def _start(self) -> None:
        ranges = self.ranges
        if self.producer is None and self.provenance is None:
            self._kept = self.producer_slot.take() if self.producer_slot is not None else None
            if self._kept is None:
                with self._acl("WRITE", "TOPIC", ranges[0].target_topic if ranges else "", target=True):
                    self._kept = KeptProducer(*self.dst.init_producer_id())
            self.writer.producer_id, self.writer.epoch = self._kept.producer_id, self._kept.epoch
            for part in self.parts.values():
                part.sequence = self._kept.next_sequence.get(part.target, 0)
        self.src.pin_topic_ids({r.topic: r.topic_id for r in ranges if r.topic_id})
        with self._acl("DESCRIBE", "TOPIC", ", ".join(sorted({r.topic for r in ranges}))):
            self.fetching.leaders = self.src.leaders({r.topic for r in ranges})
        self.window.leaders = self._target_leaders({r.target_topic for r in ranges})
        self.writer.start()
        for tp, part in self.parts.items():
            self.intake.recreated(tp, part)  # re-created between the plan and this start
            if part.range.end <= part.range.start and not part.stalled:
                self.tails.reached_end(tp, part)  # planned empty: only a tail copies here

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
        window = self.window
        while True:
            if self.tail is not None:
                self.tails.expire(self.parts)
                progress = self.tail.progress
                if progress is not None and progress.due(self._caught_up,
                                                         partial(progress.unrecorded, self.parts.items())):
                    self._record_progress()
            for node, tps in self.fetching.plan(self.parts).items():
                if node in fetches:
                    continue
                sent = self._fetch(node, tps)
                if sent is None:
                    break
                fetches[node] = sent
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
                self.fetching.failed(e)
                continue
            self.fetching.answered()
            for tp, data in self.src.fetched(response).items():
                self.intake.take(tp, data, node, first=tp == first)
                if self.parts[tp].queue:
                    window.queued(tp, self.parts[tp])
            window.send()
            window.reap(block=False)
        self._drain()
        self._keep_producer()
        self._record_progress()  # durable now, not only when the whole micro-batch commits
        results = [p.result() for p in self.parts.values()]
        progress = self.tail.progress if self.tail is not None else None
        if progress is not None and progress.written:  # the syncs the task wrote already (tail_commit)
            results = [replace(r, syncs_written=written_of(r, progress.written, progress.closed)) for r in results]
        return self.writer.finish(results)

    def _fetch(self, node: int, tps: list[TP]) -> tuple[Future, TP | None] | None:
        """Send a fetch for ``tps`` to ``node``; None when the broker is not reachable (handled)."""
        positions = {tp: self.parts[tp].next_fetch for tp in tps}
        # every partition tailing: nothing is owed, so a fetch session may leave the idle
        # ones out of requests and answers (KIP-227); the broker then orders the partitions
        session = self.tails.all_of(tps)
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
            self.fetching.failed(e)
            return None
        return future, None if session else tps[0]

    def _record_progress(self) -> None:
        """The writer settled, then what the target acknowledged made durable (mm2py.source.copy.tail_commit);
        a transaction (mm2py.source.copy.interval_commits) drained first, its successor stamping what follows."""
        self.writer.settle()
        progress = self.tail.progress if self.tail is not None else None
        if progress is not None and progress.drains:
            self._drain()
        if progress is not None and (state := progress.record(self.parts.items())) is not None:
            self.writer.producer_id, self.writer.epoch = state.producer_id, state.epoch

    def _drain(self) -> None:
        """Send everything queued and wait for every answer."""
        while self.window.futures or self.window.any_queued():
            self._drain_once()

    def _keep_producer(self) -> None:
        """Every batch is acknowledged: the producer id goes back to the slot with its next sequences."""
        if self._kept is None or self.producer_slot is None or any(p.stalled for p in self.parts.values()):
            return
        self._kept.next_sequence.update((p.target, p.sequence) for p in self.parts.values())
        self.producer_slot.put_back(self._kept)

    def _drain_once(self) -> None:
        """Send what may go and wait for every answer; with nothing in flight, wait out a resend's backoff."""
        window = self.window
        window.send()
        if window.futures:
            window.reap(block=True)
            return
        if not window.any_queued():
            return
        wake = window.resend.next_wake()
        if wake is None:
            raise RuntimeError("copier: batches queued that no rule lets go")  # a bug, never a hang
        time.sleep(max(0.0, wake - time.monotonic()))

    def _wait_fetch(self, future: Future) -> object:
        """The fetch's answer; meanwhile produce answers are read and the batches they free are sent.

        The two clients read their sockets only when polled: without this, acknowledgements would
        wait for the fetch (up to fetch.max.wait.ms when the source has nothing new), and batches
        queued behind a partition's full in-flight window with them.
        """
        window = self.window
        while not future.is_done and window.futures:
            self.src.poll(FETCH_POLL_MS, future)
            self.dst.poll()
            window.reap(block=False)
            window.send()
        return self.src.wait(future)

    def _caught_up(self) -> bool:
        """Every planned range copied and acknowledged: each open partition tails, nothing in flight."""
        return self.tails.caught_up(self.parts, bool(self.window.futures))
