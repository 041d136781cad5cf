"""``partition.mismatch = hash``: copying into a remote topic with fewer partitions than its source.

Such a topic (created by someone else, see ``mm2py.source.plan.mismatch``) cannot take source
partition p as partition p. Its records take the record path instead: decoded, and produced
to ``murmur2(key) % partitions`` as Java's default partitioner would place them, so consumers
keyed on the target see every key in one partition. Keyless records stick to one partition
per source batch, rotating, as Java's sticky partitioner spreads them.

Invariants:
- fetching, range ownership, aborted and control records are the raw copier's (this is the
  ``BatchWriter`` the copier writes with: it produces records instead of batches);
- a range ends only after every record it produced is acknowledged (acks=all, idempotent);
- no offset syncs: a source offset has no single target offset here, so syncs would lie.
  Positions are still recorded, so restarts resume where the copy stopped.
"""

from __future__ import annotations

import itertools

from mm2py.kafka import batches as rb
from mm2py.source.copy.batch_writer import BatchWriter, owned_records
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.record_sender import RecordSender

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """Java's ``Utils.toPositive(Utils.murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class RehashWriter(BatchWriter):
    """Produces the records of owned batches to ``murmur2(key) % partitions``. Constructor does no I/O."""

    def __init__(self, sender: RecordSender):
        super().__init__()  # never coalesces: records are produced one by one
        self.sender = sender
        self.sticky = itertools.count()

    def start(self) -> None:
        self.sender.start()

    def enqueue(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                trim_before: int | None) -> None:
        r = part.range
        records = owned_records(buf, view, trim_before)
        keyless = next(self.sticky) % r.target_partitions
        for rec in records:
            partition = keyless if rec.key is None else key_partition(rec.key, r.target_partitions)
            self.sender.send(r.target_topic, partition, rec)
            part.bytes += len(rec.key or b"") + len(rec.value or b"")
        part.records += len(records)
        part.rebuilt += 1

    def settle(self) -> None:
        """Every record produced is acknowledged (acks=all), or the task fails naming the remote topic."""
        self.sender.settle("re-partitioned records")
