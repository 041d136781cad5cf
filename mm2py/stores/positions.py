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
from confluent_kafka import Producer

from mm2py.config.model import ClusterConfig
from mm2py.errors import FormatError, KafkaError
from mm2py.formats import SourceOffset
from mm2py.kafka import rdclients
from mm2py.kafka.admin import Admin
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.kafka.compacted import TopicReader, read_to_end
from mm2py.kafka.retry import retrying
from mm2py.types import TP

log = structlog.get_logger(__name__)

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

    def load_with_epochs(self) -> tuple[dict[TP, int], dict[TP, int]]:
        """The positions, and the leader epoch of the source batch holding each where its record names one."""
        def load() -> tuple[dict[TP, int], dict[TP, int]]:
            epochs: dict[TP, int] = {}
            return self._load(epochs), epochs
        return retrying(load, self.timeout)

    def reader(self, group: str, **extra: object) -> TopicReader:
        """A reader of the positions topic (the target's client settings)."""
        return TopicReader(self.target, group, self.target.client, None,
                           **{"enable.partition.eof": False, "auto.offset.reset": "earliest", **extra})

    def _load(self, epochs: dict[TP, int] | None = None) -> dict[TP, int]:
        reader = self.reader(f"mm2py-positions-{self.source_alias}")
        positions: dict[TP, int] = {}
        try:
            bounds = reader.bounds(self.topic, self.timeout)
            if bounds is None:
                return positions
            read_to_end(reader.consumer, self.topic, {}, {p: end for p, (_low, end) in bounds.items()},
                        cluster=self.target.alias, deadline=time.monotonic() + self.timeout,
                        on_record=lambda m: self._apply(positions, m.key(), m.value(), epochs))
        finally:
            reader.close()
        return positions

    def _apply(self, positions: dict[TP, int], key: bytes | None, value: bytes | None,
               epochs: dict[TP, int] | None = None) -> None:
        """Apply one record to ``positions`` (and ``epochs``: the leader epoch of each, where recorded)."""
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
        if epochs is not None:  # a record without one (MM2's, a reset's) leaves the epoch unknown
            if record.offset is not None and record.leader_epoch is not None:
                epochs[tp] = record.leader_epoch
            else:
                epochs.pop(tp, None)

    def open(self) -> Producer:
        """The store's producer, started on first call (no request waits on it).

        librdkafka's idempotent producer holds what it is given before its producer id arrives
        until a 500 ms retry tick: a producer opened ahead of its first write spares that write
        the wait.
        """
        if self._producer is None:
            conf = dict(self._conf)
            # murmur2 as the Java producer uses, so keys land where Connect puts them
            conf.update({"partitioner": "murmur2_random", "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
            self._producer = rdclients.producer(conf)
        return self._producer

    def save(self, positions: Mapping[TP, int], epochs: Mapping[TP, int] | None = None) -> None:
        """Durably record last mirrored offsets (acks=all); raises if any write failed.

        ``epochs``: the leader epoch of the source batch holding each position, where known.
        """
        if not positions:
            return
        producer = self.open()
        failures: list[str] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(str(err))

        for (topic, partition), offset in positions.items():
            record = SourceOffset(self.source_alias, topic, partition, offset,
                                  leader_epoch=(epochs or {}).get((topic, partition)))
            producer.produce(self.topic, key=record.key_bytes(), value=record.value_bytes(),
                             on_delivery=on_delivery)
        left = producer.flush(self.timeout)
        if left or failures:
            raise KafkaError(
                f"could not record positions ({left} unsent): {'; '.join(failures[:3])}",
                cluster=self.target.alias, topic=self.topic, retriable=True,
            )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None


class PositionTail:
    """The recorded positions of one flow, read incrementally from the target.

    The sink records where each partition really got to, and the planner runs in another
    process (Spark's Python source runner), so the positions topic is the one channel both
    see. Each ``refresh`` costs one ListOffsets request and the records written since the
    last one. Reads go to the topic's end as it is when asked; the sink's writes for a
    micro-batch are acknowledged (acks=all) before that micro-batch ends, hence before the
    next one is planned.
    """

    def __init__(self, store: PositionStore, admin: Admin):
        self.store = store
        self.admin = admin
        self.positions: dict[TP, int] = {}
        self._reader: TopicReader | None = None
        # the leader epoch of the source batch holding each position, where its record names one
        self.epochs: dict[TP, int] = {}
        self._next: dict[int, int] = {}  # positions-topic partition -> next offset to read
        self._partitions = 0

    def refresh(self) -> dict[TP, int]:
        """Read what was written since the last call; return every recorded position."""
        topic = self.store.topic
        if not self._partitions:
            self._partitions = self.admin.topics().get(topic, 0)
        ends = {p: end for (_, p), end in
                self.admin.list_offsets([(topic, p) for p in range(self._partitions)], "latest").items()}
        if not any(end > self._next.get(p, 0) for p, end in ends.items()):
            return self.positions
        if self._reader is None:
            # the records asked for are already there: do not let the broker wait
            self._reader = self.store.reader(f"mm2py-stalls-{self.store.source_alias}",
                                             **{"fetch.wait.max.ms": 5, "fetch.error.backoff.ms": 5})
        self._next = read_to_end(self._reader.consumer, topic, self._next, ends, cluster=self.store.target.alias,
                                 deadline=time.monotonic() + self.store.timeout,
                                 on_record=lambda m: self.store._apply(self.positions, m.key(), m.value(), self.epochs))
        # unassigned between refreshes: an assigned consumer keeps fetching in the background
        # every fetch.wait.max.ms, a load on the target broker for nothing
        self._reader.consumer.unassign()
        return self.positions

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
