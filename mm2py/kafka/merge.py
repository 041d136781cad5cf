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

_BASE_TIMESTAMP = struct.Struct(">q")  # at byte 27 of a v2 batch
_CRC = struct.Struct(">I")
_ONE_BYTE = [bytes([(n << 1) ^ (n >> 63)]) for n in range(64)]  # zigzag varints of 0..63


def _zigzag(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """The signed (zigzag) varint at ``pos`` and the position after it."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    shift, result = 0, 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _varint(n: int) -> bytes:
    """``n`` as a signed (zigzag) varint."""
    if 0 <= n < 64:
        return _ONE_BYTE[n]
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _records(out: bytearray, data: bytearray, count: int, first: int, shift: int, offset: int) -> None:
    """Append ``count`` records of ``data`` to ``out``: offsetDeltas from ``first``, timestamps moved by ``shift``."""
    pos, size = 0, len(data)
    for index in range(first, first + count):
        if pos >= size:
            raise rb.CorruptBatchError(f"record batch at offset {offset} holds fewer records than its count ({count})")
        length, start = _zigzag(data, pos)
        end = start + length
        if length < 3 or end > size:
            raise rb.CorruptBatchError(f"record batch at offset {offset}: a record of {length} bytes at byte {pos}")
        delta, at = _zigzag(data, start + 1)
        _, rest = _zigzag(data, at)
        head = data[start:start + 1] + _varint(delta + shift) + _varint(index)
        out += _varint(len(head) + end - rest)
        out += head
        out += memoryview(data)[rest:end]
        pos = end
    if pos != size:
        raise rb.CorruptBatchError(f"record batch at offset {offset} has {size - pos} bytes after its {count} records")


def merged_batch(buf: bytes, views: Sequence[rb.BatchView], producer_id: int, epoch: int, sequence: int,
                 transactional: bool = False) -> bytes:
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
