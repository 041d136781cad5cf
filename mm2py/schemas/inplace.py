"""Schema ids rewritten inside a record batch without decoding its records into objects.

An id is 4 bytes at a fixed place of its frame (bytes 1-4 of a framed key or value, or of an id
header's value), so the target's id takes exactly the source id's room: every length, offset
delta, timestamp delta and header stays as it was, byte for byte. The records section is
decompressed, ids are overwritten where they sit, the section is compressed again with the
batch's own codec and put behind the batch's own header (only batchLength changes; the copier
re-stamps producer fields and the CRC as for any batch).

Only batches the raw copier would pass unchanged take this path; a batch holding a record whose
id cannot be translated raises ``Untranslatable`` here and takes the record path, where
``schemas.on.error`` decides about that record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from kafka.codec import (
    gzip_decode,
    gzip_encode,
    lz4_decode,
    lz4_encode,
    snappy_decode,
    snappy_encode,
    zstd_decode,
    zstd_encode,
)

from mm2py.kafka import batches as rb
from mm2py.schemas import frames
from mm2py.schemas.subjects import Untranslatable

_LENGTH = struct.Struct(">i")
_DECODE: dict[int, Callable[[bytes], bytes]] = {1: gzip_decode, 2: snappy_decode, 3: lz4_decode, 4: zstd_decode}
_ENCODE: dict[int, Callable[[bytes], bytes]] = {1: gzip_encode, 2: snappy_encode, 3: lz4_encode, 4: zstd_encode}
_KEY_HEADER = frames.KEY_HEADER.encode()
_VALUE_HEADER = frames.VALUE_HEADER.encode()

# a source id's 4 bytes -> the target id's 4 bytes (raises Untranslatable)
IdMap = Callable[[int], bytes]


def _varint(data: bytearray, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _rewrite_frame(data: bytearray, at: int, length: int, mapped: IdMap, what: str) -> None:
    if length < frames.PREFIX:
        raise Untranslatable(f"{what}: {length} bytes, shorter than the 5-byte wire-format prefix")
    if data[at] != frames.MAGIC:
        raise Untranslatable(f"{what}: magic byte {data[at]}, not 0 (the Confluent wire format)")
    data[at + 1:at + 5] = mapped(bytes(data[at + 1:at + 5]))


def rewrite_records(data: bytearray, count: int, mapped: IdMap, keys: bool = True) -> None:
    """Overwrite every schema id in ``count`` records of a decompressed records section.

    The rules of ``mm2py.schemas.translate``: the value when not null; the key when it starts with
    magic byte 0 and is at least 5 bytes; ids in ``__key_schema_id`` / ``__value_schema_id`` headers
    instead of the payload they stand for. ``mapped`` takes and gives ids as 4 big-endian bytes.
    ``keys`` False: keys are never frames (``schemas.keys``); an id header still is.
    """
    pos = 0
    for _ in range(count):  # one-byte varints inline: this loop is the translate path's cost
        b = data[pos]
        size, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
        end = pos + size
        pos += 1  # attributes
        while data[pos] & 0x80:  # timestamp delta
            pos += 1
        pos += 1
        while data[pos] & 0x80:  # offset delta
            pos += 1
        pos += 1
        b = data[pos]
        key_len, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
        key_at = pos
        if key_len > 0:
            pos += key_len
        b = data[pos]
        value_len, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
        value_at = pos
        if value_len > 0:
            pos += value_len
        key_carried = value_carried = False
        if data[pos] == 0:  # no headers
            pos += 1
        else:
            headers, pos = _varint(data, pos)
            for _ in range(headers):
                name_len, pos = _varint(data, pos)
                name = bytes(data[pos:pos + name_len])
                pos += name_len
                header_len, pos = _varint(data, pos)
                if name in (_KEY_HEADER, _VALUE_HEADER):
                    _rewrite_frame(data, pos, header_len, mapped, f"header {name.decode()}")
                    key_carried = key_carried or name == _KEY_HEADER
                    value_carried = value_carried or name == _VALUE_HEADER
                pos += max(header_len, 0)
        if pos != end:
            raise rb.CorruptBatchError(f"a record's fields end at {pos}, its length says {end}")
        if keys and key_len >= frames.PREFIX and not key_carried and data[key_at] == frames.MAGIC:
            data[key_at + 1:key_at + 5] = mapped(bytes(data[key_at + 1:key_at + 5]))
        if value_len >= frames.PREFIX and data[value_at] == frames.MAGIC and not value_carried:
            data[value_at + 1:value_at + 5] = mapped(bytes(data[value_at + 1:value_at + 5]))
        elif value_len >= 0 and not value_carried:
            _rewrite_frame(data, value_at, value_len, mapped, "value")  # raises: why it is not a frame


def rewritten_batch(buf: bytes, view: rb.BatchView, mapped: IdMap,
                    keys: bool = True) -> tuple[bytes, rb.BatchView]:
    """The batch at ``view`` with every schema id rewritten, and a view of it (start 0)."""
    whole = memoryview(buf)[view.start:view.start + view.size]
    codec = view.attributes & rb.ATTR_CODEC_MASK
    body = whole[rb.HEADER_SIZE:]
    data = bytearray(_DECODE[codec](bytes(body)) if codec else body)
    rewrite_records(data, view.record_count, mapped, keys)
    section = _ENCODE[codec](bytes(data)) if codec else bytes(data)
    head = bytearray(whole[:rb.HEADER_SIZE])
    _LENGTH.pack_into(head, 8, rb.HEADER_SIZE - 12 + len(section))
    out = bytes(head) + section
    return out, rb.BatchView(0, len(out), view.base_offset, 2, view.attributes, view.last_offset_delta,
                             view.producer_id, view.record_count, view.max_timestamp)
