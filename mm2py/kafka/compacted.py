"""Compacted internal topics: created as MM2 creates them, read to their end, written durably.

``read_to_end`` is the one loop that reads a topic's partitions up to the ends seen when the
read began (positions, offset syncs, checkpoints, heartbeats). It stops at each end even when
the last offsets hold no record a consumer sees (transaction markers, compacted away), and
raises a retriable error naming the topic when the deadline passes first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import cast

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka import KafkaError as KafkaErrorCode

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.kafka import rdclients
from mm2py.kafka.admin import Admin
from mm2py.kafka.admin_errors import translate
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.kafka.login_watch import LoginWatch
from mm2py.kafka.retry import retrying


def ensure_compacted_topic(admin: Admin, topic: str, replication_factor: int) -> None:
    """Create ``topic`` as MM2 does (one partition, cleanup.policy=compact) unless it exists."""
    if topic in admin.topics():
        return
    rf = min(replication_factor, admin.broker_count())
    admin.create_topic(topic, 1, rf, {"cleanup.policy": "compact"})


Entry = tuple[int, bytes | None, bytes | None]


def read_all(cluster: ClusterConfig, topic: str, timeout: float = 60,
             start: int = 0) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """Every (offset, key, value) of partition 0 from ``start`` to the end seen at call time."""
    return iter(retrying(lambda: _read(cluster, topic, timeout, start)[0], timeout))


class TopicTail:
    """Partition 0 of one topic, read in steps: each ``poll`` returns what was appended since.

    ``poll`` returns ``(entries, restarted)``; ``restarted`` is True when the topic's end went
    below where the tail stood (the topic was deleted and created again, or is gone): the
    entries are then the whole topic again and whatever the caller built from earlier polls is
    stale. A log start past the tail (retention) moves the tail to it. Constructor does no I/O.
    """

    def __init__(self, cluster: ClusterConfig, topic: str, timeout: float = 60):
        self.cluster, self.topic, self.timeout = cluster, topic, timeout
        self.next_offset = 0
        self.records_read = 0  # since the tail was made

    def poll(self) -> tuple[list[Entry], bool]:
        entries, end = retrying(lambda: _read(self.cluster, self.topic, self.timeout, self.next_offset), self.timeout)
        restarted = end < self.next_offset
        if restarted:
            entries, end = retrying(lambda: _read(self.cluster, self.topic, self.timeout, 0), self.timeout)
        self.next_offset = end
        self.records_read += len(entries)
        return entries, restarted


class TopicReader:
    """A read_committed consumer of one cluster for reading topics by assignment, whose refused
    login is named as such within seconds (``LoginWatch``). Constructor does no I/O; ``bounds``
    runs before any assignment (the watch's ``poll(0)`` then takes no record)."""

    def __init__(self, cluster: ClusterConfig, group: str, settings: Mapping[str, str] | None = None,
                 kind: str | None = "consumer", **extra: object):
        """``settings``: the cluster's consumer settings unless given, translated for ``kind``."""
        conf = rdkafka_config(cluster.bootstrap_servers, cluster.consumer if settings is None else settings,
                              cluster.alias, kind)
        conf.update({"group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed", **extra})
        self.alias = cluster.alias
        self.login = LoginWatch(cluster.alias)
        self._conf = self.login.watching(conf)
        self._consumer: Consumer | None = None

    @property
    def consumer(self) -> Consumer:
        """The consumer, made on first use (``rdclients.consumer``)."""
        if self._consumer is None:
            self._consumer = rdclients.consumer(self._conf)
        return self._consumer

    def bounds(self, topic: str, timeout: float, partitions: Iterable[int] | None = None
               ) -> dict[int, tuple[int, int]] | None:
        """(log start, end) of each partition of ``topic`` (or of ``partitions``); None: no such topic."""
        try:
            md = self.login.metadata(self.consumer, topic, timeout).topics.get(topic)
            if md is None or md.error is not None:
                return None
            return {p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
                    for p in (md.partitions if partitions is None else partitions)}
        except KafkaException as e:
            raise self.translate(e, "reading", topic) from e

    def translate(self, exc: KafkaException, action: str, topic: str | None = None) -> KafkaError:
        """``exc`` as mm2py's error: a refused login named, else as ``translate`` says."""
        return (self.login.refused(self.consumer, action, exc, topic)
                or translate(exc, cluster=self.alias, action=action, topic=topic))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()


# errors about the reader's group, which a read by assignment never uses
_UNUSED_GROUP_ERRORS = frozenset({KafkaErrorCode.GROUP_AUTHORIZATION_FAILED})


def read_to_end(consumer: Consumer, topic: str, starts: Mapping[int, int], ends: Mapping[int, int], *,
                cluster: str, deadline: float, on_record: Callable[[Message], None]) -> dict[int, int]:
    """Read each partition of ``topic`` from ``starts[p]`` up to ``ends[p]``; return the next offsets.

    ``deadline`` is a ``time.monotonic()`` value. The consumer is left assigned; confluent-kafka
    errors become ``KafkaError`` naming the cluster and topic. The consumer's ``group.id`` is only
    there because the client demands one: it is never joined or committed, so the coordinator
    lookup librdkafka makes for it in the background (refused where no GROUP ACL is granted) is
    not an error of the read.
    """
    wanted = {p: end for p, end in ends.items() if end > starts.get(p, 0)}
    reached = dict(starts)
    if not wanted:
        return reached
    try:
        consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in sorted(wanted)])
        while wanted:
            if time.monotonic() > deadline:
                raise KafkaError(f"reading {topic} did not reach its end {dict(sorted(wanted.items()))} in time",
                                 cluster=cluster, topic=topic, retriable=True)
            # consume() waits out its timeout unless it gets its count: ask for what is left to read
            left = min(sum(end - reached.get(p, 0) for p, end in wanted.items()), 10000)
            for msg in consumer.consume(max(left, 1), timeout=0.05):
                if error := msg.error():
                    if error.code() in _UNUSED_GROUP_ERRORS:
                        continue
                    raise KafkaError(str(error), cluster=cluster, topic=topic)
                on_record(msg)
                reached[cast(int, msg.partition())] = cast(int, msg.offset()) + 1
            # the position passes markers and compacted gaps that yield no message
            for tp in consumer.position([TopicPartition(topic, p) for p in wanted]):
                if tp.offset >= 0:
                    reached[tp.partition] = max(reached.get(tp.partition, 0), tp.offset)
            wanted = {p: end for p, end in wanted.items() if reached.get(p, 0) < end}
    except KafkaException as e:
        raise translate(e, cluster=cluster, action="reading", topic=topic) from e
    return reached


