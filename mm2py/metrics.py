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
group; heartbeat age per flow; the completeness audit (``mm2py.audit``); records in, out,
dropped and failed per transform and remote topic (``mm2py.transforms``), counted since start.

``promtool check metrics`` objects to gauges named ``*_count``: MM2's names are kept anyway.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import Metric

from mm2py.config.model import FlowConfig
from mm2py.metrics_scrape import (
    audit_families,
    checkpoint_families,
    flow_families,
    partition_families,
    transform_families,
)
from mm2py.metrics_state import FlowState, PartitionState, Samples
from mm2py.policy import policy_for

log = structlog.get_logger(__name__)


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
        # (source, target, remote topic, transform) -> [in, out, dropped, failed] records, since start
        self._transforms: dict[tuple[str, str, str, str], list[int]] = {}
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
                self._count_transformed(flow, row)
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

    def _count_transformed(self, flow: FlowConfig, row: object) -> None:
        """Add a ``RangeResult``'s per-transform counts to its remote topic's (lock held)."""
        for name, *counts in getattr(row, "transformed", ()):
            key = (flow.source.alias, flow.target.alias, self._remote_topic(flow, row.topic),  # type: ignore[attr-defined]
                   name)
            tally = self._transforms.setdefault(key, [0, 0, 0, 0])
            for i, n in enumerate(counts):
                tally[i] += n

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
            yield from partition_families(self._partitions, self.clock())
            yield from flow_families(self._flows, self.wall())
            yield from checkpoint_families(self._checkpoints, self._freshness, self.clock(), self.wall())
            yield from audit_families(self._audit, self._audit_at)
            yield from transform_families(self._transforms)
