"""Counting one partition's records per time bucket from batch headers, incrementally.

A ``PartitionCounts`` keeps the counts of the batches it has read and where it stopped; each
round reads only what was appended since. When the partition's log start moved past what was
counted (retention, DeleteRecords, a re-created topic), the counts are dropped and the
partition is read again from its new log start, so records removed behind mm2py's back no
longer count.

On a source topic the flow transforms (``mm2py.transforms``), the chain is replayed over each
batch's records, the batch as one (transforms are pure functions of the record): ``counts`` then holds what the
target should hold, bucketed by the newest kept record as the rebuilt batch on the target is, and
``dropped`` what the chain dropped, by the source batch's bucket. A dropped record is never
counted missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mm2py.audit.buckets import bucket_of
from mm2py.kafka import batches as rb
from mm2py.kafka.batches import split_batches
from mm2py.kafka.wire import RawClient, to_kafka_error
from mm2py.source.copy.aborted import AbortedFilter
from mm2py.transforms import Chain
from mm2py.types import TP

OFFSET_OUT_OF_RANGE = 1
FETCH_BYTES = 4 << 20
# fetches per partition and round: a long log is counted over several rounds, never in one go
MAX_FETCHES = 16


@dataclass
class PartitionCounts:
    """Records per bucket of one partition, counted from ``log_start`` up to ``next_offset``.

    ``dropped``: records a transform chain dropped, per bucket (only on a transformed source topic);
    ``failed``: records a transform failed on under ``errors.tolerance = all`` (left out, dead-lettered
    or skipped), per bucket.
    """

    log_start: int = -1
    next_offset: int = -1
    counts: dict[int, int] = field(default_factory=dict)
    dropped: dict[int, int] = field(default_factory=dict)
    failed: dict[int, int] = field(default_factory=dict)

    def reset(self, log_start: int) -> None:
        self.log_start = self.next_offset = log_start
        self.counts = {}
        self.dropped = {}
        self.failed = {}

    def add_dropped(self, max_timestamp: int, records: int) -> None:
        if max_timestamp >= 0 and records > 0:
            b = bucket_of(max_timestamp)
            self.dropped[b] = self.dropped.get(b, 0) + records

    def add_transformed(self, buf: bytes | memoryview, view: rb.BatchView, chain: Chain, topic: str,
                        tolerate: bool = False) -> None:
        """Count a source batch as the transforming writer copies it: kept records, dropped ones, and
        (``tolerate``: errors.tolerance = all) failed ones; without ``tolerate`` a failure raises ``LinkFailed``."""
        records = [rec for rec in rb.decode(buf, view) if rec.offset >= self.log_start]
        kept: list[rb.Record] = []
        failed = 0
        for out, failing in chain.replay_all(topic, records, tolerate):
            failed += failing
            if out is not None:
                kept.append(out)
        if kept:
            self.add(max(out.timestamp for out in kept), len(kept))
        self.add_dropped(view.max_timestamp, len(records) - len(kept) - failed)
        if failed and view.max_timestamp >= 0:
            b = bucket_of(view.max_timestamp)
            self.failed[b] = self.failed.get(b, 0) + failed

    def add(self, max_timestamp: int, records: int) -> None:
        if max_timestamp >= 0 and records > 0:
            b = bucket_of(max_timestamp)
            self.counts[b] = self.counts.get(b, 0) + records

    @property
    def oldest(self) -> int | None:
        buckets = self.counts.keys() | self.dropped.keys() | self.failed.keys()
        return min(buckets) if buckets else None

    @property
    def newest(self) -> int | None:
        buckets = self.counts.keys() | self.dropped.keys() | self.failed.keys()
        return max(buckets) if buckets else None


def scan(client: RawClient, node: int, tp: TP, counts: PartitionCounts, log_start: int,
         limit: Callable[[int], int] | int, *, max_fetches: int = MAX_FETCHES, chain: Chain | None = None,
         remote_topic: str = "", tolerate: bool = False) -> bool:
    """Count batches of ``tp`` from where ``counts`` stopped up to ``limit`` (an offset, or from the last stable one).

    Returns whether it got there (False: the fetch budget ran out first; the next round goes on).

    Batches count when their base offset is below the limit (a range owns the batches whose base
    offset lies in it); control batches and aborted transactional data are left out, as on the
    target. With ``chain`` (the flow's links for ``remote_topic``, not empty), records are counted as
    the chain leaves them (``PartitionCounts.add_transformed``).
    """
    if counts.log_start < 0 or log_start > counts.log_start or counts.next_offset < log_start:
        counts.reset(log_start)
    for _ in range(max_fetches):
        response = client.wait(client.fetch(node, {tp: counts.next_offset}, partition_max_bytes=FETCH_BYTES,
                                            max_bytes=FETCH_BYTES, max_wait_ms=0))
        part = client.fetched(response).get(tp)
        if part is None:
            return False
        if part.error_code == OFFSET_OUT_OF_RANGE:
            if part.log_start_offset > counts.next_offset or counts.next_offset > part.high_watermark:
                counts.reset(max(part.log_start_offset, 0) if part.log_start_offset >= 0 else log_start)
                continue
            return False
        if part.error_code:
            raise to_kafka_error(part.error_code, cluster=client.alias, topic=tp[0], partition=tp[1])
        end = limit(part.last_stable_offset) if callable(limit) else limit
        if counts.next_offset >= end:
            return True
        aborted = AbortedFilter(part.aborted)
        buf = part.records
        moved = False
        for view in split_batches(buf):
            if view.base_offset >= end:
                return True
            left_out = aborted.left_out(view)
            if view.next_offset <= counts.next_offset:
                continue  # before where we stopped (a fetch starts at the batch holding the offset)
            if not left_out and chain is not None:
                counts.add_transformed(buf, view, chain, remote_topic, tolerate)
            elif not left_out:
                records = view.record_count
                if view.base_offset < counts.log_start and view.contiguous:
                    records = view.next_offset - counts.log_start  # DeleteRecords may cut inside a batch
                counts.add(view.max_timestamp, records)
            counts.next_offset = view.next_offset
            moved = True
        if not moved:
            return True  # nothing complete below the limit yet: a batch still being written
    return False
