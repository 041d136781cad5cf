"""What ``mm2py status`` shows: per flow and topic, how far the mirror is behind its source.

Everything is read from the clusters, so it works from any machine, with the replicator
running or not: source end offsets (read_committed), the positions the flow recorded on
the target (MM2's source-offset format), advanced to where the copy is now by the target's
ends and the offset syncs (mm2py.ops.live_positions), the first unmirrored record's timestamp
for the lag in seconds, and the newest checkpoint and heartbeat records of the flow.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

from confluent_kafka import KafkaException, Message, TopicPartition

from mm2py.config.filters import topic_filter_for
from mm2py.config.model import ClusterConfig, FlowConfig
from mm2py.flow_policy import policy_for
from mm2py.formats import FormatError, Heartbeat
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import TopicReader
from mm2py.ops.live_positions import live_nexts
from mm2py.ops.replicator import replicator_health
from mm2py.stores.ledger import ledger_entries
from mm2py.stores.positions import PositionStore
from mm2py.transforms.timestamp_router import timestamp_router_of
from mm2py.types import TP


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    remote_topic: str
    partitions: int
    source_end: int  # sum over partitions of the last stable offset
    mirrored: int  # sum over partitions of the next offset to mirror
    lag_records: int
    lag_seconds: float  # age of the oldest unmirrored record (0 when caught up)
    # per partition: (partition, lag in records, lag in seconds)
    partition_lags: tuple[tuple[int, int, float], ...] = ()


@dataclass(frozen=True)
class FlowStatus:
    flow: str
    topics: list[TopicStatus] = field(default_factory=list)
    last_checkpoint_age_s: float | None = None
    last_heartbeat_age_s: float | None = None
    error: str | None = None
    # what the running replicator says of the flow (metrics.port), when one answers
    replicator_state: str | None = None
    replicator_since: float | None = None
    replicator_reason: str | None = None
    # the replicator's completeness audit: (remote topic, partition, missing, duplicates)
    replicator_audit: tuple[tuple[str, int, int, int], ...] = ()
    # records whose schema ids could not be translated, per schemas.on.error action (mm2py.schemas)
    replicator_schema_errors: tuple[tuple[str, int], ...] = ()
    # source partitions found gone back (re-created, truncated) or with a gap, and what the flow did:
    # mm2py-ledger.{source}.internal's events of this flow, oldest first (mm2py.stores.ledger)
    ledger: tuple[dict, ...] = ()

    @property
    def lag_records(self) -> int:
        return sum(t.lag_records for t in self.topics)

    @property
    def lag_seconds(self) -> float:
        return max((t.lag_seconds for t in self.topics), default=0.0)

    def to_json(self) -> dict:
        out = asdict(self)
        out.update(lag_records=self.lag_records, lag_seconds=self.lag_seconds)
        return out


def _consumed_at(msg: Message) -> tuple[str, int, int]:
    """The topic, partition and offset of a consumed record (a record, not an error event, has all three)."""
    topic, p, offset = msg.topic(), msg.partition(), msg.offset()
    assert topic is not None and p is not None and offset is not None, "a consumed record without its place"
    return topic, p, offset


def _reader(cluster: ClusterConfig) -> TopicReader:
    # "earliest": records that retention removed are not waiting; the oldest one left is the lag
    extra: dict[str, object] = {"enable.partition.eof": False, "auto.offset.reset": "earliest"}
    return TopicReader(cluster, "mm2py-status", None, None, **extra)


def first_timestamps(cluster: ClusterConfig, starts: dict[TP, int], timeout: float = 10) -> dict:
    """Timestamp (ms) of the record at each ``(topic, partition) -> offset`` (or the first after it)."""
    if not starts:
        return {}
    reader = _reader(cluster)
    consumer = reader.consumer
    found: dict[TP, int] = {}
    try:
        consumer.assign([TopicPartition(t, p, off) for (t, p), off in starts.items()])
        deadline = time.monotonic() + timeout
        while len(found) < len(starts) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    tp = _consumed_at(msg)[:2]
                    found.setdefault(tp, msg.timestamp()[1])
                    consumer.pause([TopicPartition(*tp)])
    except KafkaException as e:
        raise reader.translate(e, "reading first unmirrored records") from e
    finally:
        reader.close()
    return found


def newest_timestamp(cluster: ClusterConfig, topic: str, *, match: object = None, tail: int = 200,
                     timeout: float = 10) -> int | None:
    """Newest record timestamp (ms) among the last ``tail`` records of each partition of ``topic``.

    ``match(key, value)`` picks which records count (None: all).
    """
    reader = _reader(cluster)
    consumer = reader.consumer
    newest = None
    try:
        bounds = reader.bounds(topic, timeout)
        if bounds is None:
            return None
        remaining = {p: (max(low, high - tail), high) for p, (low, high) in bounds.items() if high > low}
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in remaining.items()])
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    continue
                if match is None or match(msg.key(), msg.value()):  # type: ignore[operator]
                    ts = msg.timestamp()[1]
                    newest = ts if newest is None else max(newest, ts)
                _, p, offset = _consumed_at(msg)
                if offset + 1 >= remaining.get(p, (0, 0))[1]:
                    remaining.pop(p, None)
            for p in list(remaining):  # transaction markers leave the position past the last record
                if consumer.position([TopicPartition(topic, p)])[0].offset >= remaining[p][1]:
                    remaining.pop(p)
    except KafkaException as e:
        raise reader.translate(e, f"reading {topic}", topic) from e
    finally:
        reader.close()
    return newest


def _heartbeat_of(flow: FlowConfig) -> object:
    def match(key: bytes | None, value: bytes | None) -> bool:
        try:
            beat = Heartbeat.from_record(key, value)  # type: ignore[arg-type]
        except FormatError:
            return False
        return (beat.source_cluster_alias, beat.target_cluster_alias) == (flow.source.alias, flow.target.alias)
    return match


def flow_status(flow: FlowConfig, now_ms: int | None = None) -> FlowStatus:
    """The status of one flow, read from its two clusters.

    A topic a TimestampRouter routes shows its window topics as ``topic.format`` with
    ``${timestamp}`` left in; its lag is the source's end past the flow's recorded position (it has
    no offset syncs to map the target's ends with, ``mm2py.ops.live_positions``), as for every topic
    whose copy position is not mapped live.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    policy = policy_for(flow)
    router = timestamp_router_of(flow.raw)
    filt = topic_filter_for(flow)
    src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
    topics = {t: n for t, n in src.topics().items()
              if policy.should_replicate_topic(t, flow.target.alias, filt,
                                               flow.selection.heartbeats_replication_enabled)}
    tps = [(t, p) for t, n in topics.items() for p in range(n)]
    ends = src.list_offsets(tps, "latest")
    positions = PositionStore(flow.target, flow.source.alias, timeout_ms=flow.admin_timeout_ms).load()
    nexts = live_nexts(flow, topics, positions, ends)  # where the copy is now, not at its last record
    lagging = {tp: nexts[tp] for tp in tps if ends.get(tp, 0) > nexts[tp]}
    stamps = first_timestamps(flow.source, lagging)
    rows = []
    for topic, count in sorted(topics.items()):
        parts = [(topic, p) for p in range(count)]
        lag = sum(max(ends.get(tp, 0) - nexts[tp], 0) for tp in parts)
        ages = [max(now_ms - stamps[tp], 0) / 1000 for tp in parts if tp in stamps]
        per = tuple((p, max(ends.get((topic, p), 0) - nexts[(topic, p)], 0),
                     round(max(now_ms - stamps[(topic, p)], 0) / 1000, 1) if (topic, p) in stamps else 0.0)
                    for p in range(count))
        remote = policy.format_remote_topic(flow.source.alias, topic)
        if router is not None and router.routes(remote):
            remote = router.pattern(remote)
        rows.append(TopicStatus(topic, remote, count,
                                sum(ends.get(tp, 0) for tp in parts), sum(nexts[tp] for tp in parts), lag,
                                round(max(ages, default=0.0), 1), per))
    checkpoint = newest_timestamp(flow.target, policy.checkpoints_topic(flow.source.alias))
    heartbeat = newest_timestamp(flow.target, policy.heartbeats_topic(), match=_heartbeat_of(flow))
    ledger = tuple(e.to_json() for e in ledger_entries(flow, Admin(flow.target, timeout_ms=flow.admin_timeout_ms)))
    return FlowStatus(flow.name, rows, _age(checkpoint, now_ms), _age(heartbeat, now_ms), ledger=ledger)


def _age(ts: int | None, now_ms: int) -> float | None:
    return None if ts is None else round(max(now_ms - ts, 0) / 1000, 1)


def status(flows: Iterable[FlowConfig], metrics_port: int | None = None,
           metrics_host: str = "127.0.0.1") -> list[FlowStatus]:
    """Every flow's status; a flow whose clusters cannot be read carries the error instead.

    With ``metrics_port``, each flow also carries what the replicator serving metrics there
    says of it (running, stalled or failed, since when, why).
    """
    from mm2py.errors import Mm2pyError

    health = replicator_health(metrics_port, metrics_host) if metrics_port is not None else None
    out = []
    for flow in flows:
        try:
            result = flow_status(flow)
        except Mm2pyError as e:
            result = FlowStatus(flow.name, error=str(e))
        h = (health or {}).get(flow.name)
        if h is not None:
            result = replace(result, replicator_state=h.state, replicator_since=h.since,
                             replicator_reason=h.reason or None, replicator_audit=h.audit,
                             replicator_schema_errors=h.schema_errors)
        out.append(result)
    return out
