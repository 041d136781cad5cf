"""Record batches (v2) built by kafka-python's builder, as a broker would serve them, for the unit tests."""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.kafka import batches as rb
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import chain_for
from mm2py.transforms.tolerance import ErrorPolicy

LZ4, GZIP, NONE = 3, 1, 0


def build(base_offset: int, n: int, codec: int = NONE, *, offsets=None, pid=-1, txn=False, ts=1000) -> bytes:
    """A batch at ``base_offset`` of ``n`` records (or at the deltas ``offsets``): key k<i>, a 50-byte value,
    header h=<i>, timestamps from ``ts``; ``pid`` >= 0 makes it idempotent, ``txn`` transactional."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=txn,
                                        producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                        base_sequence=0 if pid >= 0 else -1, batch_size=1 << 20)
    for i, delta in enumerate(offsets or range(n)):
        builder.append(delta, timestamp=ts + i, key=b"k%d" % i, value=b"v" * 50, headers=[("h", b"%d" % i)])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def transformed_copy(raw: dict[str, str], errors: ErrorPolicy) -> PartitionCopy:
    """A batch of offsets 0-9 of partition 2 of ``t`` (remote ``A.t``) queued through the chain ``raw``
    configures, by flow A->B's ``TransformingWriter`` under ``errors``: the partition's copy state."""
    writer = TransformingWriter(chain_for(raw), flow="A->B", errors=errors)
    part = PartitionCopy.of(PartitionRange("t", 2, 0, 10, "A.t"))
    buf = build(0, 10)
    [view] = rb.split_batches(buf)
    writer.enqueue(part, buf, view, None)
    return part
