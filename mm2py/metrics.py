"""Prometheus metrics on ``metrics.port``: MM2's exporter names, and what no MM2 shows.

Every series is computed when scraped, from state the replicator keeps (``Metrics.collect``):

**MM2's names, exactly as the Prometheus JMX exporter gives them under Strimzi's rules**, so a
dashboard built for MM2 (Strimzi's "Kafka Mirror Maker 2") shows mm2py with only its label
filters adjusted. ``topic`` is the remote (target) topic, as MM2 tags it.

- ``kafka_connect_mirror_mirrorsourceconnector_`` ``record_count``, ``byte_count`` (totals),
  ``record_rate``, ``byte_rate`` (per second over the last ``RATE_WINDOW`` s), ``record_age_ms``
  (fetch time minus the newest record's timestamp) and ``replication_latency_ms`` (target
  acknowledgement minus that timestamp), each with ``_min``, ``_max``, ``_avg`` over the micro-
  batches of the last ``WINDOW`` s (NaN when none, as MM2's); per ``source, target, topic,
  partition``. MM2 samples every record, mm2py the newest record of each micro-batch's range.
- ``kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms`` (+ ``_min/_max/_avg``)
  per ``source, target, group, topic, partition``: a checkpoint pass's start to its records
  acknowledged. MM2 shares one sensor across groups; these are per group.
- Connect's worker and task metrics that mean something here: ``kafka_connect_worker_connector_
  count``, ``kafka_connect_worker_task_count``, ``kafka_connect_worker_connector_{running,failed}_
  task_count``, ``kafka_connect_connector_task_offset_commit_{avg,max}_time_ms`` (positions and
  offset syncs written after a micro-batch); Kafka client metrics: ``kafka_consumer_fetch_manager_
  records_lag`` (per source topic and partition, client ``{src}->{tgt}|MirrorSourceConnector-0|
  replication-consumer`` as MM2 names it), ``kafka_consumer_incoming_byte_total`` and
  ``kafka_producer_outgoing_byte_total`` (record-batch bytes fetched and produced).

**mm2py's own**, under ``mm2py_``: lag per partition in records, bytes and seconds; p50/p99 of
latency and record age; the time records were last mirrored per partition and the time each
flow last made progress (Spark reports a trigger even when there was nothing to copy), so an
idle topic is told apart from a stuck flow; the state of each flow and connector (running,
stalled, failed) with the reason, kept after the failure it reports; checkpoint freshness per
group; heartbeat age per flow; the completeness audit (``mm2py.audit``).

``promtool check metrics`` objects to gauges named ``*_count``: MM2's names are kept anyway.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from mm2py.config.model import FlowConfig
from mm2py.policy import policy_for
from mm2py.redact import hide
from mm2py.stores.ledger import KINDS as LEDGER_KINDS

log = structlog.get_logger(__name__)

SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
LABELS = ["source", "target", "topic", "partition"]
FLOW_LABELS = ["source", "target"]
GROUP_LABELS = ["source", "target", "group", "topic", "partition"]
RATE_WINDOW = 30.0  # seconds of micro-batches behind record_rate / byte_rate
WINDOW = 60.0  # seconds of samples behind _min/_max/_avg and the quantiles (MM2: 2 x 30 s)
MAX_SAMPLES = 1024
COMMITS = 128  # micro-batch commits behind the offset-commit times
STATES = ("running", "stalled", "failed")
CONNECTORS = {"source": "MirrorSourceConnector", "checkpoint": "MirrorCheckpointConnector",
              "heartbeat": "MirrorHeartbeatConnector"}


def window_stats(samples: Iterable[float]) -> dict[str, float]:
    """min, max, avg, p50, p99 of ``samples``; NaN each when there are none."""
    values = sorted(samples)
    if not values:
        return dict.fromkeys(("min", "max", "avg", "p50", "p99"), math.nan)

    def pick(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]
    return {"min": values[0], "max": values[-1], "avg": statistics.fmean(values), "p50": pick(0.5),
            "p99": pick(0.99)}


class Samples:
    """Timed samples of one figure: the last value and the ones of the last ``WINDOW`` seconds."""

    def __init__(self) -> None:
        self.last: float | None = None
        self._items: deque[tuple[float, float]] = deque(maxlen=MAX_SAMPLES)

    def add(self, at: float, value: float) -> None:
        self.last = value
        self._items.append((at, value))

    def stats(self, now: float) -> dict[str, float]:
        while self._items and self._items[0][0] < now - WINDOW:
            self._items.popleft()
        return window_stats(v for _, v in self._items)


@dataclass
class PartitionState:
    source_topic: str
    records: int = 0
    bytes: int = 0
    first_batch: float | None = None  # monotonic
    batches: deque[tuple[float, int, int]] = field(default_factory=deque)  # (monotonic, records, bytes)
    age: Samples = field(default_factory=Samples)
    latency: Samples = field(default_factory=Samples)
    last_mirrored: float | None = None  # wall-clock seconds records were last mirrored
    lag_records: int | None = None
    lag_seconds: float | None = None
    schema_errors: dict[str, int] = field(default_factory=dict)  # schemas.on.error action -> records

    def rates(self, now: float) -> tuple[float, float]:
        while self.batches and self.batches[0][0] < now - RATE_WINDOW:
            self.batches.popleft()
        if self.first_batch is None:
            return 0.0, 0.0
        span = max(min(RATE_WINDOW, now - self.first_batch), 1.0)
        return sum(b[1] for b in self.batches) / span, sum(b[2] for b in self.batches) / span


@dataclass
class FlowState:
    state: str = "running"
    since: float = 0.0
    reason: str = ""
    connectors: dict[str, str] = field(default_factory=dict)  # kind -> state
    last_progress: float | None = None  # wall clock of the source query's last progress report
    phases: dict[str, int] = field(default_factory=dict)  # that report's Spark phase durations, ms
    last_commit: float | None = None  # wall clock of the last micro-batch committed
    commits: deque[float] = field(default_factory=lambda: deque(maxlen=COMMITS))  # seconds each
    heartbeat_at: float | None = None  # wall-clock timestamp of the newest heartbeat on the target
    status_at: float | None = None  # wall clock of the last successful read of the clusters
    fetched_bytes: int = 0
    produced_bytes: int = 0
    # source partitions found gone back or with a gap, per kind, as the flow's ledger counts them
    ledger: dict[str, int] = field(default_factory=dict)


class Metrics:
    """Every metric of one replicator process, in its own registry (a custom collector)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, wall: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic, process: bool = True):
        self.registry = registry or CollectorRegistry()
        self.wall, self.clock = wall, clock
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, str, str, str], PartitionState] = {}
        self._flows: dict[tuple[str, str], FlowState] = {}
        self._remote: dict[tuple[str, str, str], str] = {}  # (source, target, source topic) -> remote topic
        self._checkpoints: dict[tuple[str, str, str, str, str], Samples] = {}
        self._freshness: dict[tuple[str, str, str], Any] = {}
        self._audit: dict[tuple[str, str, str, str], Any] = {}
        self._audit_at: dict[tuple[str, str], float] = {}
        self.registry.register(self)
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)

    # ---- what the replicator reports --------------------------------------------------------

    def _flow(self, source: str, target: str) -> FlowState:
        return self._flows.setdefault((source, target), FlowState(since=self.wall()))

    def _remote_topic(self, flow: FlowConfig, topic: str) -> str:
        key = (flow.source.alias, flow.target.alias, topic)
        remote = self._remote.get(key)
        if remote is None:
            remote = self._remote[key] = policy_for(flow).format_remote_topic(flow.source.alias, topic)
        return remote

    def observe_batch(self, flow: FlowConfig, rows: Iterable[object], now: float | None = None,
                      commit_seconds: float | None = None) -> None:
        """One committed micro-batch of ``flow``: its ``RangeResult`` rows, one per partition range."""
        now = self.clock() if now is None else now
        wall = self.wall()
        source, target = flow.source.alias, flow.target.alias
        with self._lock:
            f = self._flow(source, target)
            f.last_commit = wall
            if commit_seconds is not None:
                f.commits.append(commit_seconds)
            for row in rows:
                records, size = row.records, row.bytes  # type: ignore[attr-defined]
                errors = {"pass": getattr(row, "schema_passed", 0),  # schemas.on.error
                          "dead-letter": getattr(row, "schema_dead_lettered", 0)}
                if records <= 0 and not any(errors.values()):
                    continue
                topic = row.topic  # type: ignore[attr-defined]
                key = (source, target, self._remote_topic(flow, topic), str(row.partition))  # type: ignore[attr-defined]
                p = self._partitions.get(key)
                if p is None:
                    p = self._partitions[key] = PartitionState(topic)
                for action, count in errors.items():
                    if count:
                        p.schema_errors[action] = p.schema_errors.get(action, 0) + count
                if records <= 0:
                    continue
                p.records += records
                p.bytes += size
                f.fetched_bytes += size
                f.produced_bytes += size
                if p.first_batch is None:
                    p.first_batch = now
                p.batches.append((now, records, size))
                p.last_mirrored = wall
                ts = row.max_timestamp  # type: ignore[attr-defined]
                if ts is not None and ts > 0:
                    if row.fetched_ms and row.fetched_ms > 0:  # type: ignore[attr-defined]
                        p.age.add(now, max(row.fetched_ms - ts, 0))  # type: ignore[attr-defined]
                    if row.acked_ms and row.acked_ms > 0:  # type: ignore[attr-defined]
                        p.latency.add(now, max(row.acked_ms - ts, 0))  # type: ignore[attr-defined]

    def observe_status(self, flows: Iterable[object]) -> None:
        """Lag per partition and heartbeat age, from ``mm2py.ops.status.FlowStatus`` snapshots."""
        wall = self.wall()
        with self._lock:
            for fs in flows:
                if fs.error:  # type: ignore[attr-defined]
                    continue  # the last values stay; mm2py_status_timestamp_seconds tells their age
                source, target = fs.flow.split("->")  # type: ignore[attr-defined]
                f = self._flow(source, target)
                f.status_at = wall
                for t in fs.topics:  # type: ignore[attr-defined]
                    for partition, records, seconds in t.partition_lags:
                        key = (source, target, t.remote_topic, str(partition))
                        p = self._partitions.get(key)
                        if p is None:
                            p = self._partitions[key] = PartitionState(t.topic)
                        p.lag_records, p.lag_seconds = records, seconds
                kinds = [e["kind"] for e in getattr(fs, "ledger", ())]
                f.ledger = {kind: kinds.count(kind) for kind in set(kinds)}
                age = fs.last_heartbeat_age_s  # type: ignore[attr-defined]
                if age is not None:
                    f.heartbeat_at = wall - age

    def observe_health(self, health: Iterable[object]) -> None:
        """Each flow's state from ``mm2py.engine.supervisor.Health``."""
        with self._lock:
            for h in health:
                source, target = h.flow.split("->")  # type: ignore[attr-defined]
                f = self._flow(source, target)
                f.state, f.since, f.reason = h.state.value, h.since, h.reason[:300]  # type: ignore[attr-defined]

    def observe_connectors(self, states: Iterable[tuple[str, str, str]]) -> None:
        """``(flow, connector kind, state)``: source/checkpoint/heartbeat; running/stalled/failed/stopped."""
        with self._lock:
            for flow, kind, state in states:
                source, target = flow.split("->")
                self._flow(source, target).connectors[kind] = state

    def observe_progress(self, flow: str, phases: Mapping[str, int] | None = None) -> None:
        """The flow's source query reported progress (a trigger ran, with or without data).

        ``phases``: that trigger's durations in ms by Spark's names (``durationMs``: latestOffset,
        walCommit, queryPlanning, addBatch, commitOffsets, triggerExecution, ...).
        """
        source, target = flow.split("->")
        with self._lock:
            f = self._flow(source, target)
            f.last_progress = self.wall()
            if phases:
                f.phases = dict(phases)

    def observe_checkpoint_pass(self, flow: FlowConfig, seconds: float, rows: Iterable[object] = ()) -> None:
        """A checkpoint pass took ``seconds`` from its start to its records written; ``rows`` are its checkpoints."""
        now = self.clock()
        source, target = flow.source.alias, flow.target.alias
        with self._lock:
            for row in rows:
                key = (source, target, str(row[0]), str(row[1]), str(row[2]))  # type: ignore[index]
                self._checkpoints.setdefault(key, Samples()).add(now, seconds * 1000)

    def observe_freshness(self, groups: Iterable[Any]) -> None:
        """Checkpoint freshness per group (``mm2py.freshness``); replaces what a flow had."""
        with self._lock:
            for g in groups:
                self._freshness[(*g.flow.split("->"), g.group)] = g

    def observe_audit(self, flow: str, findings: Iterable[Any]) -> None:
        """One audit round of ``flow`` (``mm2py.audit``)."""
        source, target = flow.split("->")
        with self._lock:
            for a in findings:
                self._audit[(source, target, a.topic, str(a.partition))] = a
            self._audit_at[(source, target)] = self.wall()

    def audit(self) -> list[Any]:
        with self._lock:
            return list(self._audit.values())

    # ---- the scrape ---------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time; no fixed names to claim in the registry

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self._collect_partitions()
            yield from self._collect_flows()
            yield from self._collect_checkpoints()
            yield from self._collect_audit()

    def _collect_partitions(self) -> Iterator[Metric]:
        now = self.clock()
        g = _Families()
        for key, p in sorted(self._partitions.items()):
            labels = list(key)
            if p.first_batch is not None:
                g.gauge(SOURCE + "record_count", "Records replicated to the target cluster.", LABELS, labels, p.records)
                g.gauge(SOURCE + "byte_count", "Bytes replicated to the target cluster (as stored, compressed).",
                        LABELS, labels, p.bytes)
                record_rate, byte_rate = p.rates(now)
                g.gauge(SOURCE + "record_rate", f"Records replicated per second (last {RATE_WINDOW:g} s).", LABELS,
                        labels, record_rate)
                g.gauge(SOURCE + "byte_rate", f"Bytes replicated per second (last {RATE_WINDOW:g} s).", LABELS,
                        labels, byte_rate)
                for name, samples, doc in (("record_age_ms", p.age, "Age of the newest record of a micro-batch's "
                                            "range when fetched (ms)"),
                                           ("replication_latency_ms", p.latency, "Newest record's timestamp to "
                                            "its acknowledgement by the target (ms)")):
                    if samples.last is None:
                        continue
                    stats = samples.stats(now)
                    g.gauge(SOURCE + name, doc + ", last micro-batch.", LABELS, labels, samples.last)
                    for stat in ("min", "max", "avg"):
                        g.gauge(SOURCE + f"{name}_{stat}", f"{doc}, {stat} over {WINDOW:g} s.", LABELS, labels,
                                stats[stat])
                    for q in ("p50", "p99"):
                        g.gauge("mm2py_" + name, f"{doc}: quantiles over {WINDOW:g} s.", [*LABELS, "quantile"],
                                [*labels, "0." + q[1:]], stats[q])
            for action, count in sorted(p.schema_errors.items()):
                g.gauge("mm2py_schema_untranslatable_records", "Records whose schema ids could not be translated, by "
                        "what schemas.on.error did with them (pass: written as they were; dead-letter).",
                        [*LABELS, "action"], [*labels, action], count)
            if p.last_mirrored is not None:
                g.gauge("mm2py_last_mirrored_timestamp_seconds", "When records of the partition were last "
                        "mirrored (epoch s).", LABELS, labels, p.last_mirrored)
            if p.lag_records is not None:
                g.gauge("mm2py_lag_records", "Records on the source not yet mirrored (source end minus mirrored "
                        "position).", LABELS, labels, p.lag_records)
                g.gauge("mm2py_lag_seconds", "Age of the oldest record not yet mirrored (s; 0 when caught up).",
                        LABELS, labels, p.lag_seconds or 0.0)
                if p.records > 0:
                    g.gauge("mm2py_lag_bytes", "Estimated source bytes not yet mirrored.", LABELS, labels,
                            p.lag_records * p.bytes / p.records)
                source, target, _topic, partition = key
                g.gauge("kafka_consumer_fetch_manager_records_lag", "Records lag of the replication consumer "
                        "(source topic).", ["clientid", "topic", "partition", "source", "target"],
                        [f"{source}->{target}|MirrorSourceConnector-0|replication-consumer", p.source_topic,
                         partition, source, target], p.lag_records)
        yield from g.all()

    def _collect_flows(self) -> Iterator[Metric]:
        wall = self.wall()
        g = _Families()
        for (source, target), f in sorted(self._flows.items()):
            fl = [source, target]
            for state in STATES:
                g.gauge("mm2py_flow_state", "1 for the state a flow is in (running, stalled, failed).",
                        [*FLOW_LABELS, "state"], [*fl, state], 1 if f.state == state else 0)
            g.gauge("mm2py_flow_state_since_seconds", "When the flow entered its state (epoch s).", FLOW_LABELS, fl,
                    f.since)
            if f.reason:
                # the one free text served: it passes the rule that keeps secrets out of output
                g.gauge("mm2py_flow_reason_info", "The last error of a stalled or failed flow.",
                        [*FLOW_LABELS, "reason"], [*fl, hide(f.reason)], 1)
            for kind, state in sorted(f.connectors.items()):
                connector = CONNECTORS.get(kind, kind)
                for s in (*STATES, "stopped"):
                    g.gauge("mm2py_connector_state", "1 for the state a connector (streaming query) is in.",
                            [*FLOW_LABELS, "connector", "state"], [*fl, connector, s], 1 if state == s else 0)
                g.gauge("kafka_connect_worker_connector_running_task_count", "Tasks of the connector running.",
                        ["connector", *FLOW_LABELS], [connector, *fl], 1 if state == "running" else 0)
                g.gauge("kafka_connect_worker_connector_failed_task_count", "Tasks of the connector failed.",
                        ["connector", *FLOW_LABELS], [connector, *fl], 1 if state == "failed" else 0)
            if f.connectors:
                g.gauge("kafka_connect_worker_connector_count", "Connectors of the flow (source, checkpoint, "
                        "heartbeat).", FLOW_LABELS, fl, len(f.connectors))
                g.gauge("kafka_connect_worker_task_count", "Tasks of the flow: one streaming query per connector, "
                        "not failed.", FLOW_LABELS, fl, sum(s != "failed" for s in f.connectors.values()))
            if f.commits:
                task = ["MirrorSourceConnector", "0", *fl]
                g.gauge("kafka_connect_connector_task_offset_commit_avg_time_ms", "Writing positions and offset "
                        f"syncs after a micro-batch, average of the last {COMMITS} (ms).",
                        ["connector", "task", *FLOW_LABELS], task, statistics.fmean(f.commits) * 1000)
                g.gauge("kafka_connect_connector_task_offset_commit_max_time_ms", "Writing positions and offset "
                        f"syncs after a micro-batch, max of the last {COMMITS} (ms).",
                        ["connector", "task", *FLOW_LABELS], task, max(f.commits) * 1000)
            if f.last_progress is not None:
                g.gauge("mm2py_flow_last_progress_timestamp_seconds", "When the flow's source query last reported "
                        "progress, with or without data (epoch s).", FLOW_LABELS, fl, f.last_progress)
            for phase, ms in sorted(f.phases.items()):
                g.gauge("mm2py_micro_batch_phase_seconds", "Spark's time in each phase of the source query's last "
                        "trigger (durationMs: latestOffset = planning the ends, walCommit = offset log, addBatch "
                        "= copy tasks and commit, commitOffsets = commit log, triggerExecution = all) (s).",
                        [*FLOW_LABELS, "phase"], [*fl, phase], ms / 1000)
            if f.last_commit is not None:
                g.gauge("mm2py_flow_last_commit_timestamp_seconds", "When the flow last committed a micro-batch "
                        "(epoch s).", FLOW_LABELS, fl, f.last_commit)
            if f.heartbeat_at is not None:
                g.gauge("mm2py_heartbeat_age_seconds", "Age of the flow's newest heartbeat on its target (s).",
                        FLOW_LABELS, fl, max(wall - f.heartbeat_at, 0.0))
            if f.status_at is not None:
                g.gauge("mm2py_status_timestamp_seconds", "When lag and heartbeats were last read from the "
                        "clusters (epoch s).", FLOW_LABELS, fl, f.status_at)
            if f.status_at is not None:
                for kind in LEDGER_KINDS:
                    g.counter("mm2py_source_resets", "Source partitions the flow found gone back (kind recreated: "
                              "topic re-created; truncated: log ends below the position), with records deleted "
                              "before they were mirrored (gap), or refilled after their remote topic was deleted "
                              "(remote-deleted), as recorded in mm2py-ledger.{source}.internal.",
                              [*FLOW_LABELS, "kind"], [*fl, kind], f.ledger.get(kind, 0))
            if f.fetched_bytes or f.connectors:
                g.counter("kafka_consumer_incoming_byte", "Record-batch bytes fetched from the source.",
                          ["clientid", *FLOW_LABELS], [f"{source}->{target}|MirrorSourceConnector-0|"
                                                       "replication-consumer", *fl], f.fetched_bytes)
                g.counter("kafka_producer_outgoing_byte", "Record-batch bytes produced to the target.",
                          ["clientid", *FLOW_LABELS], ["connector-producer-MirrorSourceConnector-0", *fl],
                          f.produced_bytes)
        yield from g.all()

    def _collect_checkpoints(self) -> Iterator[Metric]:
        now, wall = self.clock(), self.wall()
        g = _Families()
        doc = "A checkpoint pass's start to its checkpoints acknowledged by the target (ms)"
        for key, samples in sorted(self._checkpoints.items()):
            labels = list(key)
            stats = samples.stats(now)
            g.gauge(CHECKPOINT + "checkpoint_latency_ms", doc + ", last.", GROUP_LABELS, labels, samples.last)
            for stat in ("min", "max", "avg"):
                g.gauge(CHECKPOINT + f"checkpoint_latency_ms_{stat}", f"{doc}, {stat} over {WINDOW:g} s.",
                        GROUP_LABELS, labels, stats[stat])
        for (source, target, group), fr in sorted(self._freshness.items()):
            if fr.newest_ms is not None:
                g.gauge("mm2py_checkpoint_age_seconds", "Age of the group's newest checkpoint on the target (s).",
                        ["source", "target", "group"], [source, target, group], max(wall - fr.newest_ms / 1000, 0.0))
            for topic, partition, behind in fr.behind:
                g.gauge("mm2py_checkpoint_behind_records", "The group's committed offset on the source minus the "
                        "upstream offset of its newest checkpoint: progress a failover now would re-read.",
                        GROUP_LABELS, [source, target, group, topic, str(partition)], behind)
        yield from g.all()

    def _collect_audit(self) -> Iterator[Metric]:
        g = _Families()
        for key, a in sorted(self._audit.items()):
            labels = list(key)
            g.gauge("mm2py_audit_source_records", "Records in the audited time buckets, on the source.", LABELS,
                    labels, a.source_records)
            g.gauge("mm2py_audit_target_records", "Records in the audited time buckets, on the target.", LABELS,
                    labels, a.target_records)
            g.gauge("mm2py_audit_missing_records", "Records the source holds and the target lacks, summed over "
                    "time buckets.", LABELS, labels, a.missing)
            g.gauge("mm2py_audit_duplicate_records", "Records the target holds beyond the source's, summed over "
                    "time buckets (at-least-once re-copies).", LABELS, labels, a.duplicates)
        for (source, target), at in sorted(self._audit_at.items()):
            g.gauge("mm2py_audit_timestamp_seconds", "When the flow's last audit round ended (epoch s).",
                    FLOW_LABELS, [source, target], at)
        yield from g.all()


class _Families:
    """Metric families assembled during one scrape, in first-seen order."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def gauge(self, name: str, doc: str, labels: list[str], values: list[str], value: float | None) -> None:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = GaugeMetricFamily(name, doc, labels=labels)
        family.add_metric(values, math.nan if value is None else value)  # type: ignore[attr-defined]

    def counter(self, name: str, doc: str, labels: list[str], values: list[str], value: float) -> None:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = CounterMetricFamily(name, doc, labels=labels)
        family.add_metric(values, value)  # type: ignore[attr-defined]

    def all(self) -> Iterator[Metric]:
        return iter(self._families.values())
