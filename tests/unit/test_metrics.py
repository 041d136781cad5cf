"""Metrics bookkeeping, scraped from the registry as Prometheus would."""

from __future__ import annotations

import math
from types import SimpleNamespace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mm2py.config import load_text
from mm2py.engine.supervisor import Health, State
from mm2py.freshness import GroupFreshness
from mm2py.metrics import Metrics
from mm2py.ops.replicator import parse_health
from mm2py.ops.status import FlowStatus, TopicStatus
from tests.fakes.clock import Clock

FLOW = load_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                 "A->B.enabled = true\n").enabled_flows[0]
P = "kafka_connect_mirror_mirrorsourceconnector_"



def scrape(m: Metrics) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def row(topic: str, partition: int, records: int, size: int, ts: int, fetched: int, acked: int) -> SimpleNamespace:
    return SimpleNamespace(topic=topic, partition=partition, records=records, bytes=size, max_timestamp=ts,
                           fetched_ms=fetched, acked_ms=acked)


def labels(partition: str = "0", topic: str = "A.orders", **more: str) -> tuple:
    return tuple(sorted({"source": "A", "target": "B", "topic": topic, "partition": partition, **more}.items()))


def test_mm2_source_names_remote_topic_counts_rates_and_windows():
    clock, wall = Clock(10.0), Clock(1_700_000_000.0)
    m = Metrics(clock=clock, wall=wall, process=False)
    m.observe_batch(FLOW, [row("orders", 0, 100, 5000, 1_000, 1_200, 1_500)])
    clock.now = 12.0
    m.observe_batch(FLOW, [row("orders", 0, 50, 2500, 2_000, 2_100, 2_300)], commit_seconds=0.02)
    got = scrape(m)
    # exactly the JMX exporter's names: gauges, no _total; topic is the remote topic
    assert got[(P + "record_count", labels())] == 150
    assert got[(P + "byte_count", labels())] == 7500
    assert got[(P + "record_rate", labels())] == 75.0  # 150 records over the 2 s since the first batch
    assert got[(P + "replication_latency_ms", labels())] == 300  # the last micro-batch's
    assert got[(P + "replication_latency_ms_max", labels())] == 500
    assert got[(P + "replication_latency_ms_min", labels())] == 300
    assert got[(P + "replication_latency_ms_avg", labels())] == 400
    assert got[(P + "record_age_ms_max", labels())] == 200
    assert got[("mm2py_replication_latency_ms", labels(quantile="0.99"))] == 500
    assert got[("mm2py_last_mirrored_timestamp_seconds", labels())] == 1_700_000_000.0
    commit = (("connector", "MirrorSourceConnector"), ("source", "A"), ("target", "B"), ("task", "0"))
    assert got[("kafka_connect_connector_task_offset_commit_avg_time_ms", commit)] == 20.0
    bytes_in = (("clientid", "A->B|MirrorSourceConnector-0|replication-consumer"), ("source", "A"), ("target", "B"))
    assert got[("kafka_consumer_incoming_byte_total", bytes_in)] == 7500
    assert not any(name.startswith(P) and name.endswith("_total") for name, _ in got)
    # a minute later nothing new: MM2's windowed stats turn NaN, the rate 0, the last values stay
    clock.now = 100.0
    got = scrape(m)
    assert math.isnan(got[(P + "replication_latency_ms_avg", labels())])
    assert got[(P + "record_rate", labels())] == 0.0
    assert got[(P + "replication_latency_ms", labels())] == 300
    assert got[(P + "record_count", labels())] == 150


