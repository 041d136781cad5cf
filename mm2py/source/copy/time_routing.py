"""The writer of a flow with a ``TimestampRouter``: each record to its window topic, same partition number.

A remote topic the router routes (``TimestampRouter.routes``) takes this writer; the others keep
the flow's writer (``mm2py.source.copy.task``). Per owned batch, in source order: the chain's links
before the router run with the remote topic's name (``Chain.run``), the router names each kept
record's window topic from its timestamp (UTC), the links after it run with that name (records of
one window in a row as one batch), and the records kept go to that topic's partition of the source
partition's number (``RecordSender``), the topic made first if new (``WindowTopics``).

Invariants:
- per source partition, records reach each window topic in source order, once per copy
  (acks=all, idempotent); a range reports done only after ``settle`` saw every record acknowledged
  (the copier settles before recording progress), as ``RehashWriter`` does;
- no offset syncs: a source offset has no single remote offset here (nothing goes through the
  produce window), so no checkpoints either; positions are recorded, so restarts resume where the
  copy stopped;
- a record without a timestamp (< 0) fails the router like a failing transform (``LinkFailed``:
  the task fails naming flow, topic, partition and offset, or ``errors.tolerance = all`` takes it);
- counts: ``records``/``bytes`` what was sent, ``dropped`` what the chain left out, and per link
  ``[in, out, dropped, failed]`` in ``transformed``, the router's own under its name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mm2py.kafka import batches as rb
from mm2py.source.copy.batch_writer import owned_records
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.record_sender import RecordSender
from mm2py.source.copy.small_run import SmallRun
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.source.copy.window_topics import WindowTopics
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import Chain, LinkFailed
from mm2py.transforms.timestamp_router import TIMESTAMP_ROUTER, TimestampRouter


@dataclass(frozen=True)
class WindowOutput:
    """Where routed records go: the sender that produces them and the maker of their topics."""

    sender: RecordSender
    topics: WindowTopics


class TimeRoutingWriter(TransformingWriter):
    """Owned batches of routed topics to their window topics. Constructor does no I/O.

    ``chain``: the flow's whole chain (the router not in it); ``base``: the ``TransformingWriter``
    of the flow (its flow name, error policy and dead letters are used for failing records).
    """

    def __init__(self, chain: Chain, router: TimestampRouter, output: WindowOutput, base: TransformingWriter):
        super().__init__(chain, 0, base.flow, base.errors, base.dead_letters)
        self.router = router
        self.output = output
        self.before = Chain(chain.links[:router.position])
        self.after = Chain(chain.links[router.position:])
        self._after_by_topic: dict[str, Chain] = {}

    def start(self) -> None:
        self.output.sender.start()

    def small_run(self, r: PartitionRange) -> SmallRun | None:
        return None  # records are produced one by one: nothing to coalesce

    def enqueue(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                trim_before: int | None) -> None:
        remote = part.range.target_topic
        records = owned_records(buf, view, trim_before)
        before = self.before.for_topic(remote)
        outs = before.run(remote, records, before.tallies(part.transformed))
        routed: list[tuple[str, rb.Record]] = []
        tally = part.transformed.setdefault(self.router.name, [0, 0, 0, 0])
        for rec, out in zip(records, outs, strict=True):
            if isinstance(out, LinkFailed):
                self._failed(part.range, rec, out)
                continue
            if out is None:
                continue
            tally[0] += 1
            if out.timestamp < 0:
                tally[3] += 1
                self._failed(part.range, rec, LinkFailed(self.router.name, TIMESTAMP_ROUTER,
                                                         f"found no timestamp ({out.timestamp})"))
                continue
            tally[1] += 1
            routed.append((self.router.window(remote, out.timestamp), replace(out, offset=rec.offset)))
        kept = self._after(part, routed, {rec.offset: rec for rec in records})
        for window, rec in kept:
            self.output.topics.ensure(window, remote)
            self.output.sender.send(window, part.range.partition, rec)
            part.bytes += len(rec.key or b"") + len(rec.value or b"")
        part.records += len(kept)
        part.dropped += len(records) - len(kept)
        part.rebuilt += 1

    def _after(self, part: PartitionCopy, routed: list[tuple[str, rb.Record]],
               source: dict[int, rb.Record]) -> list[tuple[str, rb.Record]]:
        """The links after the router over ``routed``, each run of one window as one batch; what they kept."""
        kept: list[tuple[str, rb.Record]] = []
        i = 0
        while i < len(routed):
            window = routed[i][0]
            end = next((j for j in range(i, len(routed)) if routed[j][0] != window), len(routed))
            group = [rec for _, rec in routed[i:end]]
            chain = self._after_by_topic.get(window)
            if chain is None:
                chain = self._after_by_topic[window] = self.after.for_topic(window)
            for rec, out in zip(group, chain.run(window, group, chain.tallies(part.transformed)), strict=True):
                if isinstance(out, LinkFailed):
                    self._failed(part.range, source[rec.offset], out)
                elif out is not None:
                    kept.append((window, replace(out, offset=rec.offset)))
            i = end
        return kept

    def settle(self) -> None:
        """Every routed record acknowledged, then every dead-lettered one, before progress is recorded."""
        self.output.sender.settle("time-routed records")
        super().settle()
