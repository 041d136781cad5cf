"""Schema ids rewritten inside a record batch without decoding its records into objects.

An id is 4 bytes at a fixed place of its frame (bytes 1-4 of a framed key or value, or of an id
header's value), so the target's id takes exactly the source id's room: every length, offset
delta, timestamp delta and header stays as it was, byte for byte. The records section is
decompressed, ids are overwritten where they sit, the section is compressed again with the
batch's own codec and put behind the batch's own header (only batchLength changes; the copier
re-stamps producer fields and the CRC as for any batch). A batch whose every id maps to itself
is passed as the source wrote it: same bytes, same codec, nothing compressed again.

Only batches the raw copier would pass unchanged take this path; a batch holding a record whose
id cannot be translated raises ``Untranslatable`` here and takes the record path, where
``schemas.on.error`` decides about that record.

Two walks find the ids, with the same result: ``rewrite_records``, record by record, reads every
record of every shape; ``_id_positions`` reads batches of at least ``VECTOR_MIN`` records that
carry no headers with numpy, one array operation per field for all records at once, after one
loop over the record lengths. Whatever it does not take (headers, a record that is no frame, a
length that does not add up) it leaves to ``rewrite_records``, which names what is wrong. Both
put every id they find through the id map (the array walk once per distinct id), so an id the
target cannot resolve raises ``Untranslatable`` and the batch leaves this path unwritten.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable

import numpy as np

from mm2py.kafka import batches as rb
from mm2py.kafka.codecs import compressed, decompressed
from mm2py.kafka.varint import read_zigzag
from mm2py.schemas import frames
from mm2py.schemas.subjects import Untranslatable

_LENGTH = struct.Struct(">i")


_KEY_HEADER = frames.KEY_HEADER.encode()
_VALUE_HEADER = frames.VALUE_HEADER.encode()
# batches of fewer records take the record-by-record walk: numpy's cost per call outweighs its gain
VECTOR_MIN = 64

# a source id's 4 bytes -> the target id's 4 bytes (raises Untranslatable)
IdMap = Callable[[bytes], bytes]


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
    for _ in range(count):  # one-byte varints inline
        b = data[pos]
        size, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_zigzag(data, pos)
        end = pos + size
        pos += 1  # attributes
        while data[pos] & 0x80:  # timestamp delta
            pos += 1
        pos += 1
        while data[pos] & 0x80:  # offset delta
            pos += 1
        pos += 1
        b = data[pos]
        key_len, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_zigzag(data, pos)
        key_at = pos
        if key_len > 0:
            pos += key_len
        b = data[pos]
        value_len, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_zigzag(data, pos)
        value_at = pos
        if value_len > 0:
            pos += value_len
        key_carried = value_carried = False
        if data[pos] == 0:  # no headers
            pos += 1
        else:
            headers, pos = read_zigzag(data, pos)
            for _ in range(headers):
                name_len, pos = read_zigzag(data, pos)
                name = bytes(data[pos:pos + name_len])
                pos += name_len
                header_len, pos = read_zigzag(data, pos)
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


# the first byte of a record's length varint -> the record's size with the varint, when that is
# one byte; for a two-byte varint the second byte adds (byte << 6) (see _record_ends)
_STEP = tuple(1 + (b >> 1) if b < 0x80 else 2 + ((b & 0x7F) >> 1) for b in range(256))


def _record_ends(data: bytearray, count: int) -> list[int]:
    """Where each of ``count`` records ends, reading each length as a varint of one or two bytes
    (records under 8 KiB); the caller checks every length against the bytes (``_id_positions``)."""
    ends: list[int] = []
    end = ends.append
    pos = 0
    step = _STEP
    for _ in itertools.repeat(None, count):  # the one loop over records: the rest are array operations
        b = data[pos]
        pos += step[b] if b < 0x80 else step[b] + (data[pos + 1] << 6)
        end(pos)
    return ends


def _past(a: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The position after the varint starting at each of ``at``."""
    end = at + (a[at] >= 0x80)
    more = a[end] >= 0x80
    for _ in range(8):  # a varlong has at most 10 bytes
        if not more.any():
            return end + 1
        end += more
        more &= a[end] >= 0x80
    raise IndexError("a varint longer than 10 bytes")