def test_lag_heartbeat_and_consumer_lag_from_status():
    wall = Clock(1_700_000_000.0)
    m = Metrics(wall=wall, process=False)
    m.observe_batch(FLOW, [row("orders", 1, 10, 1000, -1, -1, -1)], now=1.0)
    m.observe_status([FlowStatus("A->B", [TopicStatus("orders", "A.orders", 2, 30, 20, 10, 4.5,
                                                      ((0, 0, 0.0), (1, 10, 4.5)))], 3.0, 1.5)])
    wall.now += 10  # the heartbeat age grows between refreshes, even when the clusters cannot be read
    m.observe_status([FlowStatus("A->B", error="cluster B unreachable")])
    got = scrape(m)
    assert got[("mm2py_lag_records", labels("1"))] == 10
    assert got[("mm2py_lag_seconds", labels("1"))] == 4.5
    assert got[("mm2py_lag_records", labels("0"))] == 0
    assert got[("mm2py_lag_bytes", labels("1"))] == 1000  # 100 bytes per record mirrored so far
    assert got[("mm2py_heartbeat_age_seconds", (("source", "A"), ("target", "B")))] == 11.5
    assert got[("mm2py_status_timestamp_seconds", (("source", "A"), ("target", "B")))] == 1_700_000_000.0
    consumer = (("clientid", "A->B|MirrorSourceConnector-0|replication-consumer"), ("partition", "1"),
                ("source", "A"), ("target", "B"), ("topic", "orders"))
    assert got[("kafka_consumer_fetch_manager_records_lag", consumer)] == 10


def test_flow_and_connector_state_survive_the_failure_and_status_reads_them():
    m = Metrics(process=False)
    m.observe_health([Health("A->B", State.STALLED, 1_700_000_000.0, "broker down [cluster=B]")])
    m.observe_connectors([("A->B", "source", "stalled"), ("A->B", "checkpoint", "running"),
                          ("A->B", "heartbeat", "running")])
    got = scrape(m)
    flow = (("source", "A"), ("state", "stalled"), ("target", "B"))
    assert got[("mm2py_flow_state", flow)] == 1
    assert got[("kafka_connect_worker_connector_count", (("source", "A"), ("target", "B")))] == 3
    src = (("connector", "MirrorSourceConnector"), ("source", "A"), ("state", "stalled"), ("target", "B"))
    assert got[("mm2py_connector_state", src)] == 1
    m.observe_health([Health("A->B", State.FAILED, 1_700_000_100.0, "not authorized [cluster=A]")])
    m.observe_connectors([("A->B", k, "failed") for k in ("source", "checkpoint", "heartbeat")])
    got = scrape(m)
    assert got[("mm2py_flow_state", (("source", "A"), ("state", "failed"), ("target", "B")))] == 1
    assert got[("kafka_connect_worker_task_count", (("source", "A"), ("target", "B")))] == 0
    failed = (("connector", "MirrorSourceConnector"), ("source", "A"), ("target", "B"))
    assert got[("kafka_connect_worker_connector_failed_task_count", failed)] == 1
    # one reason series at a time: the old one is gone
    reasons = [dict(ls)["reason"] for (n, ls), _ in got.items() if n == "mm2py_flow_reason_info"]
    assert reasons == ["not authorized [cluster=A]"]
    health = parse_health(generate_latest(m.registry).decode())["A->B"]
    assert (health.state, health.since, health.reason) == ("failed", 1_700_000_100.0, "not authorized [cluster=A]")


def test_checkpoint_latency_per_group_and_freshness():
    wall = Clock(1_700_000_100.0)
    m = Metrics(wall=wall, process=False)
    m.observe_checkpoint_pass(FLOW, 0.25, [("billing", "A.orders", 0, 10, 8, False)])
    m.observe_checkpoint_pass(FLOW, 0.05, [("audit", "A.orders", 0, 3, 3, False)])
    m.observe_freshness([GroupFreshness("A->B", "billing", 1_700_000_000_000, (("A.orders", 0, 7),))])
    got = scrape(m)
    c = "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms"
    billing = (("group", "billing"), ("partition", "0"), ("source", "A"), ("target", "B"), ("topic", "A.orders"))
    assert got[(c, billing)] == 250
    assert got[(c + "_max", billing)] == 250
    assert got[(c + "_avg", tuple(sorted({**dict(billing), "group": "audit"}.items())))] == 50
    assert got[("mm2py_checkpoint_age_seconds", (("group", "billing"), ("source", "A"), ("target", "B")))] == 100
    assert got[("mm2py_checkpoint_behind_records", billing)] == 7


