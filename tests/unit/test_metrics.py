"""Metrics bookkeeping, scraped from the registry as Prometheus would."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mm2py.config import load_text
from mm2py.metrics import Metrics
from mm2py.ops.status import FlowStatus, TopicStatus

FLOW = load_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                 "A->B.enabled = true\n").enabled_flows[0]


def scrape(m: Metrics) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def row(topic: str, partition: int, records: int, size: int, ts: int, fetched: int, acked: int) -> SimpleNamespace:
    return SimpleNamespace(topic=topic, partition=partition, records=records, bytes=size, max_timestamp=ts,
                           fetched_ms=fetched, acked_ms=acked)


def labels(partition: str = "0", **more: str) -> tuple:
    return tuple(sorted({"source": "A", "target": "B", "topic": "orders", "partition": partition, **more}.items()))


def test_counts_rates_and_latency_windows():
    m = Metrics()
    m.observe_batch(FLOW, [row("orders", 0, 100, 5000, 1_000, 1_200, 1_500)], now=10.0)
    m.observe_batch(FLOW, [row("orders", 0, 50, 2500, 2_000, 2_100, 2_300)], now=12.0)
    got = scrape(m)
    p = "kafka_connect_mirror_source_connector_"
    assert got[(p + "record_count_total", labels())] == 150
    assert got[(p + "byte_count_total", labels())] == 7500
    assert got[(p + "record_rate", labels())] == 25.0  # 50 records over the 2 s since the last batch
    assert got[(p + "replication_latency_ms", labels(stat="max"))] == 500
    assert got[(p + "replication_latency_ms", labels(stat="min"))] == 300
    assert got[(p + "replication_latency_ms", labels(stat="avg"))] == 400
    assert got[(p + "record_age_ms", labels(stat="p99"))] == 200


def test_lag_and_heartbeat_age_from_status():
    m = Metrics()
    m.observe_batch(FLOW, [row("orders", 1, 10, 1000, -1, -1, -1)], now=1.0)
    m.observe_status([FlowStatus("A->B", [TopicStatus("orders", "A.orders", 2, 30, 20, 10, 4.5,
                                                      ((0, 0, 0.0), (1, 10, 4.5)))], 3.0, 1.5)])
    got = scrape(m)
    p = "kafka_connect_mirror_source_connector_"
    assert got[(p + "lag_records", labels("1"))] == 10
    assert got[(p + "lag_seconds", labels("1"))] == 4.5
    assert got[(p + "lag_bytes", labels("1"))] == 1000  # 100 bytes per record mirrored so far
    assert got[("kafka_connect_mirror_heartbeat_age_seconds", (("source", "A"), ("target", "B")))] == 1.5
