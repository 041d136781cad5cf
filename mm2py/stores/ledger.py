"""The ledger: every source partition a flow found gone back or with a gap, kept on the target.

``mm2py-ledger.{source}.internal`` (one partition, compacted) holds two kinds of JSON records:

- an event per detected case (``LedgerEntry``): a source topic re-created, a log truncated below
  the flow's position, records deleted before they were mirrored, a remote topic deleted on the
  target; its key is unique (flow,
  topic, partition, time, kind), so compaction never drops one: the ledger keeps them all;
- the topic id each mirrored source topic was last copied under, keyed by (flow, topic): a
  restarted flow compares it with the source's topic id, so a topic re-created while mm2py was
  down is found too.

Invariants: an event is written (acks=all) before the flow acts on it, and a topic id is
recorded before anything of that topic generation is planned; the default topic filter never
mirrors this topic (``.*[-.]internal``). Constructors do no I/O.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from mm2py.config.model import ClusterConfig, FlowConfig
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import RecordWriter, ensure_compacted_topic, read_all

RECREATED = "recreated"  # the source topic's id changed: deleted and created again
TRUNCATED = "truncated"  # the source log ends below the flow's position (same topic id)
GAP = "gap"  # records deleted (retention, DeleteRecords) before they were mirrored: skipped
REMOTE_DELETED = "remote-deleted"  # the remote topic was deleted on the target: refilled from the log start
KINDS = (RECREATED, TRUNCATED, GAP, REMOTE_DELETED)


def ledger_topic(source_alias: str) -> str:
    return f"mm2py-ledger.{source_alias}.internal"


@dataclass(frozen=True)
class LedgerEntry:
    """One detected case and what the flow did about it.

    ``source_old``/``source_new`` and ``target_old``/``target_new`` are ranges as dicts
    (``start``/``end`` offsets, ``topic_id`` where known): on the source, what the flow had
    reached and what the log holds now; on the target, the remote partition's end when found and
    where the partition's next records land (absent when the flow stops the partition).
    """

    kind: str
    flow: str
    topic: str
    partition: int
    action: str  # "continue" | "stop" | "recreate" | "skipped" | "refill"
    source_old: dict = field(default_factory=dict)
    source_new: dict = field(default_factory=dict)
    target_old: dict = field(default_factory=dict)
    target_new: dict = field(default_factory=dict)
    at_ms: int = 0

    def key_bytes(self) -> bytes:
        return json.dumps(["event", self.flow, self.topic, self.partition, self.at_ms, self.kind],
                          separators=(",", ":")).encode()

    def value_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_value(cls, value: bytes) -> LedgerEntry:
        data = json.loads(value)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class LedgerState:
    """What a ledger holds for one flow: its events in order, and its topics' last copied ids."""

    entries: list[LedgerEntry] = field(default_factory=list)
    topic_ids: dict[str, str] = field(default_factory=dict)

    def last_of(self, topic: str, partition: int) -> LedgerEntry | None:
        """The newest event of a partition (a stop stays in force until a later event resolves it)."""
        for entry in reversed(self.entries):
            if entry.topic == topic and entry.partition == partition and entry.kind not in (GAP, REMOTE_DELETED):
                return entry
        return None


def _topic_id_key(flow: str, topic: str) -> bytes:
    return json.dumps(["topic-id", flow, topic], separators=(",", ":")).encode()


def parse(records: Iterable[tuple[int, bytes | None, bytes | None]], flow: str | None = None) -> LedgerState:
    """The state of ``flow`` (every flow when None) from the ledger's records, in log order."""
    state = LedgerState()
    for _, key, value in records:
        if key is None or value is None:
            continue
        try:
            head = json.loads(key)
            if head[0] == "event" and (flow is None or head[1] == flow):
                state.entries.append(LedgerEntry.from_value(value))
            elif head[0] == "topic-id" and (flow is None or head[1] == flow):
                state.topic_ids[head[2]] = json.loads(value)["topic_id"]
        except (ValueError, KeyError, IndexError, TypeError):
            continue  # not a record of ours: left alone
    return state


class Ledger:
    """Reads and appends one flow's ledger records on its target cluster."""

    def __init__(self, target: ClusterConfig, source_alias: str, flow: str, *, timeout_s: float = 60,
                 replication_factor: int = 3):
        self.target = target
        self.topic = ledger_topic(source_alias)
        self.flow = flow
        self.timeout = timeout_s
        self.replication_factor = replication_factor
        self._writer: RecordWriter | None = None
        self._ready = False  # the topic is known to exist

    def ensure_topic(self, admin: Admin) -> None:
        ensure_compacted_topic(admin, self.topic, self.replication_factor)
        self._ready = True

    def load(self) -> LedgerState:
        return parse(read_all(self.target, self.topic, self.timeout), self.flow)

    def append(self, entries: Iterable[LedgerEntry] = (), topic_ids: Mapping[str, str] | None = None) -> None:
        """Write events and topic ids durably (acks=all), in one wait; raises ``KafkaError`` if any failed."""
        records = [(e.key_bytes(), e.value_bytes()) for e in entries]
        records += [(_topic_id_key(self.flow, t), json.dumps({"topic_id": i}).encode())
                    for t, i in sorted((topic_ids or {}).items())]
        if not records:
            return
        if not self._ready:  # a writer that did not make the topic (the committer) makes sure of it once
            self.ensure_topic(Admin(self.target, timeout_ms=int(self.timeout * 1000)))
        if self._writer is None:
            self._writer = RecordWriter(self.target, self.timeout)
        self._writer.write(self.topic, records)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def ledger_entries(flow: FlowConfig, target: Admin) -> list[LedgerEntry]:
    """Every ledger event of ``flow``, read now from its target; none when the topic does not exist."""
    topic = ledger_topic(flow.source.alias)
    if topic not in target.topics():
        return []
    return Ledger(flow.target, flow.source.alias, flow.name, timeout_s=flow.admin_timeout_ms / 1000).load().entries


def now_ms() -> int:
    return int(time.time() * 1000)