def _read(cluster: ClusterConfig, topic: str, timeout: float, start: int) -> tuple[list[Entry], int]:
    """The entries from ``start`` (or the log start, if later) to the end, and that end (0: no topic)."""
    reader = TopicReader(cluster, "mm2py-internal-reader")
    entries: list[Entry] = []
    try:
        bounds = reader.bounds(topic, timeout, [0])
        if bounds is None:
            return [], 0
        low, end = bounds[0]
        if start <= end:
            read_to_end(reader.consumer, topic, {0: max(start, low)}, {0: end}, cluster=cluster.alias,
                        deadline=time.monotonic() + timeout,
                        on_record=lambda m: entries.append((cast(int, m.offset()), m.key(), m.value())))
    finally:
        reader.close()
    return entries, end


class RecordWriter:
    """Writes key/value records durably (acks=all) to one cluster; raises if any failed."""

    def __init__(self, cluster: ClusterConfig, timeout: float = 60):
        conf = rdkafka_config(cluster.bootstrap_servers, cluster.producer, cluster.alias, "producer")
        conf.setdefault("linger.ms", 5)
        # only failures call back: a write of thousands of records waits on no Python call per record
        conf.update({"acks": "all", "enable.idempotence": True, "delivery.report.only.error": True})
        self.cluster = cluster
        self.timeout = timeout
        self._conf = conf
        self._made: Producer | None = None

    @property
    def _producer(self) -> Producer:
        """The producer, made on first use (``rdclients.producer``)."""
        if self._made is None:
            self._made = rdclients.producer(self._conf)
        return self._made

    def write(self, topic: str, records: Iterable[tuple[bytes, bytes | None]], partition: int | None = 0,
              timestamp: int | None = None) -> int:
        return self.write_topics([(topic, records)], partition, timestamp)

    def write_topics(self, writes: Iterable[tuple[str, Iterable[tuple[bytes, bytes | None]]]],
                     partition: int | None = 0, timestamp: int | None = None) -> int:
        """Write each topic's records, in order, and wait once for every acknowledgement; the count written."""
        failures: list[str] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(str(err))

        count = 0
        topics = []
        for topic, records in writes:
            topics.append(topic)
            count += self._produce(topic, records, partition, timestamp, on_delivery)
        left = self._producer.flush(self.timeout)
        if left or failures:
            raise KafkaError(f"{left} records unsent, errors: {'; '.join(failures[:3])}",
                             cluster=self.cluster.alias, topic=", ".join(topics), retriable=True)
        return count

    def _produce(self, topic: str, records: Iterable[tuple[bytes, bytes | None]], partition: int | None,
                 timestamp: int | None, on_delivery: Callable[[object, object], None]) -> int:
        count = 0
        produce = self._producer.produce
        to = -1 if partition is None else partition  # -1: the producer's partitioner
        at = timestamp or 0  # 0: now
        for key, value in records:
            while True:
                try:
                    produce(topic, value, key, to, on_delivery=on_delivery, timestamp=at)
                    break
                except BufferError:
                    self._producer.poll(0.05)
            count += 1
        return count

    def close(self) -> None:
        if self._made is None:
            return
        self._producer.flush(self.timeout)
