"""The writer of a flow with transforms (mm2py.transforms): records through the chain, batches rebuilt.

Invariants:
- a remote topic no link can touch keeps the raw path (``BatchWriter``), coalescing included;
- on a transformed topic each owned batch becomes at most one batch of the records the chain
  kept, in source order, in the source batch's codec; a dropped record leaves an offset gap that
  the rebuilt batch's offset list carries (``Pending.rebuilt``), so offset syncs, checkpoints and
  failover stay exact across it; records dropped before the copy's first kept one are mapped
  onto it through ``PartitionCopy.first_owned``; dropped records are counted in ``dropped``, and
  per link in ``PartitionCopy.transformed`` (in, out, dropped, failed: ``Chain.apply``);
- the chain sees each record under its remote topic name, as MM2's connector hands it to Connect;
- a Python transform failing on a record (``LinkFailed``) fails the task with
  ``TransformFailedError`` naming the flow, the transform, and the record's source topic,
  partition and offset; nothing of that batch is queued.
"""

from __future__ import annotations

from dataclasses import replace

from mm2py.errors import TransformFailedError
from mm2py.kafka import batches as rb
from mm2py.source.copy.batch_writer import BatchWriter, owned_records
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.small_run import SmallRun
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import Chain, LinkFailed


class TransformingWriter(BatchWriter):
    """Owned batches through ``chain``, of flow ``flow`` (named in a failure). Constructor does no I/O."""

    def __init__(self, chain: Chain, coalesce_bytes: int = 0, flow: str = ""):
        super().__init__(coalesce_bytes)
        self.chain = chain
        self.flow = flow
        self._by_topic: dict[str, Chain] = {}

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
        for rec in records:
            try:
                out = chain.apply(topic, rec, part.transformed)
            except LinkFailed as e:
                r = part.range
                reason = " ".join(e.reason.split())  # one line: Spark's failure text keeps the last line
                raise TransformFailedError(
                    f"flow {self.flow}: transform {e.link!r} ({e.path}) {reason} on the record at topic {r.topic} "
                    f"partition {r.partition} offset {rec.offset} (remote topic {topic})") from e.__cause__
            if out is None:
                part.dropped += 1
            else:
                kept.append(replace(out, offset=rec.offset))
        self.enqueue_rebuilt(part, kept, rb.codec_of(buf, view))
