"""MM2's internal topics: single-partition compacted topics written and read whole."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.kafka.admin import Admin, translate
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.kafka.retry import retrying


def ensure_compacted_topic(admin: Admin, topic: str, replication_factor: int) -> None:
    """Create ``topic`` as MM2 does (one partition, cleanup.policy=compact) unless it exists."""
    if topic in admin.topics():
        return
    rf = min(replication_factor, admin.broker_count())
    admin.create_topic(topic, 1, rf, {"cleanup.policy": "compact"})


def read_all(cluster: ClusterConfig, topic: str, timeout: float = 60,
             start: int = 0) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """Every (offset, key, value) of partition 0 from ``start`` to the end seen at call time."""
    return iter(retrying(lambda: list(_read(cluster, topic, timeout, start)), timeout))


Entry = tuple[int, bytes | None, bytes | None]


def _read(cluster: ClusterConfig, topic: str, timeout: float, start: int) -> Iterator[Entry]:
    conf = rdkafka_config(cluster.bootstrap_servers, cluster.consumer, cluster.alias)
    conf.update({"group.id": "mm2py-internal-reader", "enable.auto.commit": False,
                 "isolation.level": "read_committed"})
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if md is None or md.error is not None:
            return
        tp = TopicPartition(topic, 0)
        _low, end = consumer.get_watermark_offsets(tp, timeout=timeout)
        if end <= start:
            return
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise KafkaError(f"reading did not reach offset {end} within {timeout:.0f} s",
                                 cluster=cluster.alias, topic=topic, retriable=True)
            for msg in consumer.consume(10000, timeout=0.2):
                if msg.error():
                    raise KafkaError(str(msg.error()), cluster=cluster.alias, topic=topic)
                yield msg.offset(), msg.key(), msg.value()
                if msg.offset() + 1 >= end:
                    return
            if consumer.position([tp])[0].offset >= end:
                return
    except KafkaException as e:
        raise translate(e, cluster=cluster.alias, action="reading", topic=topic) from e
    finally:
        consumer.close()


class RecordWriter:
    """Writes key/value records durably (acks=all) to one cluster; raises if any failed."""

    def __init__(self, cluster: ClusterConfig, timeout: float = 60):
        conf = rdkafka_config(cluster.bootstrap_servers, cluster.producer, cluster.alias)
        conf.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5})
        self.cluster = cluster
        self.timeout = timeout
        self._producer = Producer(conf)

    def write(self, topic: str, records: Iterable[tuple[bytes, bytes | None]], partition: int | None = 0,
              timestamp: int | None = None) -> int:
        failures: list[str] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(str(err))

        count = 0
        for key, value in records:
            kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": on_delivery}
            if partition is not None:
                kwargs["partition"] = partition
            if timestamp is not None:
                kwargs["timestamp"] = timestamp
            while True:
                try:
                    self._producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    self._producer.poll(0.05)
            count += 1
        left = self._producer.flush(self.timeout)
        if left or failures:
            raise KafkaError(f"{left} records unsent, errors: {'; '.join(failures[:3])}",
                             cluster=self.cluster.alias, topic=topic, retriable=True)
        return count

    def close(self) -> None:
        self._producer.flush(self.timeout)
