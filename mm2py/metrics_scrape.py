"""The scrape of ``mm2py.metrics.Metrics``: its state as Prometheus metric families.

Pure functions of the state they are given (``Metrics.collect`` holds its lock around them);
names, labels and help texts are MM2's where MM2 has the metric.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from mm2py.metrics_state import (
    CHECKPOINT,
    COMMITS,
    CONNECTORS,
    FLOW_LABELS,
    GROUP_LABELS,
    LABELS,
    RATE_WINDOW,
    SOURCE,
    STATES,
    WINDOW,
    FlowState,
    PartitionState,
    Samples,
)
from mm2py.redact import hide
from mm2py.stores.ledger import KINDS as LEDGER_KINDS


def partition_families(partitions: Mapping[tuple[str, str, str, str], PartitionState], now: float
                       ) -> Iterator[Metric]:
    """Every partition's MM2 source-connector metrics (``now``: monotonic)."""
    g = _Families()
    for key, p in sorted(partitions.items()):
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

def flow_families(flows: Mapping[tuple[str, str], FlowState], wall: float) -> Iterator[Metric]:
    """Every flow's state, connectors and counters (``wall``: epoch seconds)."""
    g = _Families()
    for (source, target), f in sorted(flows.items()):
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

def checkpoint_families(checkpoints: Mapping[tuple[str, str, str, str, str], Samples],
                        freshness: Mapping[tuple[str, str, str], Any], now: float, wall: float) -> Iterator[Metric]:
    """Checkpoint latency per group partition, and each group's checkpoint freshness."""
    g = _Families()
    doc = "A checkpoint pass's start to its checkpoints acknowledged by the target (ms)"
    for key, samples in sorted(checkpoints.items()):
        labels = list(key)
        stats = samples.stats(now)
        g.gauge(CHECKPOINT + "checkpoint_latency_ms", doc + ", last.", GROUP_LABELS, labels, samples.last)
        for stat in ("min", "max", "avg"):
            g.gauge(CHECKPOINT + f"checkpoint_latency_ms_{stat}", f"{doc}, {stat} over {WINDOW:g} s.",
                    GROUP_LABELS, labels, stats[stat])
    for (source, target, group), fr in sorted(freshness.items()):
        if fr.newest_ms is not None:
            g.gauge("mm2py_checkpoint_age_seconds", "Age of the group's newest checkpoint on the target (s).",
                    ["source", "target", "group"], [source, target, group], max(wall - fr.newest_ms / 1000, 0.0))
        for topic, partition, behind in fr.behind:
            g.gauge("mm2py_checkpoint_behind_records", "The group's committed offset on the source minus the "
                    "upstream offset of its newest checkpoint: progress a failover now would re-read.",
                    GROUP_LABELS, [source, target, group, topic, str(partition)], behind)
    yield from g.all()

def audit_families(audit: Mapping[tuple[str, str, str, str], Any], audit_at: Mapping[tuple[str, str], float]
                   ) -> Iterator[Metric]:
    """The completeness audit's last counts per partition and when each flow's round ended."""
    g = _Families()
    for key, a in sorted(audit.items()):
        labels = list(key)
        g.gauge("mm2py_audit_source_records", "Records in the audited time buckets, on the source (those the "
                "flow's transforms keep, on a transformed topic).", LABELS,
                labels, a.source_records)
        g.gauge("mm2py_audit_target_records", "Records in the audited time buckets, on the target.", LABELS,
                labels, a.target_records)
        g.gauge("mm2py_audit_missing_records", "Records the source holds and the target lacks, summed over "
                "time buckets.", LABELS, labels, a.missing)
        g.gauge("mm2py_audit_dropped_records", "Source records the flow's transforms dropped (Filter), in the "
                "audited time buckets: left out on purpose, never counted missing.", LABELS, labels,
                getattr(a, "dropped", 0))
        g.gauge("mm2py_audit_duplicate_records", "Records the target holds beyond the source's, summed over "
                "time buckets (at-least-once re-copies).", LABELS, labels, a.duplicates)
    for (source, target), at in sorted(audit_at.items()):
        g.gauge("mm2py_audit_timestamp_seconds", "When the flow's last audit round ended (epoch s).",
                FLOW_LABELS, [source, target], at)
    yield from g.all()


TRANSFORM_LABELS = ["source", "target", "topic", "transform"]
_TRANSFORM_COUNTS = (
    ("in", "Records that reached a transform (no earlier link dropped them), per remote topic."),
    ("out", "Records a transform passed on (its predicate did not hold, or it gave a record back)."),
    ("dropped", "Records a transform dropped (returned none, as Filter does): left out on purpose, "
     "never counted missing by the audit."),
    ("failed", "Records a transform raised on (a Python transform), as copy tasks that finished report them; "
     "a raise stops the flow, named in mm2py_flow_reason_info."),
)


def transform_families(transforms: Mapping[tuple[str, str, str, str], list[int]]) -> Iterator[Metric]:
    """Records in, out, dropped and failed per transform and remote topic; in = out + dropped + failed."""
    g = _Families()
    for key, tally in sorted(transforms.items()):
        for (what, doc), n in zip(_TRANSFORM_COUNTS, tally, strict=True):
            g.counter(f"mm2py_transform_records_{what}", doc, TRANSFORM_LABELS, list(key), n)
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
