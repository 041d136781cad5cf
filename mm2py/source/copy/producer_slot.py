"""An idempotent producer id kept across one worker's copy tasks, with each partition's next sequence.

A fresh producer id per task leaves the target's brokers a producer state per partition per
micro-batch, each kept for ``producer.id.expiration.ms`` (a day by default): a tailing flow of
5,000 partitions with a micro-batch every 12.5 s would leave about 35 million a day. A Java
producer (MM2's tasks) keeps one id for its life; a worker's copy tasks share one the same way.

Invariants:
- a task takes the kept id only together with the next sequence of every partition any task
  wrote with it, so the broker's sequence check goes on where the last task stopped (and a
  partition whose state the broker expired takes any sequence from the id, as from a new one);
- ``take`` empties the slot: only a task that ended with every batch acknowledged and no
  partition stalled puts the id back (``put_back``); after any failure the next task asks the
  target for a fresh id, so a sequence the broker may not have seen is never continued;
- the id is given up before any partition's next sequence passes ``ROTATE_AT``: sequences are
  int32 and never wrap here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mm2py.types import TP

# well below 2**31 - 1: a task writes far fewer records to a partition than the room left
ROTATE_AT = 1 << 30


@dataclass
class KeptProducer:
    producer_id: int
    epoch: int
    next_sequence: dict[TP, int] = field(default_factory=dict)  # per target partition written with the id


class ProducerSlot:
    """The producer id this worker keeps for one target cluster (``mm2py.worker.kept_state``)."""

    def __init__(self) -> None:
        self._kept: KeptProducer | None = None

    def take(self) -> KeptProducer | None:
        """The kept producer, if any; the slot is empty until it is put back."""
        kept, self._kept = self._kept, None
        return kept

    def put_back(self, producer: KeptProducer) -> None:
        """Keep ``producer`` for the next task, unless a partition's sequence is near the int32 limit."""
        if max(producer.next_sequence.values(), default=0) < ROTATE_AT:
            self._kept = producer
