"""Where a batch's records were first written, from its producer id: loop prevention by provenance.

Flows with a policy that keeps topic names (Identity) cannot tell a topic's own records from
records mirrored into it, so on a cycle (A->B and B->A on ``orders``) every record would go round
forever. Provenance tells them apart at the batch level, without headers and without decoding
a record: every batch mm2py writes carries a producer id mm2py got for that purpose, and a
cluster never hands out a producer id twice.

- Each cluster a provenance flow writes to holds a registry (``REGISTRY_TOPIC``, compacted, keyed
  by producer id): for each producer id a flow writes with, the origin cluster it stands for.
- A flow ``X->Y`` reads the registry of ``X``. A batch's origin is the one registered for its
  producer id there, or ``X`` itself when none is (the cluster's own producers, -1 included).
- A batch whose origin is ``Y`` is not written (it would go home); any other batch is written
  with a producer id registered on ``Y`` for its origin. Two clusters and longer cycles
  (A->B->C->A) alike: a record reaches every cluster once and stops before its origin.

Invariants:
- a producer id is registered (acks=all, acknowledged) before the first batch stamped with it
  is produced, so it is in the registry before any offset of that batch can be planned;
- a plan's end offsets are fixed before the source's registry is read to its end (the planner
  reads it when Spark asks for the micro-batch's partitions), so every mirrored batch of a
  planned range has its producer id in the task's ``Provenance``;
- a registration never changes: one key per producer id, written once, origin fixed. An id that
  is no longer used stays registered, since its batches may still sit in mirrored logs;
- producer ids live as long as the Python worker process that got them, one per flow and origin
  (``ProducerIds``): each task takes the next epoch of the kept id (an idempotent producer may
  bump its own epoch, KIP-360) and starts its sequences at 0, which also fences what an earlier
  task of the process left in flight. A new id is got (and registered) only when the epoch is
  spent. The registry therefore grows with worker processes, not with tasks or micro-batches;
- exactly-once mode: the task's transactional id gives its producer id (stable across tasks; the
  coordinator bumps the epoch and fences), registered for the flow's source before the
  transaction writes. A transaction has one producer id, so start-up refuses a source that takes
  a third cluster's records; a batch of a third origin that an earlier topology left in the log
  is written as the source's own, with a warning.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.kafka.compacted import RecordWriter, TopicTail

REGISTRY_TOPIC = "mm2py-provenance.internal"
# an idempotent producer's epoch is an int16; at the last one a new producer id is got
MAX_EPOCH = 32767


class ProvenanceError(KafkaError):
    """A batch cannot be written with a producer id that stands for its origin."""


def registration(producer_id: int, origin: str, flow: str) -> tuple[bytes, bytes]:
    """The registry record of ``producer_id``: key the id in decimal, value JSON naming its origin."""
    value = {"origin": origin, "flow": flow, "registered": int(time.time() * 1000)}
    return str(producer_id).encode(), json.dumps(value, separators=(",", ":")).encode()


def parse_registration(key: bytes | None, value: bytes | None) -> tuple[int, str] | None:
    """(producer id, origin) of a registry record; None for a record that is not one (a tombstone)."""
    if key is None or value is None:
        return None
    try:
        return int(key), str(json.loads(value)["origin"])
    except (ValueError, KeyError, TypeError) as e:
        raise ProvenanceError(f"unreadable record in {REGISTRY_TOPIC}: key {key!r}: {e}",
                              topic=REGISTRY_TOPIC) from e


@dataclass(frozen=True)
class Provenance:
    """What a copy task of flow ``source->home`` needs to know of batch origins; picklable.

    ``origins`` maps the source's registered producer ids to their origin clusters.
    """

    source: str
    home: str
    origins: Mapping[int, str] = field(default_factory=dict)

    def origin_of(self, producer_id: int) -> str:
        return self.origins.get(producer_id, self.source)

    def goes_home(self, producer_id: int) -> bool:
        """True when a batch of ``producer_id`` was first written on the flow's target."""
        return self.origin_of(producer_id) == self.home


class RegistryTail:
    """The registry of one cluster, read in steps (driver side). Constructor does no I/O."""

    def __init__(self, cluster: ClusterConfig, timeout: float = 60):
        self.cluster = cluster
        self._tail = TopicTail(cluster, REGISTRY_TOPIC, timeout)
        self.origins: dict[int, str] = {}

    def read(self) -> dict[int, str]:
        """Every registration up to the registry's end as of now."""
        entries, restarted = self._tail.poll()
        if restarted:
            self.origins = {}
        for _offset, key, value in entries:
            found = parse_registration(key, value)
            if found is not None:
                self.origins[found[0]] = found[1]
        return dict(self.origins)

    def provenance(self, source: str, home: str) -> Provenance:
        return Provenance(source, home, self.read())


@dataclass
class KeptProducer:
    """A producer id kept by a worker process for one flow and origin, and its last epoch."""

    producer_id: int = -1
    epoch: int = -1


class ProducerIds:
    """The producer ids a worker process writes with for one flow, one per origin.

    ``init`` gets a fresh idempotent (producer id, epoch) from the target; ``writer`` writes the
    registration durably. Neither is called by the constructor.
    """

    def __init__(self, flow: str, init: Callable[[], tuple[int, int]], writer: RecordWriter):
        self.flow = flow
        self.init = init
        self.writer = writer
        self.kept: dict[str, KeptProducer] = {}
        self.registered: set[int] = set()

    def for_task(self, origin: str) -> tuple[int, int]:
        """The (producer id, epoch) a new task writes ``origin``'s batches with: the kept id's next epoch."""
        kept = self.kept.setdefault(origin, KeptProducer())
        if kept.producer_id < 0 or kept.epoch >= MAX_EPOCH - 1:
            kept.producer_id, kept.epoch = self.init()
        else:
            kept.epoch += 1
        self.register(kept.producer_id, origin)
        return kept.producer_id, kept.epoch

    def register(self, producer_id: int, origin: str) -> None:
        """Write ``producer_id``'s registration unless this process already did (acknowledged on return)."""
        if producer_id in self.registered:
            return
        self.writer.write(REGISTRY_TOPIC, [registration(producer_id, origin, self.flow)])
        self.registered.add(producer_id)
