"""What a copy task does with one partition's fetch answer: errors, owned batches, where to go next.

Invariants:
- only the batches a partition owns are handed to the writer, in source order: from its range's
  start (the batch straddling an exact start or the log start the copy skipped to is trimmed;
  one straddling a boundary start is the previous range's, ``owned_from``) to its end, or past
  it while the partition tails;
- records of aborted transactions and control batches are left out (``AbortedFilter``), and
  counted as dropped;
- ``next_fetch`` moves past a batch only once the batch is queued (or left out on purpose), so
  a partition's queue and ``next_fetch`` always meet;
- a batch larger than the remote topic's ``max.message.bytes`` is never queued: the partition
  stalls there, so nothing after it reaches the target ahead of it;
- a partition that errs while tailing owes nothing past its plan: it is done where it stands;
- records deleted from the source before they were copied (retention, DeleteRecords) are
  skipped to the log start and reported as the partition's lost range; a log that went back
  below the position (re-created, truncated) stalls the partition for mm2py.source.plan.resets,
  and so does a topic re-created under the copy (fetched by its planned id, ``recreated``);
- an answer with no whole batch below the planned end, where the log ends below it, is a
  ``DataLossError`` naming the partition, never a silent end;
- a batch of a newer leader epoch from another broker than the batch before (the leader moved
  mid-copy, maybe uncleanly) ends the partition's copy before it: the next plan checks the new
  leader's log against what was copied (mm2py.source.plan.divergence), then plans the rest.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import kafka.errors as kerr

from mm2py.errors import DataLossError, KafkaError, missing_acl
from mm2py.kafka import batches as rb
from mm2py.kafka.classify import Action, action_for
from mm2py.kafka.wire import FetchedPartition, RawClient, error_for, to_kafka_error
from mm2py.source.copy.aborted import AbortedFilter
from mm2py.source.copy.batch_writer import BatchWriter
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.fetch_schedule import FetchSchedule
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.small_run import SmallRun
from mm2py.source.copy.tail import Tails
from mm2py.source.provenance import Provenance
from mm2py.source.ranges import owned_from
from mm2py.types import TP

OFFSET_OUT_OF_RANGE = 1


@dataclass(frozen=True)
class TaskParts:
    """One copy task's partitions and the collaborators its intake hands their batches to.

    Frozen: a task keeps the same ones from start to end; their state changes, never which they are.
    """

    parts: dict[TP, PartitionCopy]
    fetching: FetchSchedule
    writer: BatchWriter
    tails: Tails


@dataclass
class OriginProducers:
    """Provenance: the origin of each batch, and the producer id and epoch it is written with.

    ``producer_for(origin, remote_topic)`` registers one; ``kept`` holds each origin's for the task,
    so an origin is asked for once.
    """

    provenance: Provenance
    producer_for: Callable[[str, str], tuple[int, int]]
    kept: dict[str, tuple[int, int]] = field(default_factory=dict)

    def producer(self, origin: str, remote_topic: str) -> tuple[int, int]:
        """The producer id and epoch ``origin``'s batches are written with."""
        if origin not in self.kept:
            self.kept[origin] = self.producer_for(origin, remote_topic)
        return self.kept[origin]


