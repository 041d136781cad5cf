"""MirrorMaker 2's internal record formats, byte for byte.

Heartbeat, Checkpoint and OffsetSync use Kafka protocol encoding (``protocol.types.Type``):
big-endian integers, STRING = int16 length + UTF-8, fields concatenated without tags.
Source positions use Kafka Connect's JSON (JsonConverter, schemas disabled), as MM2's worker
writes them. Each type owns its serialization: ``key_bytes()``, ``value_bytes()``,
``from_record()``. Decoding reads like MM2's: unknown versions, short or malformed bytes
raise FormatError; bytes past the last field are ignored, as Java's ``Schema.read`` does.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass

from mm2py.errors import FormatError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64_PAIR = struct.Struct(">qq")
MAX_STRING = 32767  # Short.MAX_VALUE: Type.STRING refuses longer
VERSION = 0  # the only Heartbeat/Checkpoint value version MM2 has ever written


def _string(value: str, field: str) -> bytes:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise FormatError(f"{field}: not encodable as UTF-8: {e}") from e
    if len(raw) > MAX_STRING:
        raise FormatError(f"{field}: string of {len(raw)} bytes exceeds the protocol's {MAX_STRING}")
    return _I16.pack(len(raw)) + raw


def _int(packer: struct.Struct, value: int, field: str) -> bytes:
    try:
        return packer.pack(value)
    except struct.error as e:
        raise FormatError(f"{field}: {value!r} does not fit in {packer.size * 8} bits") from e


class _Reader:
    """Sequential decoding that names the record type and field when bytes are wrong."""

    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 0, what

    def _take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise FormatError(f"{self.what}: truncated at {field} (needs {self.pos + n} bytes, has {len(self.data)})")
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
            raise FormatError(f"{self.what}: negative length {n} for {field}")
        raw = self._take(n, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"{self.what}: {field} is not UTF-8: {e}") from e

    def version(self) -> None:
        if (v := self.i16("version")) != VERSION:
            raise FormatError(f"{self.what}: unknown version {v} (only {VERSION} is known)")


def _require_bytes(key: bytes | None, value: bytes | None, what: str) -> tuple[bytes, bytes]:
    if key is None or value is None:
        raise FormatError(f"{what}: null {'key' if key is None else 'value'}")
    return key, value


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Emitted by the flow ``source->target`` into ``heartbeats`` on the target.

    Key: ``sourceClusterAlias:STRING, targetClusterAlias:STRING``.
    Value: ``version:INT16 = 0, timestamp:INT64`` (epoch ms; also the record timestamp).
    """

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def key_bytes(self) -> bytes:
        return (_string(self.source_cluster_alias, "sourceClusterAlias")
                + _string(self.target_cluster_alias, "targetClusterAlias"))

    def value_bytes(self) -> bytes:
        return _I16.pack(VERSION) + _int(_I64, self.timestamp, "timestamp")

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Heartbeat:
        key, value = _require_bytes(key, value, "heartbeat")
        k, v = _Reader(key, "heartbeat key"), _Reader(value, "heartbeat value")
        source, target = k.string("sourceClusterAlias"), k.string("targetClusterAlias")
        v.version()
        return cls(source, target, v.i64("timestamp"))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consumer group's committed offset, upstream and translated, in ``{source}.checkpoints.internal``.

    ``topic`` is the downstream (remote) topic name, as MM2 writes it.
    Key: ``group:STRING, topic:STRING, partition:INT32``.
    Value: ``version:INT16 = 0, upstreamOffset:INT64, offset:INT64, metadata:STRING``.
    """

    consumer_group_id: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition

    def key_bytes(self) -> bytes:
        return (_string(self.consumer_group_id, "group") + _string(self.topic, "topic")
                + _int(_I32, self.partition, "partition"))

    def value_bytes(self) -> bytes:
        return (_I16.pack(VERSION) + _int(_I64, self.upstream_offset, "upstreamOffset")
                + _int(_I64, self.downstream_offset, "offset") + _string(self.metadata, "metadata"))

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> Checkpoint:
        key, value = _require_bytes(key, value, "checkpoint")
        k, v = _Reader(key, "checkpoint key"), _Reader(value, "checkpoint value")
        group, topic, partition = k.string("group"), k.string("topic"), k.i32("partition")
        v.version()
        upstream, downstream = v.i64("upstreamOffset"), v.i64("offset")
        return cls(group, topic, partition, upstream, downstream, v.string("metadata"))


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Source offset ``upstream_offset`` of ``topic``/``partition`` landed at ``downstream_offset``.

    ``topic`` is the upstream (source) topic name.
    Key: ``topic:STRING, partition:INT32``. Value: ``upstreamOffset:INT64, offset:INT64``, no version.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition

    def key_bytes(self) -> bytes:
        return _string(self.topic, "topic") + _int(_I32, self.partition, "partition")

    def value_bytes(self) -> bytes:
        return _int(_I64, self.upstream_offset, "upstreamOffset") + _int(_I64, self.downstream_offset, "offset")

    @staticmethod
    def offsets_in(value: bytes) -> tuple[int, int] | None:
        """``(upstreamOffset, offset)`` of a sync's value; None when it is too short (``from_record`` says why).

        The key of a partition's syncs is the same bytes every time: a reader of many syncs decodes
        each key once (``from_record``) and then only this.
        """
        return _I64_PAIR.unpack_from(value) if value is not None and len(value) >= 16 else None

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> OffsetSync:
        key, value = _require_bytes(key, value, "offset sync")
        k, v = _Reader(key, "offset sync key"), _Reader(value, "offset sync value")
        topic, partition = k.string("topic"), k.i32("partition")
        return cls(topic, partition, v.i64("upstreamOffset"), v.i64("offset"))


# Jackson's escapes: the two-character forms for these, \u00XX (upper-case hex) for other
# control characters, and each UTF-16 surrogate escaped on its own (Jackson 2.x does not
# write astral characters as 4-byte UTF-8 by default). Everything else is raw UTF-8.
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPED = re.compile(r'["\\\x00-\x1f\ud800-\udfff\U00010000-\U0010ffff]')  # what the loop below rewrites


def _jackson_string(text: str) -> str:
    if _ESCAPED.search(text) is None:  # topic names and aliases: nothing to escape
        return f'"{text}"'
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04X}")
        elif code > 0xFFFF:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04X}\\u{low:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@dataclass(frozen=True, slots=True)
class SourceOffset:
    """A source position in ``mm2-offsets.{source}.internal``: the last mirrored source offset.

    Compaction (and the murmur2 partition choice) go by exact key bytes, so ``key_bytes`` is
    the text Kafka Connect writes, ``["MirrorSourceConnector",{"cluster":"A","partition":0,
    "topic":"t"}]``. OffsetStorageWriter serializes ``[connector name, partition map]`` with
    JsonConverter (schemas.enable=false), which emits Jackson's compact form (no spaces) and
    keeps the map's iteration order. MM2 builds that map as a java.util.HashMap
    (MirrorUtils.wrapPartition); with 16 buckets ``cluster``, ``partition`` and ``topic`` hash
    to buckets 1, 3 and 9, whatever the values, hence that order. Confirmed by running Apache
    Kafka 4.3.0's JsonConverter on MirrorUtils.wrapPartition. The value is ``{"offset":N}``
    (MirrorUtils.wrapOffset); MM2 resumes at N + 1. ``offset`` None is a tombstone.

    mm2py adds ``"leaderEpoch":E`` when it knows the partitionLeaderEpoch of the source batch
    holding N (mm2py.source.plan.divergence); MM2 reads only ``offset`` (MirrorUtils.unwrapOffset) and
    writes ``{"offset":N}``, which reads back with ``leader_epoch`` None.
    """

    cluster: str
    topic: str
    partition: int
    offset: int | None
    connector_name: str = "MirrorSourceConnector"
    leader_epoch: int | None = None

    def key_bytes(self) -> bytes:
        _int(_I32, self.partition, "partition")  # range check: Connect's map holds a Java int
        return (f"[{_jackson_string(self.connector_name)},{{\"cluster\":{_jackson_string(self.cluster)},"
                f"\"partition\":{self.partition},\"topic\":{_jackson_string(self.topic)}}}]").encode()

    def value_bytes(self) -> bytes | None:
        if self.offset is None:
            return None
        _int(_I64, self.offset, "offset")  # range check: a Java long
        if self.leader_epoch is not None and self.leader_epoch >= 0:
            _int(_I32, self.leader_epoch, "leader epoch")
            return f'{{"offset":{self.offset},"leaderEpoch":{self.leader_epoch}}}'.encode()
        return f'{{"offset":{self.offset}}}'.encode()

    @classmethod
    def from_record(
        cls, key: bytes, value: bytes | None, connector_name: str = "MirrorSourceConnector"
    ) -> SourceOffset | None:
        """Parse one record in any JSON spelling; None when it is another connector's state.

        MM2's checkpoint and heartbeat connectors keep their offsets in the same topic.
        """
        parsed = _json(key, "source offset key")
        if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], dict)):
            raise FormatError(f"source offset key is not [connector, partition]: {key[:200]!r}")
        connector, part = parsed
        if connector != connector_name:
            return None
        cluster, topic, partition = part.get("cluster"), part.get("topic"), part.get("partition")
        if not (isinstance(cluster, str) and isinstance(topic, str) and _is_int(partition)):
            raise FormatError(f"source offset key lacks cluster, topic or partition: {key[:200]!r}")
        offset = epoch = None
        if value is not None:
            body = _json(value, "source offset value")
            offset = body.get("offset") if isinstance(body, dict) else None
            if not _is_int(offset):
                raise FormatError(f'source offset value is not {{"offset": N}}: {value[:200]!r}')
            found = body.get("leaderEpoch") if isinstance(body, dict) else None
            epoch = found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else None
        return cls(cluster, topic, partition, offset, connector, epoch)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json(data: bytes, what: str) -> object:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{what} is not JSON: {data[:200]!r}") from e
