"""Prometheus metrics on ``metrics.port``: MM2's source-connector metrics, lag and heartbeat age.

Names follow MM2's MirrorSourceMetrics (``record-count`` -> ``kafka_connect_mirror_source_
connector_record_count``), tagged ``source, target, topic, partition``, where ``topic`` is the
source topic. Per partition and micro-batch the copier reports when the batch holding the
newest record was fetched and when the target acknowledged the range, so

- ``record_age_ms``: fetch time minus the newest record's timestamp (how old records are when
  read), ``replication_latency_ms``: acknowledgement time minus that timestamp (source append
  to target append, for CreateTime topics); each with min, max, avg, p50 and p99 over the last
  ``WINDOW`` micro-batches of the partition;
- ``record_rate`` / ``byte_rate``: per second between the last two micro-batches that copied;
- ``lag_records`` / ``lag_bytes`` / ``lag_seconds`` and ``heartbeat_age_seconds``: refreshed
  every ``REFRESH_SECONDS`` by a background thread from the clusters (mm2py.ops.status), so they
  stay true while no micro-batch runs.

``checkpoint_latency_ms`` is the time a checkpoint pass took, from its tick to its records
written (MM2 reports its checkpoint record's age; mm2py writes checkpoints in passes).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterable

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from mm2py.config.model import FlowConfig

log = structlog.get_logger(__name__)

PREFIX = "kafka_connect_mirror_source_connector_"
LABELS = ("source", "target", "topic", "partition")
WINDOW = 128
REFRESH_SECONDS = 5.0
STATS = ("min", "max", "avg", "p50", "p99")


def _window_stats(samples: Iterable[float]) -> dict[str, float]:
    values = sorted(samples)
    if not values:
        return {}
    def pick(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]
    return {"min": values[0], "max": values[-1], "avg": statistics.fmean(values), "p50": pick(0.5),
            "p99": pick(0.99)}


class Metrics:
    """Every metric of one replicator process, in its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.record_count = Counter(PREFIX + "record_count", "Records mirrored.", LABELS, registry=r)
        self.byte_count = Counter(PREFIX + "byte_count", "Bytes mirrored (as stored, compressed).", LABELS,
                                  registry=r)
        self.record_rate = Gauge(PREFIX + "record_rate", "Records per second mirrored.", LABELS, registry=r)
        self.byte_rate = Gauge(PREFIX + "byte_rate", "Bytes per second mirrored.", LABELS, registry=r)
        self.record_age = Gauge(PREFIX + "record_age_ms", "Age of the newest record when fetched (ms).",
                                (*LABELS, "stat"), registry=r)
        self.latency = Gauge(PREFIX + "replication_latency_ms", "Source append to target append (ms).",
                             (*LABELS, "stat"), registry=r)
        self.lag_records = Gauge(PREFIX + "lag_records", "Records on the source not yet mirrored.", LABELS,
                                 registry=r)
        self.lag_bytes = Gauge(PREFIX + "lag_bytes", "Estimated source bytes not yet mirrored.", LABELS,
                               registry=r)
        self.lag_seconds = Gauge(PREFIX + "lag_seconds", "Age of the oldest record not yet mirrored (s).", LABELS,
                                 registry=r)
        self.heartbeat_age = Gauge("kafka_connect_mirror_heartbeat_age_seconds",
                                   "Age of the newest heartbeat of the flow on its target (s).",
                                   ("source", "target"), registry=r)
        self.checkpoint_latency = Gauge("kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms",
                                        "Time the last checkpoint pass took (ms).", ("source", "target"), registry=r)
        self.flow_state = Gauge("mm2py_flow_state", "1 for the state a flow is in (running, stalled, failed).",
                                ("source", "target", "state"), registry=r)
        self.flow_state_since = Gauge("mm2py_flow_state_since_seconds", "When the flow entered its state (epoch s).",
                                      ("source", "target"), registry=r)
        self.flow_reason = Gauge("mm2py_flow_reason_info", "The last error of a stalled or failed flow.",
                                 ("source", "target", "reason"), registry=r)
        self._reasons: dict[tuple[str, str], str] = {}
        self._ages: dict[tuple, deque[float]] = defaultdict(lambda: deque(maxlen=WINDOW))
        self._latencies: dict[tuple, deque[float]] = defaultdict(lambda: deque(maxlen=WINDOW))
        self._last_batch: dict[tuple, tuple[float, int, int]] = {}
        self._bytes_per_record: dict[tuple, float] = {}

    def observe_batch(self, flow: FlowConfig, rows: Iterable[object], now: float | None = None) -> None:
        """Account one micro-batch's rows (one per partition range) of ``flow``."""
        now = time.monotonic() if now is None else now
        for row in rows:
            labels = (flow.source.alias, flow.target.alias, row.topic, str(row.partition))  # type: ignore[attr-defined]
            records, size = row.records, row.bytes  # type: ignore[attr-defined]
            if records <= 0:
                continue
            self.record_count.labels(*labels).inc(records)
            self.byte_count.labels(*labels).inc(size)
            self._bytes_per_record[labels] = size / records
            last = self._last_batch.get(labels)
            if last is not None and now > last[0]:
                self.record_rate.labels(*labels).set(records / (now - last[0]))
                self.byte_rate.labels(*labels).set(size / (now - last[0]))
            self._last_batch[labels] = (now, records, size)
            ts = row.max_timestamp  # type: ignore[attr-defined]
            if ts is not None and ts > 0:
                if row.fetched_ms and row.fetched_ms > 0:  # type: ignore[attr-defined]
                    self._ages[labels].append(max(row.fetched_ms - ts, 0))  # type: ignore[attr-defined]
                    self._publish(self.record_age, labels, self._ages[labels])
                if row.acked_ms and row.acked_ms > 0:  # type: ignore[attr-defined]
                    self._latencies[labels].append(max(row.acked_ms - ts, 0))  # type: ignore[attr-defined]
                    self._publish(self.latency, labels, self._latencies[labels])

    @staticmethod
    def _publish(gauge: Gauge, labels: tuple, samples: deque[float]) -> None:
        for stat, value in _window_stats(samples).items():
            gauge.labels(*labels, stat).set(value)

    def observe_status(self, flows: Iterable[object]) -> None:
        """Lag and heartbeat age from ``mm2py.ops.status.FlowStatus`` snapshots."""
        for f in flows:
            if f.error:  # type: ignore[attr-defined]
                continue
            source, target = f.flow.split("->")  # type: ignore[attr-defined]
            for t in f.topics:  # type: ignore[attr-defined]
                for partition, records, seconds in t.partition_lags:
                    labels = (source, target, t.topic, str(partition))
                    self.lag_records.labels(*labels).set(records)
                    self.lag_seconds.labels(*labels).set(seconds)
                    per_record = self._bytes_per_record.get(labels)
                    if per_record is not None:
                        self.lag_bytes.labels(*labels).set(records * per_record)
            if f.last_heartbeat_age_s is not None:  # type: ignore[attr-defined]
                self.heartbeat_age.labels(source, target).set(f.last_heartbeat_age_s)  # type: ignore[attr-defined]

    def observe_health(self, health: Iterable[object]) -> None:
        """Each flow's state from ``mm2py.engine.supervisor.Health``: one series per flow and state."""
        for h in health:
            source, target = h.flow.split("->")  # type: ignore[attr-defined]
            for state in ("running", "stalled", "failed"):
                self.flow_state.labels(source, target, state).set(1 if h.state.value == state else 0)  # type: ignore[attr-defined]
            self.flow_state_since.labels(source, target).set(h.since)  # type: ignore[attr-defined]
            reason = h.reason[:300]  # type: ignore[attr-defined]
            old = self._reasons.get((source, target))
            if old is not None and old != reason:
                self.flow_reason.remove(source, target, old)
            if reason:
                self.flow_reason.labels(source, target, reason).set(1)
                self._reasons[(source, target)] = reason
            else:
                self._reasons.pop((source, target), None)

    def observe_checkpoint_pass(self, flow: FlowConfig, seconds: float) -> None:
        self.checkpoint_latency.labels(flow.source.alias, flow.target.alias).set(seconds * 1000)


class MetricsServer:
    """The HTTP endpoint and the thread refreshing lag and heartbeat age."""

    def __init__(self, metrics: Metrics, port: int, flows: tuple[FlowConfig, ...]):
        self.metrics, self.port, self.flows = metrics, port, flows
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._server = None

    def start(self) -> MetricsServer:
        self._server, _ = start_http_server(self.port, addr="0.0.0.0", registry=self.metrics.registry)
        self._thread = threading.Thread(target=self._refresh, name="mm2py-metrics", daemon=True)
        self._thread.start()
        log.info("metrics served", port=self.port, path="/metrics")
        return self

    def _refresh(self) -> None:
        from mm2py.ops.status import status

        while not self._stop.is_set():
            try:
                self.metrics.observe_status(status(self.flows))
            except Exception as e:  # noqa: BLE001 - a metrics hiccup must never stop mirroring
                log.warning("refreshing lag metrics failed", error=str(e))
            self._stop.wait(REFRESH_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
