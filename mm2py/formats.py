"""MirrorMaker 2's internal record formats, byte for byte.

Heartbeat, Checkpoint and OffsetSync use Kafka protocol encoding: big-endian integers and
STRING = int16 length + UTF-8, fields concatenated without tags. Source positions use
Kafka Connect's JSON (JsonConverter, schemas disabled), as MM2's Connect worker writes them.
Each type owns its serialization: ``key_bytes()``, ``value_bytes()``, ``from_record()``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from mm2py.errors import FormatError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MAX_STRING = 32767


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING:
        raise FormatError(f"string of {len(raw)} bytes exceeds the protocol's {MAX_STRING}")
    return _I16.pack(len(raw)) + raw


class _Reader:
    """Sequential decoding that names the record type and field when bytes run short."""

    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 0, what

    def _take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise FormatError(f"{self.what}: truncated at {field} ({len(self.data)} bytes)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self, field: str) -> int:
        return _I16.unpack(self._take(2, field))[0]

    def i32(self, field: str) -> int:
        return _I32.unpack(self._take(4, field))[0]

    def i64(self, field: str) -> int:
        return _I64.unpack(self._take(8, field))[0]

    def string(self, field: str) -> str:
        n = self.i16(field)
        if n < 0:
            raise FormatError(f"{self.what}: null {field}")
        return self._take(n, field).decode("utf-8")

    def version(self) -> None:
        v = self.i16("version")
        if v != 0:
            raise FormatError(f"{self.what}: unknown version {v}")


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Written every ``emit.heartbeats.interval.seconds`` by the flow source->target into target."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def key_bytes(self) -> bytes:
        return _string(self.source_cluster_alias) + _string(self.target_cluster_alias)

    def value_bytes(self) -> bytes:
        return _I16.pack(0) + _I64.pack(self.timestamp)

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Heartbeat:
        k, v = _Reader(key, "heartbeat key"), _Reader(value, "heartbeat value")
        source, target = k.string("sourceClusterAlias"), k.string("targetClusterAlias")
        v.version()
        return cls(source, target, v.i64("timestamp"))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consumer group's committed offset, upstream and translated, on the target cluster.

    ``topic`` is the downstream (remote) topic name, as MM2 writes it.
    """

    consumer_group_id: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key_bytes(self) -> bytes:
        return _string(self.consumer_group_id) + _string(self.topic) + _I32.pack(self.partition)

    def value_bytes(self) -> bytes:
        return (_I16.pack(0) + _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset)
                + _string(self.metadata))

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Checkpoint:
        k, v = _Reader(key, "checkpoint key"), _Reader(value, "checkpoint value")
        group, topic, partition = k.string("group"), k.string("topic"), k.i32("partition")
        v.version()
        upstream, downstream = v.i64("upstreamOffset"), v.i64("offset")
        return cls(group, topic, partition, upstream, downstream, v.string("metadata"))


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Source offset ``upstream_offset`` of ``topic``/``partition`` is at ``downstream_offset``.

    ``topic`` is the upstream (source) topic name. The value has no version field.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key_bytes(self) -> bytes:
        return _string(self.topic) + _I32.pack(self.partition)

    def value_bytes(self) -> bytes:
        return _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset)

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> OffsetSync:
        k, v = _Reader(key, "offset sync key"), _Reader(value, "offset sync value")
        topic, partition = k.string("topic"), k.i32("partition")
        return cls(topic, partition, v.i64("upstreamOffset"), v.i64("offset"))


@dataclass(frozen=True, slots=True)
class SourceOffset:
    """A source position in ``mm2-offsets.{source}.internal``: the last mirrored offset.

    Key bytes equal what MM2's worker writes (checked against Apache Kafka 4.3's MM2):
    ``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]``; Java's HashMap
    happens to iterate these three keys in that order, and Jackson writes no spaces.
    ``offset`` None is a tombstone (position removed).
    """

    cluster: str
    topic: str
    partition: int
    offset: int | None
    connector: str = "MirrorSourceConnector"

    def key_bytes(self) -> bytes:
        # ordered dict literal: JSON text must match Connect's to the byte for compaction
        partition = {"cluster": self.cluster, "partition": self.partition, "topic": self.topic}
        return json.dumps([self.connector, partition], separators=(",", ":"), ensure_ascii=False).encode()

    def value_bytes(self) -> bytes | None:
        if self.offset is None:
            return None
        return json.dumps({"offset": self.offset}, separators=(",", ":")).encode()

    @classmethod
    def from_record(cls, key: bytes, value: bytes | None) -> SourceOffset | None:
        """Parse one record; None when it is another connector's state (not a source position)."""
        try:
            parsed = json.loads(key)
        except (ValueError, UnicodeDecodeError) as e:
            raise FormatError(f"source offset key is not JSON: {key[:80]!r}") from e
        if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], dict)):
            raise FormatError(f"source offset key is not [connector, partition]: {key[:80]!r}")
        connector, part = parsed
        if connector != "MirrorSourceConnector" or not {"cluster", "topic", "partition"} <= part.keys():
            return None
        offset = None
        if value is not None:
            try:
                offset = int(json.loads(value)["offset"])
            except (ValueError, KeyError, TypeError) as e:
                raise FormatError(f"source offset value is not {{\"offset\": N}}: {value[:80]!r}") from e
        return cls(str(part["cluster"]), str(part["topic"]), int(part["partition"]), offset, connector)
