"""How a copy task turns the source batches it owns into queued writes: one strategy per way of writing.

``BatchWriter`` (this module) queues raw batches re-stamped with the task's producer state,
rebuilt only where records must be left out, and merges runs of small batches
(``batch.coalesce.bytes``). ``mm2py.source.copy.translating_writer.TranslatingWriter`` rewrites schema ids;
``mm2py.source.copy.rehash.RehashWriter`` produces records to other partitions. The copier
(mm2py.source.copy.copier) owns fetching, ownership of offsets, ordering and acknowledgements, and
calls a writer only with the batches a partition owns, in source order.

Invariants:
- every batch queued for a partition carries the stamp (producer id, epoch, transactional bit)
  current when it was queued and the partition's next sequence;
- a rebuilt or merged batch keeps its records' source offsets in its ``Pending``, so offset syncs
  map each record it holds;
- ``settle`` makes durable whatever a writer sent outside the produce window (dead letters,
  re-partitioned records) and runs before any progress is recorded.
"""

from __future__ import annotations

from mm2py.kafka import batches as rb
from mm2py.kafka.merge import merged_batch
from mm2py.source.copy.partition import PartitionCopy, Pending
from mm2py.source.copy.small_run import SmallRun
from mm2py.source.ranges import PartitionRange, RangeResult


def owned_records(buf: bytes | memoryview, view: rb.BatchView, trim_before: int | None) -> list[rb.Record]:
    """The records of the batch at ``view``, those below ``trim_before`` left out (another range owns them)."""
    records = rb.decode(buf, view)
    return records if trim_before is None else [rec for rec in records if rec.offset >= trim_before]


class BatchWriter:
    """Raw batches to the partition's produce queue. Constructor does no I/O.

    ``producer_id``/``epoch`` are set by the copier once it has its producer state, and again
    when provenance switches a partition to another origin's producer id.
    """

    def __init__(self, coalesce_bytes: int = 0, transactional: bool = False):
        self.coalesce_bytes = coalesce_bytes
        self.transactional = transactional
        self.producer_id, self.epoch = -1, -1

    def start(self) -> None:
        """Called once before the first batch: clients a writer needs besides the copier's."""

    def small_run(self, r: PartitionRange) -> SmallRun | None:
        """A gatherer of small batches for one fetch of ``r`` (None: coalescing is off)."""
        return SmallRun(self.coalesce_bytes, r.max_batch_bytes) if self.coalesce_bytes > 0 else None

    def stamp(self, buf: bytes | memoryview, view: rb.BatchView, part: PartitionCopy) -> rb.Pieces:
        """The batch at ``view`` re-stamped with the producer state and ``part``'s next sequence."""
        return rb.patch_for_target(buf, view, self.producer_id, self.epoch, part.sequence, self.transactional)

    def enqueue(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                trim_before: int | None) -> None:
        """Queue the batch at ``view``; ``trim_before``: leave out its records below that offset."""
        if view.passes_unchanged and trim_before is None:
            part.enqueue(self.stamp(buf, view, part), Pending(view.base_offset, view.record_count, view.size),
                         rebuilt=False)
            return
        records = owned_records(buf, view, trim_before)
        self.enqueue_rebuilt(part, records, rb.codec_of(buf, view))

    def enqueue_rebuilt(self, part: PartitionCopy, records: list[rb.Record], codec: int) -> None:
        """Queue ``records`` (source order, gaps allowed) as one new batch with ``codec``."""
        rebuilt = rb.rebuild(records, codec, self.producer_id, self.epoch, part.sequence, self.transactional)
        if rebuilt is None:
            return
        part.enqueue((rebuilt,), Pending.rebuilt([rec.offset for rec in records], len(rebuilt)), rebuilt=True)

    def gather(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView, run: SmallRun) -> None:
        """Add an eligible small batch to ``run``, writing the run out first when it does not fit."""
        codec = rb.codec_of(buf, view)
        if not run.fits(codec, view):
            self.flush_run(part, buf, run)
        run.add(codec, view)
        if run.full():
            self.flush_run(part, buf, run)

    def flush_run(self, part: PartitionCopy, buf: bytes | memoryview, run: SmallRun | None) -> None:
        """Queue the small batches gathered so far: one alone as it is, several as one rebuilt batch."""
        views = run.take() if run is not None and run.views else ()
        if len(views) == 1:
            self.enqueue(part, buf, views[0], None)
        elif views:
            merged = merged_batch(buf, views, self.producer_id, self.epoch, part.sequence, self.transactional)
            offsets = [offset for view in views for offset in range(view.base_offset, view.next_offset)]
            part.enqueue((merged,), Pending.rebuilt(offsets, len(merged)), rebuilt=True)

    def settle(self) -> None:
        """Make durable what this writer sent outside the produce window; raise if any of it failed."""

    def finish(self, results: list[RangeResult]) -> list[RangeResult]:
        """The task's results with what this writer adds to them (after ``settle``)."""
        return results
