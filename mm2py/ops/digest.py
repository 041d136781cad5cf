"""Comparing a source topic with its mirror, partition by partition, record by record.

Each side is read in offset order and folded into a count and a SHA-256 over every record's
key, value, headers and timestamp (offsets differ between clusters and are left out).
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError as KafkaErrorCode
from confluent_kafka import Message, TopicPartition

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.kafka import rdclients
from mm2py.kafka.admin import Admin
from mm2py.kafka.batches import Record
from mm2py.kafka.clientconf import rdkafka_config


def _field(h: hashlib._Hash, data: bytes | None) -> None:
    if data is None:
        h.update(b"\xff\xff\xff\xff")
    else:
        h.update(struct.pack(">i", len(data)))
        h.update(data)


@dataclass(frozen=True)
class PartitionDigest:
    """``count`` records folded into ``digest``; ``dropped``: records a replayed chain left out (not compared)."""

    count: int
    digest: str
    dropped: int = field(default=0, compare=False)


@dataclass(frozen=True)
class PartitionCheck:
    topic: str
    partition: int
    source: PartitionDigest
    target: PartitionDigest

    @property
    def ok(self) -> bool:
        return self.source == self.target


# (key, value, headers) -> the same in the form compared (verify --decode: mm2py.schemas.decode)
Normalize = Callable[[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]],
                     tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]]
# consecutive records of one partition as read -> per record, the record the target should hold, or None
# where none should be (a transform chain; any grouping gives the same: its batch links are row-wise)
Replay = Callable[[Sequence[Record]], Sequence[Record | None]]


def _fold(h: hashlib._Hash, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
          timestamp: int) -> None:
    _field(h, key)
    _field(h, value)
    for name, header in headers:
        _field(h, name.encode())
        _field(h, header)
    h.update(struct.pack(">q", timestamp))


def digest_ranges(cluster: ClusterConfig, topic: str, ranges: dict[int, tuple[int, int]],
                  timeout: float = 120, normalize: Normalize | None = None,
                  replay: Replay | None = None) -> dict[int, PartitionDigest]:
    """Digest of the records of each partition ``p`` of ``topic`` in ``[start, end)`` of ``ranges[p]``.

    ``replay``: each poll's records of a partition are digested as it returns them, or counted
    ``dropped`` where it returns None; then ``normalize``: each record's key, value and headers are
    digested as it returns them.
    """
    conf = rdkafka_config(cluster.bootstrap_servers, cluster.consumer, cluster.alias)
    # "error": a range whose records left the log (retention, DeleteRecords) after it was planned
    # must fail and say so; the default reset would jump to the end and wait for them forever
    conf.update({"group.id": "mm2py-verify", "enable.auto.commit": False, "isolation.level": "read_committed",
                 "auto.offset.reset": "error"})
    consumer = rdclients.consumer(conf)
    try:
        hashes = {p: hashlib.sha256() for p in ranges}
        counts, dropped = dict.fromkeys(ranges, 0), dict.fromkeys(ranges, 0)
        # a range past the partition's end (records missing there) stops at the end, never waits
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                 for p, (start, end) in ranges.items() if end > start}
        remaining = {p: min(ranges[p][1], high) for p, high in highs.items() if min(ranges[p][1], high) > ranges[p][0]}
        consumer.assign([TopicPartition(topic, p, ranges[p][0]) for p in remaining])
        deadline = time.monotonic() + timeout
        while remaining:
            if time.monotonic() > deadline:
                raise KafkaError(f"reading did not finish within {timeout:.0f} s", cluster=cluster.alias,
                                 topic=topic, retriable=True)
            read: dict[int, list[Record]] = {}  # this poll's records per partition, in offset order
            for msg in consumer.consume(10000, timeout=0.5):
                if msg.error():
                    raise _read_error(msg, cluster, topic, ranges)
                p, offset = _position(msg)
                if p not in remaining or offset >= remaining[p]:
                    continue
                read.setdefault(p, []).append(Record(offset, msg.timestamp()[1], msg.key(), msg.value(),
                                                     tuple(_headers(msg))))
            for p, records in read.items():
                for kept in (replay(records) if replay is not None else records):
                    if kept is None:
                        dropped[p] += 1
                        continue
                    key, value = kept.key, kept.value
                    headers: Sequence[tuple[str, bytes | None]] = kept.headers
                    if normalize is not None:
                        key, value, headers = normalize(key, value, headers)
                    _fold(hashes[p], key, value, headers, kept.timestamp)
                    counts[p] += 1
                if records[-1].offset + 1 >= remaining[p]:
                    remaining.pop(p)
            for p in list(remaining):  # transaction markers leave the position past the last record
                if consumer.position([TopicPartition(topic, p)])[0].offset >= remaining[p]:
                    remaining.pop(p)
        return {p: PartitionDigest(counts[p], hashes[p].hexdigest(), dropped[p]) for p in ranges}
    finally:
        consumer.close()


def _position(msg: Message) -> tuple[int, int]:
    """The partition and offset of a consumed record (a record, not an error event, has both)."""
    p, offset = msg.partition(), msg.offset()
    assert p is not None and offset is not None, "a consumed record without a partition or offset"
    return p, offset


def _headers(msg: Message) -> Sequence[tuple[str, bytes | None]]:
    """A consumed record's headers as (name, value) pairs; the client gives bytes values (or None)."""
    found = msg.headers() or []
    pairs = found.items() if isinstance(found, dict) else found
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]


def _read_error(msg: Message, cluster: ClusterConfig, topic: str,
                ranges: dict[int, tuple[int, int]]) -> KafkaError:
    err, p = msg.error(), msg.partition()
    assert err is not None, "called for an error event only"
    if err.code() == KafkaErrorCode._AUTO_OFFSET_RESET and p in ranges:
        start, end = ranges[p]
        return KafkaError(f"records in [{start}, {end}) are no longer in the log (deleted by retention or "
                          f"DeleteRecords since the check was planned); run it again: {err.str()}",
                          cluster=cluster.alias, topic=topic, partition=p, offset=start)
    return KafkaError(err.str(), cluster=cluster.alias, topic=topic, partition=p)


def digest_partitions(cluster: ClusterConfig, topic: str, timeout: float = 120) -> dict[int, PartitionDigest]:
    """Digest of each whole partition of ``topic`` (its log start to its current end)."""
    admin = Admin(cluster)
    count = admin.topics().get(topic)
    if count is None:
        raise KafkaError("topic not found", cluster=cluster.alias, topic=topic)
    tps = [(topic, p) for p in range(count)]
    starts, ends = admin.list_offsets(tps, "earliest"), admin.list_offsets(tps, "latest")
    return digest_ranges(cluster, topic, {p: (starts[(topic, p)], ends[(topic, p)]) for _, p in tps}, timeout)


def compare_topic(source: ClusterConfig, topic: str, target: ClusterConfig, remote_topic: str) -> list[PartitionCheck]:
    src = digest_partitions(source, topic)
    dst = digest_partitions(target, remote_topic)
    empty = PartitionDigest(0, hashlib.sha256().hexdigest())
    return [PartitionCheck(topic, p, src.get(p, empty), dst.get(p, empty)) for p in sorted(set(src) | set(dst))]
