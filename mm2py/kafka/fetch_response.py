"""FetchResponse v12 and v13 read in place: each partition's records stay a view of the received frame.

kafka-python's decoder copies every partition's records into a fresh ``bytes``; on this
machine a fresh page costs more than the copy itself (about 10 µs per 4 KiB fault inside
the VM), so the copier's biggest kernel cost was allocating records it then only sliced.
The fields are those of the Kafka protocol guide's FetchResponse v12 (flexible version:
compact arrays and strings, unsigned-varint lengths plus one, tagged fields everywhere); v13 names
each topic by its 16-byte id (KIP-516) where v12 gives its name, and is otherwise the same.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, last stable, log start
_ABORTED = struct.Struct(">qq")


TopicKey = str | uuid.UUID  # how a FetchResponse names a topic: by name (v12) or by id (v13)


class MalformedResponse(ValueError):
    """The frame does not hold a FetchResponse of the version asked for."""


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[tuple[int, int], ...]  # (producer_id, first_offset) of aborted txns
    records: bytes | memoryview
    preferred_read_replica: int = -1  # a replica the leader says to fetch from instead (client.rack), or -1


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview):
        self.data = data
        self.pos = 0

    def uvarint(self) -> int:
        result = shift = 0
        data = self.data
        while True:
            byte = data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise MalformedResponse("varint longer than 5 bytes")

    def fixed(self, fmt: struct.Struct) -> tuple:
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return values

    def view(self, length: int) -> memoryview:
        if length < 0 or self.pos + length > len(self.data):
            raise MalformedResponse(f"field of {length} bytes runs past the frame")
        out = self.data[self.pos:self.pos + length]
        self.pos += length
        return out

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.view(self.uvarint())


def parse_fetch(
    frame: memoryview, version: int = 12
) -> tuple[int, int, int, dict[tuple[TopicKey, int], FetchedPartition]]:
    """(correlation id, top-level error code, session id, partitions) of a FetchResponse v12 or v13
    frame (after its size); partitions are keyed by topic name (v12) or topic id (v13)."""
    if version not in (12, 13):
        raise ValueError(f"FetchResponse v{version} is not read in place")
    r = _Reader(frame)
    try:
        (correlation_id,) = r.fixed(_I32)
        r.skip_tagged()  # response header v1
        r.pos += 4  # throttle_time_ms
        (error,) = r.fixed(_I16)
        (session_id,) = r.fixed(_I32)
        out: dict[tuple[TopicKey, int], FetchedPartition] = {}
        for _ in range(max(r.uvarint() - 1, 0)):
            topic: TopicKey = (uuid.UUID(bytes=bytes(r.view(16))) if version >= 13
                               else str(r.view(r.uvarint() - 1), "utf-8"))
            for _ in range(max(r.uvarint() - 1, 0)):
                index, code, high, stable, start = r.fixed(_PARTITION)
                aborted = []
                for _ in range(max(r.uvarint() - 1, 0)):  # 0: null array
                    aborted.append(r.fixed(_ABORTED))
                    r.skip_tagged()
                (preferred,) = r.fixed(_I32)
                length = r.uvarint() - 1
                records = r.view(length) if length > 0 else b""
                r.skip_tagged()
                out[(topic, index)] = FetchedPartition(code, high, stable, start, tuple(aborted), records, preferred)
            r.skip_tagged()
        r.skip_tagged()
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise MalformedResponse(f"FetchResponse v{version} cut short at byte {r.pos}: {e}") from e
    return correlation_id, error, session_id, out
