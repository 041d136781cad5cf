"""Record counts per event-time bucket, compared between a source partition and its mirror.

A bucket is a minute of batch max-timestamps: every record of a batch counts in the bucket of
the batch's newest record, read from the RecordBatch v2 header (``maxTimestamp``, ``recordCount``),
so nothing is decompressed. mm2py copies batches whole, with their timestamps, so each batch
lands in the same bucket on both sides.

Which buckets are compared (``compare``):
- only records the flow has mirrored on the source (below its recorded position);
- not the source's oldest bucket present: retention or DeleteRecords on the source may have
  cut it anywhere, and the target's copy of it at another point;
- not buckets that retention of the remote topic may have removed (older than its retention.ms);
- not the newest mirrored bucket and later ones: micro-batches in flight.

Records deleted from the source before they were mirrored (a ledger gap: mm2py.stores.ledger)
are counted on neither side: the source is counted from its log start now, so a gap is never
reported missing.

Per bucket, records the source holds beyond the target's are *missing*; records the target
holds beyond the source's are *duplicates* (at-least-once re-copies after a restart).

On a topic the flow transforms, the source side counts what the chain keeps (the scanner replays
it) and the records it drops are reported apart as *dropped*: a Filter never makes records missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

BUCKET_MS = 60_000


def bucket_of(timestamp_ms: int) -> int:
    return timestamp_ms - timestamp_ms % BUCKET_MS


@dataclass(frozen=True)
class AuditFinding:
    """The audit of one partition of a flow, as ``mm2py.metrics`` exports it."""

    flow: str
    topic: str  # remote topic
    partition: int
    source_records: int  # records in the compared buckets, on the source
    target_records: int  # ... and on the target
    missing: int
    duplicates: int
    buckets: int  # buckets compared
    # (bucket start ms, source records, target records) of the buckets that differ, oldest first
    differing: tuple[tuple[int, int, int], ...] = ()
    dropped: int = 0  # source records the flow's transforms dropped, in the compared buckets


def compare(flow: str, topic: str, partition: int, source: Mapping[int, int], target: Mapping[int, int], *,
            oldest_source_bucket: int | None, newest_source_bucket: int | None,
            retention_floor_ms: int | None = None, dropped: Mapping[int, int] | None = None) -> AuditFinding:
    """Compare bucket counts; ``oldest/newest_source_bucket`` of the mirrored range, None when it is empty.

    ``source``: what the target should hold per bucket; ``dropped``: what transforms dropped (not compared).
    """
    dropped = dropped or {}
    if oldest_source_bucket is None or newest_source_bucket is None:
        return AuditFinding(flow, topic, partition, 0, 0, 0, 0, 0)
    low = oldest_source_bucket + BUCKET_MS
    if retention_floor_ms is not None:
        low = max(low, bucket_of(retention_floor_ms) + BUCKET_MS)
    compared = sorted(b for b in set(source) | set(target) | set(dropped) if low <= b < newest_source_bucket)
    src = tgt = missing = duplicates = 0
    differing = []
    for b in compared:
        s, t = source.get(b, 0), target.get(b, 0)
        src, tgt = src + s, tgt + t
        missing += max(s - t, 0)
        duplicates += max(t - s, 0)
        if s != t:
            differing.append((b, s, t))
    return AuditFinding(flow, topic, partition, src, tgt, missing, duplicates, len(compared), tuple(differing),
                        dropped=sum(dropped.get(b, 0) for b in compared))
