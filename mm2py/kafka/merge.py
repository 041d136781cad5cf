"""Several small v2 batches of one partition written as one batch, without decoding records into objects.

A v2 record is ``length, attributes, timestampDelta, offsetDelta, key, value, headers``; only
the two deltas depend on the batch around it. Merging decompresses each batch's records
section, rewrites every record's deltas against the merged batch (offsetDelta: the record's
place in it, 0, 1, 2...; timestampDelta: against the first batch's base timestamp) and its
length, copies the rest of the record as it is, and compresses the whole section once with the
batches' shared codec.

Invariants:
- every record keeps its key, value, headers, attributes and timestamp byte for byte, in
  source order; the target assigns it the next offset, as for the records of any batch;
- the merged header is CreateTime, of the batches' codec, with the newest record's timestamp
  as maxTimestamp and the mirror's producer id, epoch and base sequence; the CRC covers it;
- a records section that does not add up to its batch's record count raises
  ``CorruptBatchError`` naming the batch's offset: nothing is written from it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from mm2py.kafka import batches as rb
from mm2py.kafka.codecs import compressed, decompressed
from mm2py.kafka.varint import read_zigzag, zigzag

_BASE_TIMESTAMP = struct.Struct(">q")  # at byte 27 of a v2 batch
_CRC = struct.Struct(">I")


def _records(out: bytearray, data: bytearray, count: int, first: int, shift: int, offset: int) -> None:
    """Append ``count`` records of ``data`` to ``out``: offsetDeltas from ``first``, timestamps moved by ``shift``."""
    pos, size = 0, len(data)
    for index in range(first, first + count):
        if pos >= size:
            raise rb.CorruptBatchError(f"record batch at offset {offset} holds fewer records than its count ({count})")
        b = data[pos]
        length, start = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_zigzag(data, pos)
        end = start + length
        if length < 3 or end > size:
            raise rb.CorruptBatchError(f"record batch at offset {offset}: a record of {length} bytes at byte {pos}")
        delta, at = read_zigzag(data, start + 1)
        _, rest = read_zigzag(data, at)
        head = data[start:start + 1] + zigzag(delta + shift) + zigzag(index)
        out += zigzag(len(head) + end - rest)
        out += head
        out += memoryview(data)[rest:end]
        pos = end
    if pos != size:
        raise rb.CorruptBatchError(f"record batch at offset {offset} has {size - pos} bytes after its {count} records")


def merged_batch(buf: bytes | memoryview, views: Sequence[rb.BatchView], producer_id: int, epoch: int,
                 sequence: int, transactional: bool = False) -> bytes:
    """The plain v2 batches at ``views`` of ``buf`` (one partition, source order, one codec) as one batch.

    Each view must pass unchanged (``BatchView.passes_unchanged``) and not be a control batch.
    """
    codec = views[0].attributes & rb.ATTR_CODEC_MASK
    base = _BASE_TIMESTAMP.unpack_from(buf, views[0].start + 27)[0]
    section = bytearray()
    count = 0
    whole = memoryview(buf)
    for view in views:
        body = decompressed(codec, whole[view.start + rb.HEADER_SIZE:view.start + view.size])
        shift = _BASE_TIMESTAMP.unpack_from(buf, view.start + 27)[0] - base
        _records(section, body, view.record_count, count, shift, view.base_offset)
        count += view.record_count
    payload = compressed(codec, section)
    head = bytearray(rb.HEADER_SIZE)
    attributes = codec | (rb.ATTR_TRANSACTIONAL if transactional else 0)
    rb.HEADER.pack_into(head, 0, 0, rb.HEADER_SIZE - 12 + len(payload), -1, 2, 0, attributes, count - 1, base,
                    max(v.max_timestamp for v in views), producer_id, epoch, sequence, count)
    _CRC.pack_into(head, 17, crc32c.crc32c(payload, crc32c.crc32c(memoryview(head)[21:])))
    return bytes(head) + payload
