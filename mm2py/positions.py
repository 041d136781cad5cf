"""Mirroring progress kept on the target cluster, in MirrorMaker 2's own format.

Per source partition, the last mirrored source offset lives in ``mm2-offsets.{source}.internal``
on the target, exactly as MM2's Connect worker writes it. So a lost Spark checkpoint costs
nothing, and mm2py and a running MM2 can take over from each other without copying twice.

Invariants:
- a position is written only after every batch up to it is acknowledged by the target;
- records go to the partition Kafka Connect would pick (murmur2 of the key bytes), so the
  compacted topic keeps one live record per source partition whichever tool wrote it;
- reading tolerates records that are not MM2 source offsets (other connectors' state).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import structlog
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mm2py.config.model import ClusterConfig
from mm2py.errors import FormatError, KafkaError
from mm2py.formats import SourceOffset
from mm2py.kafka.admin import Admin, translate
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.kafka.retry import retrying

log = structlog.get_logger(__name__)

TP = tuple[str, int]
# Kafka Connect's default for offset.storage.partitions
OFFSETS_TOPIC_PARTITIONS = 25


def offsets_topic(source_alias: str) -> str:
    return f"mm2-offsets.{source_alias}.internal"


class PositionStore:
    """Reads and writes one flow's source positions on its target cluster."""

    def __init__(self, target: ClusterConfig, source_alias: str, *, timeout_ms: int = 60000):
        self.target = target
        self.source_alias = source_alias
        self.topic = offsets_topic(source_alias)
        self.timeout = timeout_ms / 1000
        self._conf = rdkafka_config(target.bootstrap_servers, target.client, target.alias)
        self._producer: Producer | None = None

    def ensure_topic(self, admin: Admin, replication_factor: int = 3) -> None:
        if self.topic in admin.topics():
            return
        rf = min(replication_factor, admin.broker_count())
        admin.create_topic(self.topic, OFFSETS_TOPIC_PARTITIONS, rf, {"cleanup.policy": "compact"})

    def load(self) -> dict[TP, int]:
        """The last mirrored source offset of every partition that has one."""
        return retrying(self._load, self.timeout)

    def _load(self) -> dict[TP, int]:
        conf = dict(self._conf)
        conf.update({"group.id": f"mm2py-positions-{self.source_alias}", "enable.auto.commit": False,
                     "enable.partition.eof": False, "isolation.level": "read_committed"})
        consumer = Consumer(conf)
        positions: dict[TP, int] = {}
        try:
            md = consumer.list_topics(self.topic, timeout=self.timeout).topics.get(self.topic)
            if md is None or md.error is not None:
                return positions
            remaining: dict[int, int] = {}
            for p in md.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=self.timeout)
                if high > low:
                    remaining[p] = high
            consumer.assign([TopicPartition(self.topic, p, 0) for p in remaining])
            deadline = time.monotonic() + self.timeout
            while remaining:
                if time.monotonic() > deadline:
                    raise KafkaError(f"reading {self.topic} did not reach its end within {self.timeout:.0f} s",
                                     cluster=self.target.alias, topic=self.topic, retriable=True)
                msgs = consumer.consume(10000, timeout=0.2)
                for msg in msgs:
                    if msg.error():
                        raise KafkaError(str(msg.error()), cluster=self.target.alias, topic=self.topic)
                    self._apply(positions, msg.key(), msg.value())
                    if msg.offset() + 1 >= remaining.get(msg.partition(), 0):
                        remaining.pop(msg.partition(), None)
        except KafkaException as e:
            raise translate(e, cluster=self.target.alias, action="reading positions", topic=self.topic) from e
        finally:
            consumer.close()
        return positions

    def _apply(self, positions: dict[TP, int], key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            record = SourceOffset.from_record(key, value)
        except FormatError:
            return  # another connector's offsets share this topic in MM2; not ours to read
        if record is None or record.cluster != self.source_alias:
            return
        tp = (record.topic, record.partition)
        if record.offset is None:
            positions.pop(tp, None)
        else:
            positions[tp] = record.offset

    def save(self, positions: Mapping[TP, int]) -> None:
        """Durably record last mirrored offsets (acks=all); raises if any write failed."""
        if not positions:
            return
        if self._producer is None:
            conf = dict(self._conf)
            # murmur2 as the Java producer uses, so keys land where Connect puts them
            conf.update({"partitioner": "murmur2_random", "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
            self._producer = Producer(conf)
        failures: list[str] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(str(err))

        for (topic, partition), offset in positions.items():
            record = SourceOffset(self.source_alias, topic, partition, offset)
            self._producer.produce(self.topic, key=record.key_bytes(), value=record.value_bytes(),
                                   on_delivery=on_delivery)
        left = self._producer.flush(self.timeout)
        if left or failures:
            raise KafkaError(
                f"could not record positions ({left} unsent): {'; '.join(failures[:3])}",
                cluster=self.target.alias, topic=self.topic, retriable=True,
            )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None