def _varints(a: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints (at most 5 bytes) starting at each of ``at``: (values, positions after them)."""
    b = a[at]
    more = b >= 0x80
    if not more.any():  # one byte each
        value = b.astype(np.int64)
        return (value >> 1) ^ -(value & 1), at + 1
    value = (b & 0x7F).astype(np.int64)
    end = at + more
    for shift in (7, 14, 21, 28):
        b = a[end]
        value |= (b & 0x7F).astype(np.int64) * more << shift
        more &= b >= 0x80
        if not more.any():
            return (value >> 1) ^ -(value & 1), end + 1
        end += more
    raise IndexError("a length varint longer than 5 bytes")


def _id_positions(data: bytearray, count: int, keys: bool) -> np.ndarray | None:
    """Where every schema id of the records section sits (the first of its 4 bytes), by the rules of
    ``rewrite_records``; None for a section this walk does not take: a record of 8 KiB or more, a
    record with headers, fields that do not add up to the record's length, a value that is no frame
    (``rewrite_records`` raises what is wrong). Raises IndexError for a field past the section."""
    ends = np.array(_record_ends(data, count), np.int64)
    if ends[-1] != len(data):
        return None
    a = np.frombuffer(data, np.uint8)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    first = a[starts]
    two = first >= 0x80
    # _record_ends read every length as one or two bytes and positive: check it did
    if (first & 1).any() or (two & (a[starts + two] >= 0x80)).any():
        return None
    at = _past(a, _past(a, starts + two + 2))  # past the length, the attributes, both deltas
    key_len, key_at = _varints(a, at)
    value_len, value_at = _varints(a, key_at + np.maximum(key_len, 0))
    headers_at = value_at + np.maximum(value_len, 0)
    if not (headers_at + 1 == ends).all() or a[headers_at].any():  # headers, or fields past the length
        return None
    present = value_len >= 0
    if not present.all():
        value_at, value_len = value_at[present], value_len[present]
    if not ((value_len >= frames.PREFIX).all() and (a[value_at] == frames.MAGIC).all()):
        return None
    if not keys:
        return value_at + 1
    framed = (key_len >= frames.PREFIX) & (a[np.minimum(key_at, len(data) - 1)] == frames.MAGIC)
    return np.concatenate((key_at[framed], value_at)) + 1


def _rewrite_section(data: bytearray, count: int, mapped: IdMap, keys: bool) -> bool:
    """Overwrite every schema id in ``data``; False when every id maps to itself (nothing written)."""
    at = None
    if count >= VECTOR_MIN:
        try:
            at = _id_positions(data, count, keys)
        except IndexError:  # a varint or field runs past the section: rewrite_records says where
            at = None
    if at is None:
        changed = False

        def tracked(source: bytes) -> bytes:
            nonlocal changed
            target = mapped(source)
            changed = changed or target != source
            return target

        rewrite_records(data, count, tracked, keys)
        return changed
    if not len(at):
        return False
    # every position's 4 bytes as one big-endian id: an unaligned view of data, read and written at ``at``
    id_at = np.ndarray((len(data) - 3,), ">u4", data, 0, (1,))
    ids = id_at[at]
    known = ids[:1] if (ids == ids[0]).all() else np.unique(ids)
    targets = np.array([int.from_bytes(mapped(int(i).to_bytes(4, "big")), "big") for i in known], ">u4")
    if (targets == known).all():
        return False
    id_at[at] = targets[0] if len(known) == 1 else targets[np.searchsorted(known, ids)]
    return True


def rewritten_batch(buf: bytes | memoryview, view: rb.BatchView, mapped: IdMap,
                    keys: bool = True) -> tuple[bytes | memoryview, rb.BatchView]:
    """The batch at ``view`` with every schema id rewritten, and a view of it (start 0).

    When every id maps to itself, ``buf`` and ``view`` themselves: the source's batch as it is.
    """
    whole = memoryview(buf)[view.start:view.start + view.size]
    codec = view.attributes & rb.ATTR_CODEC_MASK
    body = whole[rb.HEADER_SIZE:]
    data = decompressed(codec, body)
    if not _rewrite_section(data, view.record_count, mapped, keys):
        return buf, view
    section = compressed(codec, data)
    head = bytearray(whole[:rb.HEADER_SIZE])
    _LENGTH.pack_into(head, 8, rb.HEADER_SIZE - 12 + len(section))
    out = bytes(head) + section
    return out, rb.BatchView(0, len(out), view.base_offset, 2, view.attributes, view.last_offset_delta,
                             view.producer_id, view.record_count, view.max_timestamp, view.leader_epoch)
