"""Finding partitions whose last micro-batch stopped short, from the positions on the target.

Spark moves a source's offsets to the ends the planner chose, whatever the tasks copied. A
copy task may stop a partition early on purpose (mm2py.source.copier: a batch the target
refuses as too large, a remote topic deleted meanwhile); the next micro-batch must then
start where the copy stopped, not at Spark's offset, or the records in between are lost.

The sink records where each partition really got to (``mm2-offsets.{source}.internal`` on the
target), and the planner runs in another process (Spark's Python source runner), so the
positions topic is the one channel both see. ``PositionTail`` follows it incrementally: one
ListOffsets request and the few records the last micro-batch wrote, per micro-batch.

Invariants:
- reads go to the topic's end as it is when asked; the sink's writes for a micro-batch are
  acknowledged (acks=all) before that micro-batch ends, hence before the next is planned;
- a partition is re-planned only from a position the sink recorded, or from the start of the
  range that stopped short: never past what was copied.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.kafka.admin import Admin, translate
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.positions import PositionStore

TP = tuple[str, int]


@dataclass(frozen=True)
class PlannedRange:
    """A range the planner handed to Spark: where it began, where it should end."""

    begin: int
    end: int
    exact: bool


class PositionTail:
    """The recorded positions of one flow, read incrementally from the target."""

    def __init__(self, target: ClusterConfig, source_alias: str, admin: Admin, *, timeout_ms: int):
        self.store = PositionStore(target, source_alias, timeout_ms=timeout_ms)
        self.admin = admin
        self.alias = target.alias
        self.timeout = timeout_ms / 1000
        self.positions: dict[TP, int] = {}
        self._consumer: Consumer | None = None
        self._next: dict[int, int] = {}  # positions-topic partition -> next offset to read
        self._partitions = 0

    def _open(self) -> Consumer:
        if self._consumer is None:
            conf = rdkafka_config(self.store.target.bootstrap_servers, self.store.target.client, self.alias)
            conf.update({"group.id": f"mm2py-stalls-{self.store.source_alias}", "enable.auto.commit": False,
                         "enable.partition.eof": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest",
                         # the records asked for are already there: do not let the broker wait
                         "fetch.wait.max.ms": 5, "fetch.error.backoff.ms": 5})
            self._consumer = Consumer(conf)
        return self._consumer

    def refresh(self) -> dict[TP, int]:
        """Read what was written since the last call; return every recorded position."""
        topic = self.store.topic
        if not self._partitions:
            self._partitions = self.admin.topics().get(topic, 0)
        partitions = self._partitions
        ends = self.admin.list_offsets([(topic, p) for p in range(partitions)], "latest")
        wanted = {p: end for (_, p), end in ends.items() if end > self._next.get(p, 0)}
        if not wanted:
            return self.positions
        consumer = self._open()
        try:
            # from where the last read stopped, so only what is new is fetched
            consumer.assign([TopicPartition(topic, p, self._next.get(p, 0)) for p in range(partitions)])
            deadline = time.monotonic() + self.timeout
            while wanted:
                if time.monotonic() > deadline:
                    raise KafkaError(f"reading {topic} did not reach its end within {self.timeout:.0f} s",
                                     cluster=self.alias, topic=topic, retriable=True)
                for msg in consumer.consume(10000, timeout=0.002):
                    if msg.error():
                        raise KafkaError(str(msg.error()), cluster=self.alias, topic=topic)
                    self.store._apply(self.positions, msg.key(), msg.value())
                    self._next[msg.partition()] = msg.offset() + 1
                    if msg.offset() + 1 >= wanted.get(msg.partition(), 0):
                        wanted.pop(msg.partition(), None)
            # unassigned between refreshes: an assigned consumer fetches in the background without
            # end, every fetch.wait.max.ms (5 ms here), a load on the target broker for nothing
            consumer.unassign()
        except KafkaException as e:
            raise translate(e, cluster=self.alias, action="reading positions", topic=topic) from e
        return self.positions

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def short_ranges(planned: dict[str, PlannedRange], recorded: dict[str, int | None]) -> dict[str, PlannedRange]:
    """Ranges whose copy stopped before their end, and where to start them again.

    ``recorded`` is the last mirrored offset of each planned partition (None when none is
    recorded). The restart is the recorded position + 1 (an exact record position) when it
    lies inside the range, else the range's own start.
    """
    out = {}
    for key, r in planned.items():
        last = recorded.get(key)
        copied_to = last + 1 if last is not None else None
        if copied_to is not None and copied_to >= r.end:
            continue
        if copied_to is not None and copied_to > r.begin:
            out[key] = PlannedRange(copied_to, r.end, True)
        else:
            out[key] = r
    return out