class Intake:
    """Takes fetch answers for a task's partitions. Constructor does no I/O.

    ``origins`` (provenance only) gives the producer id and epoch an origin's batches are written with.
    """

    def __init__(self, src: RawClient, settings: CopySettings, task: TaskParts, *, principal: str | None = None,
                 origins: OriginProducers | None = None):
        self.src, self.settings = src, settings
        self.parts, self.fetching, self.writer, self.tails = task.parts, task.fetching, task.writer, task.tails
        self.principal = principal  # the source's, named in a missing-ACL error
        self.origins = origins

    def take(self, tp: TP, data: FetchedPartition, node: int = -1, *, first: bool = True) -> None:
        """One partition of a fetch answered by broker ``node``; ``first``: it led the request."""
        part = self.parts[tp]
        if part.stalled or part.done:
            return  # a fetch sent before the partition stalled, or before its tail ended
        if not data.error_code and data.preferred_read_replica >= 0 and data.preferred_read_replica != node:
            self.fetching.read_from[tp] = data.preferred_read_replica  # the leader names a closer replica (rack)
            return
        follower = tp in self.fetching.read_from
        if data.error_code:
            self._failed(tp, part, data.error_code, follower)
            return
        self._batches(part, data, first=first, follower=follower, node=node)

    def _failed(self, tp: TP, part: PartitionCopy, code: int, follower: bool) -> None:
        """The answer for ``tp`` carries error ``code``."""
        r = part.range
        if tp in self.tails:
            # past its planned range nothing is owed: a tailing partition that errs (its topic deleted,
            # its leader moving) ends its tail where it stands, and the next plan takes it from there
            self.tails.stop(tp, part)
            return
        if follower:
            del self.fetching.read_from[tp]  # whatever the replica's trouble (behind, moved), the leader knows better
            if action_for(code).retriable or code == OFFSET_OUT_OF_RANGE:
                return
        if code == OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, part)
            return
        if action_for(code) in (Action.RETRY, Action.REFRESH):  # leader moved, broker restarting, topic re-created
            self.fetching.moved()
            self.recreated(tp, part)
            return
        if issubclass(error_for(code), kerr.AuthorizationError):
            raise missing_acl("READ", "TOPIC", r.topic, cluster=self.src.alias, principal=self.principal,
                              cause=to_kafka_error(code, cluster=self.src.alias, topic=r.topic,
                                                   partition=r.partition))
        raise to_kafka_error(code, cluster=self.src.alias, topic=r.topic, partition=r.partition,
                             offset=part.next_fetch)

    def recreated(self, tp: TP, part: PartitionCopy) -> None:
        """Stall ``part`` where it stands when its topic was re-created since the plan.

        Fetched by the id it was planned with (``PartitionRange.topic_id``), it reads nothing of the
        new log (UNKNOWN_TOPIC_ID), and waiting would never end; the planner finds the new id and
        acts by source.reset.policy (mm2py.source.plan.resets).
        """
        new = self.src.recreated(tp[0])
        if new is not None and not part.stalled:
            part.stall(part.next_fetch, -1, f"source topic {tp[0]} was re-created (topic id {new}; the copy "
                       f"was planned for {part.range.topic_id})")

    def _out_of_range(self, tp: TP, part: PartitionCopy) -> None:
        """``next_fetch`` is outside the log: below its start (records deleted) or above its end (log went back)."""
        start = self.src.log_start_offset(self.fetching.leaders[tp], tp)
        if start <= part.next_fetch:
            if self.src.list_offsets([tp], "latest").get(tp, part.next_fetch) < part.next_fetch:
                # the log went back (topic re-created, truncated): the planner finds it and acts
                # by source.reset.policy (mm2py.source.plan.resets); waiting here would never end
                part.stall(part.next_fetch, -1, "source log ends below the position (topic re-created "
                           "or log truncated)")
            return  # else the log moved under us (leader change): fetch again
        # gone for good: waiting cannot bring them back, and failing would stop every other
        # partition too. Skip to the log start (as MM2 does, silently) and report the range.
        lost_from = part.lost[0] if part.lost else part.next_fetch
        part.lost = (lost_from, start)
        part.next_fetch = start
        if start >= part.range.end and tp not in self.tails:
            self.tails.reached_end(tp, part)

    def _batches(self, part: PartitionCopy, data: FetchedPartition, *, first: bool,
                 follower: bool, node: int = -1) -> None:
        """Hand the batches ``part`` owns in ``data`` to the writer; then decide where it fetches next."""
        r = part.range
        tp = (r.topic, r.partition)
        buf = data.records
        aborted = AbortedFilter(data.aborted)
        progressed = False
        run = self.writer.small_run(r)
        end = sys.maxsize if tp in self.tails else r.end
        for view in rb.split_batches(buf):
            left_out = aborted.left_out(view)  # every batch, in order: it tracks transactions' state
            if view.next_offset <= part.next_fetch:
                continue  # the fetch starts at the batch holding fetch_offset
            if view.base_offset >= end:
                if self.tails.reached_end(tp, part):
                    break
                end = sys.maxsize
            if part.leader_moved(view.leader_epoch, node):
                # the copy ends here: the next plan asks the new leader whether its log still holds what
                # was copied (mm2py.source.plan.divergence) before a record of it is copied
                self.tails.stop(tp, part)
                break
            progressed = True
            if self.settings.verify_crc:
                rb.verify_crc(buf, view)
            # the batch straddling an exact start or the log start the copy skipped to is copied
            # from there on, rebuilt without the records before; below a boundary start, not at all
            owned = owned_from(r, view.base_offset, part.lost[1] if part.lost else -1)
            trim_before = owned if owned is not None and owned > view.base_offset else None
            if owned is None:
                pass  # owned by the previous range, which mirrored it whole
            elif left_out:
                self.writer.flush_run(part, buf, run)
                part.dropped += min(view.record_count, view.next_offset - owned)
            elif self.origins is not None and not self._use_origin(part, buf, view, run):
                part.went_home += view.record_count
            elif r.max_batch_bytes and view.size > r.max_batch_bytes:
                # never sent: batches after it would reach the target ahead of it
                self.writer.flush_run(part, buf, run)
                part.stall(view.base_offset, view.size,
                           f"batch too large for the remote topic (max.message.bytes {r.max_batch_bytes})")
                break
            elif view.record_count > 0:
                if run is None or trim_before is not None or not run.eligible(view):
                    self.writer.flush_run(part, buf, run)  # what was gathered before it goes first
                    self.writer.enqueue(part, buf, view, trim_before)
                else:
                    self.writer.gather(part, buf, view, run)
                if view.max_timestamp > part.max_timestamp:
                    part.max_timestamp, part.fetched_ms = view.max_timestamp, int(time.time() * 1000)
            part.read_batch(view.base_offset, view.leader_epoch, node)
            part.next_fetch = view.next_offset
            if view.last_offset >= end - 1:
                if self.tails.reached_end(tp, part):
                    break
                end = sys.maxsize
        self.writer.flush_run(part, buf, run)
        if progressed:
            self.fetching.ask_first.discard(tp)
        elif not part.done and buf and not any(True for _ in rb.split_batches(buf)) and not first:
            self.fetching.ask_first.add(tp)  # only part of a batch came, behind other partitions' data: lead next time
            return
        if not progressed and not part.done and buf and not any(True for _ in rb.split_batches(buf)):
            raise KafkaError(
                f"a batch at offset {part.next_fetch} is larger than the fetch size "
                f"({self.settings.partition_max_bytes} bytes); raise max.partition.fetch.bytes",
                cluster=self.src.alias, topic=r.topic, partition=r.partition, offset=part.next_fetch,
            )
        if not progressed and tp in self.tails:
            return  # nothing new has arrived yet
        if not progressed and not part.done and follower:
            # the replica has not caught up with the range yet (its high watermark lags the leader's):
            # back to the leader, which knows where the log ends
            del self.fetching.read_from[tp]
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


    def _use_origin(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                    run: SmallRun | None) -> bool:
        """Stamp what comes next with the producer id of ``view``'s origin; False when it goes home."""
        assert self.origins is not None
        origin = self.origins.provenance.origin_of(view.producer_id)
        if origin == self.origins.provenance.home:
            self.writer.flush_run(part, buf, run)
            return False
        producer = self.origins.producer(origin, part.target[0])
        if producer[0] != part.producer_id or producer[0] != self.writer.producer_id:
            self.writer.flush_run(part, buf, run)  # what was gathered goes with the producer id it was gathered for
            self.writer.producer_id, self.writer.epoch = producer
            part.use_producer(producer[0])
        return True
