"""The writer of a flow with transforms (mm2py.transforms): records through the chain, batches rebuilt.

Invariants:
- a remote topic no link can touch keeps the raw path (``BatchWriter``), coalescing included;
- on a transformed topic each owned batch becomes at most one batch of the records the chain
  kept (``Chain.run``: a batch link gets the batch's records that reach it as one batch), in
  source order, in the source batch's codec; a dropped record leaves an offset gap that the
  rebuilt batch's offset list carries (``Pending.rebuilt``), so offset syncs, checkpoints and
  failover stay exact across it; records dropped before the copy's first kept one are mapped
  onto it through ``PartitionCopy.first_owned``; dropped records are counted in ``dropped``, and
  per link in ``PartitionCopy.transformed`` (in, out, dropped, failed: ``Chain.run``);
- the chain sees each record under its remote topic name, as MM2's connector hands it to Connect;
- a Python transform failing on a record (``LinkFailed``), under ``errors.tolerance = none``,
  fails the task with ``TransformFailedError`` naming the flow, the transform, and the record's
  source topic, partition and offset; nothing of that batch is queued;
- under ``errors.tolerance = all`` (``mm2py.transforms.tolerance``) that record is left out like a
  dropped one (an offset gap), counted failed for its link, and either sent as the source had it
  to the dead-letter topic (``DeadLetters``, made durable by ``settle`` before progress past it is
  recorded) or, without one, logged naming flow, transform, topic, partition and offset.
"""

from __future__ import annotations

import traceback
from dataclasses import replace

import structlog

from mm2py.errors import TransformFailedError
from mm2py.kafka import batches as rb
from mm2py.source.copy.batch_writer import BatchWriter, owned_records
from mm2py.source.copy.dead_letters import DeadLetters
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.small_run import SmallRun
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import Chain, LinkFailed
from mm2py.transforms.tolerance import ErrorPolicy, context_headers

log = structlog.get_logger(__name__)


class TransformingWriter(BatchWriter):
    """Owned batches through ``chain``, of flow ``flow`` (named in a failure). Constructor does no I/O.

    ``errors``: what a failing record does (``ErrorPolicy``); ``dead_letters``: where it goes when
    the policy names a dead-letter topic (required then).
    """

    def __init__(self, chain: Chain, coalesce_bytes: int = 0, flow: str = "", errors: ErrorPolicy | None = None,
                 dead_letters: DeadLetters | None = None):
        super().__init__(coalesce_bytes)
        self.chain = chain
        self.flow = flow
        self.errors = errors or ErrorPolicy()
        self._by_topic: dict[str, Chain] = {}
        if self.errors.dead_letter_topic and dead_letters is None:
            raise ValueError("errors.deadletterqueue.topic.name needs the dead-letter writer")
        self.dead_letters = dead_letters

    def _chain(self, topic: str) -> Chain:
        found = self._by_topic.get(topic)
        if found is None:
            found = self._by_topic[topic] = self.chain.for_topic(topic)
        return found

    def small_run(self, r: PartitionRange) -> SmallRun | None:
        return None if self._chain(r.target_topic).links else super().small_run(r)

    def enqueue(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                trim_before: int | None) -> None:
        topic = part.range.target_topic
        chain = self._chain(topic)
        if not chain.links:
            super().enqueue(part, buf, view, trim_before)
            return
        records = owned_records(buf, view, trim_before)
        if part.first_owned < 0 and records:
            part.first_owned = records[0].offset
        kept: list[rb.Record] = []
        for rec, out in zip(records, chain.run(topic, records, chain.tallies(part.transformed)), strict=True):
            if isinstance(out, LinkFailed):
                self._failed(part.range, rec, out)
                out = None
            if out is None:
                part.dropped += 1
            else:
                kept.append(replace(out, offset=rec.offset))
        self.enqueue_rebuilt(part, kept, rb.codec_of(buf, view))

    def _failed(self, r: PartitionRange, rec: rb.Record, e: LinkFailed) -> None:
        """Record ``rec`` of ``r`` failed link ``e.link``: fail the task, dead-letter it, or log the skip."""
        reason = " ".join(e.reason.split())  # one line: Spark's failure text keeps the last line
        where = f"topic {r.topic} partition {r.partition} offset {rec.offset} (remote topic {r.target_topic})"
        if not self.errors.tolerate:
            raise TransformFailedError(f"flow {self.flow}: transform {e.link!r} ({e.path}) {reason} on the record "
                                       f"at {where}") from e.__cause__
        if self.dead_letters is None:
            log.warning("errors.tolerance = all: a record a transform failed on is skipped (no "
                        "errors.deadletterqueue.topic.name)", flow=self.flow, transform=e.link, topic=r.topic,
                        partition=r.partition, offset=rec.offset, error=reason)
            return
        headers: list[tuple[str, str | bytes | None]] = [*rec.headers]
        if self.errors.context_headers:
            cause = e.__cause__ or e
            headers += context_headers(flow=self.flow, link=e.link, path=e.path, topic=r.topic, partition=r.partition,
                                       offset=rec.offset, error=cause,
                                       trace="".join(traceback.format_exception(cause)))
        self.dead_letters.send(rec, headers)

    def settle(self) -> None:
        """Every dead-lettered record written (acks=all) before progress past it is recorded."""
        if self.dead_letters is not None:
            self.dead_letters.settle()
