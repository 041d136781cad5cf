"""Small helpers over real brokers for tests: create, produce, consume everything, offsets."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

RecordTuple = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int | None]


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = _admin(bootstrap)  # must outlive the future: a collected client cancels its requests
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    wait_until(lambda: name in list_topics(bootstrap), 30, f"topic {name} visible")


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = _admin(bootstrap)
    admin.create_partitions([NewPartitions(name, total)])[name].result(30)


def delete_topic(bootstrap: str, name: str) -> None:
    admin = _admin(bootstrap)
    admin.delete_topics([name])[name].result(30)


def list_topics(bootstrap: str) -> set[str]:
    return set(_admin(bootstrap).list_topics(timeout=30).topics)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordTuple],
    partition: int | None = None,
    compression: str | None = None,
    extra: dict[str, object] | None = None,
) -> int:
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10,
                               "compression.type": compression or "none", "log_level": 0}
    conf.update(extra or {})
    producer = Producer(conf)
    errors: list[str] = []
    count = 0

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value, headers, ts in records:
        kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": on_delivery}
        if headers:
            kwargs["headers"] = headers
        if ts is not None:
            kwargs["timestamp"] = ts
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
        if count % 10000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    assert not left and not errors, f"producing to {topic} failed: {left} unsent, {errors[:3]}"
    return count


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark per partition ({} when the topic does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2py-tests-offsets", "log_level": 0})
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions}
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str, timeout: float = 60,
                isolation: str = "read_uncommitted") -> dict[int, list[Record]]:
    """Every record of every partition, from the start to the high watermark seen at call time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2py-tests-consume",
                         "enable.auto.commit": False, "isolation.level": isolation, "log_level": 0})
    try:
        md = consumer.list_topics(topic, timeout=10).topics[topic]
        out: dict[int, list[Record]] = {p: [] for p in md.partitions}
        remaining = {}
        for p in md.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > 0:
                remaining[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in remaining])
        deadline = time.monotonic() + timeout
        while remaining:
            assert time.monotonic() < deadline, f"consuming {topic} timed out; left {remaining}"
            for msg in consumer.consume(10000, timeout=0.5):
                assert not msg.error(), msg.error()
                p = msg.partition()
                out[p].append(Record(p, msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                                     msg.timestamp()[1]))
                if msg.offset() + 1 >= remaining.get(p, 0):
                    remaining.pop(p, None)
            # read_committed stops at the last stable offset; control records are never delivered
            for p in list(remaining):
                pos = consumer.position([TopicPartition(topic, p)])[0].offset
                if pos >= remaining[p]:
                    remaining.pop(p)
        return out
    finally:
        consumer.close()


def wait_until(predicate: Callable[[], bool], timeout: float, message: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for: {message}")