def test_process_metrics_are_served():
    got = scrape(Metrics())
    assert any(name == "process_cpu_seconds_total" for name, _ in got) or not any(got)  # /proc may be absent


def test_audit_is_served_and_read_back_by_status():
    from mm2py.audit.buckets import AuditFinding
    from mm2py.ops.status_view import render

    m = Metrics(process=False)
    m.observe_health([Health("A->B", State.RUNNING, 1_700_000_000.0, "")])
    m.observe_audit("A->B", [AuditFinding("A->B", "A.orders", 0, 500, 430, 70, 0, 5),
                             AuditFinding("A->B", "A.orders", 1, 500, 503, 0, 3, 5)])
    got = scrape(m)
    assert got[("mm2py_audit_missing_records", labels("0"))] == 70
    assert got[("mm2py_audit_duplicate_records", labels("1"))] == 3
    health = parse_health(generate_latest(m.registry).decode())["A->B"]
    assert health.audit == (("A.orders", 0, 70, 0), ("A.orders", 1, 0, 3))
    shown = render([FlowStatus("A->B", replicator_state="running", replicator_since=0.0,
                               replicator_audit=health.audit)])
    assert "audit 70 records missing on the target, 3 duplicates; A.orders partition 0: 70 missing" in shown


def test_bind_address_and_audit_interval_settings_and_the_endpoint_binds_there():
    import socket
    import urllib.request

    from mm2py.engine.metrics_server import MetricsServer

    base = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    default = load_text(base + "metrics.port = 9404\n")
    assert (default.metrics_bind_address, default.audit_interval_seconds) == ("0.0.0.0", 60.0)
    cfg = load_text(base + "metrics.port = 9404\nmetrics.bind.address = 127.0.0.1\naudit.interval.seconds = 0\n")
    assert (cfg.metrics_bind_address, cfg.audit_interval_seconds, cfg.unknown_keys) == ("127.0.0.1", 0.0, ())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = MetricsServer(Metrics(process=False), port, (), cfg.metrics_bind_address).start()
    try:
        assert server._server.server_address[0] == "127.0.0.1"
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).status == 200
    finally:
        server.stop()


def test_spark_phases_of_the_source_query_s_last_trigger():
    from mm2py.engine.queries import parse_durations

    phases = parse_durations("{addBatch=10512, commitOffsets=41, getBatch=0, latestOffset=733, queryPlanning=12, "
                             "triggerExecution=11950, walCommit=58}")
    assert phases["addBatch"] == 10512 and phases["walCommit"] == 58 and len(phases) == 7
    assert parse_durations("{}") == {} and parse_durations("{odd, x=1.5, y=2}") == {"y": 2}
    m = Metrics(process=False)
    m.observe_progress("A->B", phases)
    m.observe_progress("A->B")  # a report without durations keeps the last ones
    got = scrape(m)
    flow = (("phase", "addBatch"), ("source", "A"), ("target", "B"))
    assert got[("mm2py_micro_batch_phase_seconds", flow)] == 10.512
    assert got[("mm2py_micro_batch_phase_seconds", (("phase", "walCommit"), ("source", "A"), ("target", "B")))] \
        == 0.058


def test_source_resets_are_counted_per_kind_from_the_ledger_status_reads():
    m = Metrics(process=False)
    ledger = ({"kind": "recreated"}, {"kind": "recreated"}, {"kind": "gap"})
    m.observe_status([FlowStatus("A->B", [], ledger=ledger)])
    got = scrape(m)
    flow = (("source", "A"), ("target", "B"))
    assert got[("mm2py_source_resets_total", (("kind", "recreated"), *flow))] == 2
    assert got[("mm2py_source_resets_total", (("kind", "gap"), *flow))] == 1
    assert got[("mm2py_source_resets_total", (("kind", "truncated"), *flow))] == 0
