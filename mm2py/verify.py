"""Comparing a source topic with its mirror, partition by partition, record by record.

Each side is read in offset order and folded into a count and a SHA-256 over every record's
key, value, headers and timestamp (offsets differ between clusters and are left out).
"""

from __future__ import annotations

import hashlib
import struct
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.kafka.clientconf import rdkafka_config


def _field(h: hashlib._Hash, data: bytes | None) -> None:
    if data is None:
        h.update(b"\xff\xff\xff\xff")
    else:
        h.update(struct.pack(">i", len(data)))
        h.update(data)


@dataclass(frozen=True)
class PartitionDigest:
    count: int
    digest: str


@dataclass(frozen=True)
class PartitionCheck:
    topic: str
    partition: int
    source: PartitionDigest
    target: PartitionDigest

    @property
    def ok(self) -> bool:
        return self.source == self.target


def digest_partitions(cluster: ClusterConfig, topic: str, limits: dict[int, int] | None = None,
                      timeout: float = 120) -> dict[int, PartitionDigest]:
    """Digest of each partition of ``topic`` up to ``limits[p]`` (default: its current end)."""
    conf = rdkafka_config(cluster.bootstrap_servers, cluster.consumer, cluster.alias)
    conf.update({"group.id": "mm2py-verify", "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if md is None or md.error is not None:
            raise KafkaError("topic not found", cluster=cluster.alias, topic=topic)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in md.partitions}
        if limits is not None:
            ends = {p: min(e, limits.get(p, e)) for p, e in ends.items()}
        hashes = {p: hashlib.sha256() for p in ends}
        counts = dict.fromkeys(ends, 0)
        remaining = {p: e for p, e in ends.items() if e > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in remaining])
        deadline = time.monotonic() + timeout
        while remaining:
            if time.monotonic() > deadline:
                raise KafkaError(f"reading did not finish within {timeout:.0f} s", cluster=cluster.alias,
                                 topic=topic, retriable=True)
            for msg in consumer.consume(10000, timeout=0.5):
                if msg.error():
                    raise KafkaError(str(msg.error()), cluster=cluster.alias, topic=topic)
                p = msg.partition()
                if p not in remaining or msg.offset() >= remaining[p]:
                    continue
                h = hashes[p]
                _field(h, msg.key())
                _field(h, msg.value())
                for name, value in msg.headers() or ():
                    _field(h, name.encode())
                    _field(h, value)
                h.update(struct.pack(">q", msg.timestamp()[1]))
                counts[p] += 1
                if msg.offset() + 1 >= remaining[p]:
                    remaining.pop(p)
            for p in list(remaining):  # transaction markers leave the position past the last record
                if consumer.position([TopicPartition(topic, p)])[0].offset >= remaining[p]:
                    remaining.pop(p)
        return {p: PartitionDigest(counts[p], hashes[p].hexdigest()) for p in ends}
    finally:
        consumer.close()


def compare_topic(source: ClusterConfig, topic: str, target: ClusterConfig, remote_topic: str) -> list[PartitionCheck]:
    src = digest_partitions(source, topic)
    dst = digest_partitions(target, remote_topic)
    empty = PartitionDigest(0, hashlib.sha256().hexdigest())
    return [PartitionCheck(topic, p, src.get(p, empty), dst.get(p, empty)) for p in sorted(set(src) | set(dst))]
