"""Kafka RecordBatch v2 bytes: split, inspect, patch for the target, rebuild when needed.

The fast path never decodes records: a fetched batch is re-stamped with the mirror's own
producer state (baseOffset 0, producerId/epoch/baseSequence, transactional bit cleared) and
its CRC-32C recomputed over bytes 21..end; the compressed payload stays byte-identical.

Batches that cannot pass unchanged are rebuilt record by record (``rebuild``):
offset gaps inside the batch (compaction), LOG_APPEND_TIME timestamps, legacy magic 0/1
message sets, and a batch whose first records lie before the range being mirrored.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch

from mm2py.errors import Mm2pyError
from mm2py.kafka.fastio import Pieces

HEADER_SIZE = 61
_LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32
HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header, HEADER_SIZE bytes
_PATCH = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at byte 43

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20


class CorruptBatchError(Mm2pyError):
    """Fetched bytes are not a valid record batch (CRC mismatch, bad length)."""


@dataclass(frozen=True, slots=True)
class BatchView:
    """Where one batch sits in a fetch buffer, and the header fields the mirror needs."""

    start: int
    size: int
    base_offset: int
    magic: int
    attributes: int
    last_offset_delta: int
    producer_id: int
    record_count: int
    max_timestamp: int = -1  # of the newest record (v2 header; -1 for legacy message sets)
    # partitionLeaderEpoch: the epoch of the leader that appended it (v2 header; -1 for legacy
    # message sets); a leader's epochs only grow along its log (KIP-101, KIP-320)
    leader_epoch: int = -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def contiguous(self) -> bool:
        """True when offsets inside the batch have no gaps (compaction leaves gaps)."""
        return self.record_count == self.last_offset_delta + 1

    @property
    def passes_unchanged(self) -> bool:
        return self.magic == 2 and self.contiguous and not self.log_append_time


def split_batches(buf: bytes | memoryview) -> Iterator[BatchView]:
    """Yield every complete batch in a fetch response's records field.

    A fetch may end with a partial batch (cut by max bytes); it is left out, and the caller
    fetches again from the last complete batch's next offset.
    """
    pos = 0
    end = len(buf)
    while pos + _LOG_OVERHEAD <= end:
        base_offset, batch_len = struct.unpack_from(">qi", buf, pos)
        size = batch_len + _LOG_OVERHEAD
        if batch_len <= 0 or pos + size > end:
            return
        magic = buf[pos + 16]
        if magic == 2:
            if size < HEADER_SIZE:
                raise CorruptBatchError(f"record batch at offset {base_offset} is {size} bytes")
            (_, _, epoch, _, _, attributes, last_delta, _, max_ts, producer_id, _, _, count) = HEADER.unpack_from(
                buf, pos
            )
            yield BatchView(pos, size, base_offset, 2, attributes, last_delta, producer_id, count, max_ts, epoch)
        else:
            # legacy message set entry: the offset is the wrapper's last inner offset for
            # compressed v1, the record's own offset otherwise; rebuild decodes it exactly
            yield BatchView(pos, size, base_offset, magic, 0, 0, -1, 1)
        pos += size


def verify_crc(buf: bytes | memoryview, view: BatchView) -> None:
    stored = struct.unpack_from(">I", buf, view.start + 17)[0]
    actual = crc32c.crc32c(memoryview(buf)[view.start + 21 : view.start + view.size])
    if stored != actual:
        raise CorruptBatchError(f"CRC mismatch in record batch at offset {view.base_offset}")



def patch_for_target(buf: bytes | memoryview, view: BatchView, producer_id: int, epoch: int, sequence: int,
                     transactional: bool = False) -> Pieces:
    """The batch re-stamped with the mirror's producer state and a fresh CRC, as (header, body).

    ``transactional`` sets the transactional bit (the mirror's own transaction), else it is cleared.

    Only the 61-byte header is copied and patched; the body (records, compressed or not) is a
    view of the fetched bytes, sent as it is. Only fields the target broker checks against the
    producer are touched; records, compression and timestamps stay as the source wrote them.
    """
    whole = memoryview(buf)[view.start : view.start + view.size]
    head = bytearray(whole[:HEADER_SIZE])
    body = whole[HEADER_SIZE:]
    struct.pack_into(">q", head, 0, 0)
    attributes = view.attributes & ~ATTR_TRANSACTIONAL
    struct.pack_into(">h", head, 21, (attributes | ATTR_TRANSACTIONAL) if transactional else attributes)
    _PATCH.pack_into(head, 43, producer_id, epoch, sequence)
    crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(head)[21:]))
    struct.pack_into(">I", head, 17, crc)
    return bytes(head), body


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def decode(buf: bytes | memoryview, view: BatchView) -> list[Record]:
    """Decode one batch's records (the slow path only)."""
    data = bytes(memoryview(buf)[view.start : view.start + view.size])
    if view.magic == 2:
        batch = DefaultRecordBatch(data)
        return [
            Record(r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))
            for r in batch
        ]
    batch = LegacyRecordBatch(data, view.magic)
    return [Record(r.offset, r.timestamp, r.key, r.value, ()) for r in batch]


def codec_of(buf: bytes | memoryview, view: BatchView) -> int:
    if view.magic == 2:
        return view.attributes & ATTR_CODEC_MASK
    # legacy: codec is in the wrapper message's attributes byte
    return buf[view.start + 21] & ATTR_CODEC_MASK


def rebuild(
    records: list[Record], codec: int, producer_id: int, epoch: int, sequence: int, transactional: bool = False
) -> bytes | None:
    """Encode records as one new v2 batch stamped with the mirror's producer state.

    Timestamps are written as CreateTime with the values consumers of the source saw,
    which is what MM2 does too. The batch carries ``codec`` unless compression would not
    shrink it (kafka-python's builder then writes it uncompressed, as its producer does).
    Returns None when nothing is left to write.
    """
    if not records:
        return None
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 30,
    )
    for delta, rec in enumerate(records):
        builder.append(delta, timestamp=rec.timestamp, key=rec.key, value=rec.value, headers=list(rec.headers))
    return bytes(builder.build())
