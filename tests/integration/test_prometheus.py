"""Issue 25: a real Prometheus scrapes a running mm2py; dashboards, alerts and the audit on live data.

- every panel query of deploy/grafana/mm2py.json returns data;
- every metric name and label that Strimzi's MirrorMaker 2 dashboard queries is served, or stays
  empty for a stated reason (the table is printed);
- ``promtool test rules`` on series of a real scrape: the healthy flow fires nothing, the stalled
  one fires FlowStalled;
- the real Prometheus fires FlowStalled within its ``for:`` once the target cluster is stopped,
  and clears it when the cluster returns;
- the audit finds records removed from the target with DeleteRecords within one audit interval,
  and stays quiet about records removed on both sides.

Prometheus listens on 127.0.0.1 only and scrapes mm2py bound to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2py.dev import cluster as devcluster
from mm2py.dev import prometheus as prom
from tests.conftest import PORT_OFFSET, own_cluster
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.kafkautil import create_topic, produce

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(prom.binaries() is None, reason="prometheus not installed (make prometheus)")]

STALL_CLUSTER_PORT = 31593 + PORT_OFFSET  # a single-broker target of our own (controller on +1)
# a source of our own: the shared clusters' 'heartbeats' topics hold other tests' old beats, whose lag
# would fire LagHigh and keep some panels from settling
SOURCE_CLUSTER_PORT = 31793 + PORT_OFFSET
TARGET_CLUSTER_PORT = 31893 + PORT_OFFSET  # and a target of its own: other tests' topics stay out of the panels
PROMETHEUS_PORTS = (31693 + PORT_OFFSET, 31697 + PORT_OFFSET)
METRICS_PORTS = (31695 + PORT_OFFSET, 31699 + PORT_OFFSET)
AUDIT_SECONDS = 5
FLOW_STALLED_FOR = 15  # FlowStalled's for: in the live test; promtool checks the shipped 2m on real scrapes

# Strimzi's "Strimzi Kafka Mirror Maker 2" dashboard (strimzi-kafka-operator,
# packaging/examples/metrics/grafana-dashboards/strimzi-kafka-mirror-maker-2.json, the one
# published on grafana.com as 23706), read from its JSON: (panel title, its queries as written).
# The JSON itself is not copied here.
K = 'strimzi_io_kind=~"KafkaMirrorMaker2",strimzi_io_cluster="$strimzi_mirror_maker_cluster_name"'
SRC = "kafka_connect_mirror_mirrorsourceconnector_"
CKPT = "kafka_connect_mirror_mirrorcheckpointconnector_"
COMMIT = 'kafka_connect_connector_task_offset_commit_avg_time_ms{connector=~"\\".*SourceConnector\\"", task=~"[0-9]+"}'
LAG = f'kafka_consumer_fetch_manager_records_lag{{{K},clientid!~"consumer-mirrormaker2-.*"}}'
STRIMZI_PANELS: list[tuple[str, list[str]]] = [
    ("Number of Connectors", [f"sum(kafka_connect_worker_connector_count{{{K}}})"]),
    ("Total record rate", [f"sum({SRC}record_rate{{{K}}})"]),
    ("Incoming bytes", [f"sum(rate(kafka_consumer_incoming_byte_total{{{K}}}[1m]))"]),
    ("Outgoing bytes", [f"sum(rate(kafka_producer_outgoing_byte_total{{{K}}}[1m]))"]),
    ("Number of Tasks", [f"sum(kafka_connect_worker_task_count{{{K}}})"]),
    ("Total byte rate", [f"sum({SRC}byte_rate{{{K}}})"]),
    ("CPU Usage", ['sum(rate(container_cpu_usage_seconds_total{namespace="$kubernetes_namespace",'
                   'pod=~"$strimzi_mirror_maker_cluster_name-mirrormaker2-.+",'
                   'container="$strimzi_mirror_maker_cluster_name-mirrormaker2"}[5m])) by (pod)']),
    ("JVM Memory", [f"sum without(area)(jvm_memory_bytes_used{{{K}}})"]),
    ("Time spent in GC", [f"sum without(gc)(rate(jvm_gc_collection_seconds_sum{{{K}}}[5m]))"]),
    ("Source Connector - Connect Outstanding Messages Queue",
     ['sum(kafka_connect_source_task_source_record_active_count{connector=~"\\".*SourceConnector\\""})']),
    ("Source Connector - Producer Available Buffer",
     ['sum(kafka_producer_buffer_available_bytes{clientid=~"\\".*SourceConnector-[0-9]+\\""})']),
    ("Source Connector - Average Offset Commit Time", [f"sum({COMMIT})/count({COMMIT})"]),
    ("Record Age", [f"sum({SRC}record_age_ms{s}{{{K}}}) by (partition, topic)" for s in ("", "_avg", "_min", "_max")]),
    ("Replication Latency", [f"sum({SRC}replication_latency_ms{s}{{{K}}}) by (partition, topic)"
                             for s in ("", "_avg", "_min", "_max")]),
    ("Offset Synchronization Latency", [f"sum({CKPT}checkpoint_latency_ms{s}{{{K}}}) by (source, target)"
                                        for s in ("", "_avg", "_min", "_max")]),
    ("Consumer Lag", [f"sum({LAG}) by (topic, partition)"]),
    ("Consumer Lag (table)", [f"sum({LAG}) by (partition, topic)"]),
]
# the template variables query kafka_connect_worker_connector_count{strimzi_io_kind="KafkaMirrorMaker2"}
# for the namespace and strimzi_io_cluster labels, which Kubernetes' scrape configuration adds
EMPTY = {
    "CPU Usage": "cAdvisor's container metric, served by the kubelet and not by any replicator; on Kubernetes it "
                 "shows mm2py's pod as it shows MM2's (process_cpu_seconds_total is served)",
    "JVM Memory": "a JVM collector metric; mm2py copies in Python (process_resident_memory_bytes is served)",
    "Time spent in GC": "a JVM collector metric; mm2py copies in Python",
    "Source Connector - Connect Outstanding Messages Queue": "Connect's records polled but not yet acknowledged; "
                                                             "mm2py's micro-batches are acknowledged before they count",
    "Source Connector - Producer Available Buffer": "no buffering producer: raw batches go from the fetch "
                                                    "response to the produce request",
}


def adjust(expr: str) -> str:
    """The label filters an operator adjusts on import: Kubernetes' labels off, Connect's quoted names unquoted."""
    expr = re.sub(r'(strimzi_io_\w+|namespace|pod|container)=~?"[^"]*",?\s*', "", expr)
    expr = expr.replace('"\\".*SourceConnector\\""', '".*SourceConnector"')
    expr = expr.replace('"\\".*SourceConnector-[0-9]+\\""', '".*SourceConnector-[0-9]+"')
    return re.sub(r",\s*}", "}", expr).replace("{}", "")


def grouping(expr: str) -> set[str]:
    found = re.search(r"by \(([^)]*)\)\s*$", expr)
    return {label.strip() for label in found.group(1).split(",")} if found else set()


class Traffic:
    """Records into ``topic`` (both partitions) every 0.1 s, and commits of ``group`` following them."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        self.topic, self.group = topic, group
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0,
                                  "message.timeout.ms": 600000})
        self.committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                   "log_level": 0})
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        tick = 0
        while not self._stop.is_set():
            for p in (0, 1):
                self.producer.produce(self.topic, value=b"v%d" % self.sent, partition=p)
                self.sent += 1
            self.producer.poll(0)
            tick += 1
            if tick % 20 == 0:
                with contextlib.suppress(Exception):  # the source may be restarting; the next commit follows
                    self.committer.commit(offsets=[TopicPartition(self.topic, p, 100 + tick // 20) for p in (0, 1)],
                                          asynchronous=False)
            self._stop.wait(0.1)

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.producer.flush(30)
        self.committer.close()


def config(tmp_path: Path, source: str, target: str, topic: str, group: str, metrics_port: int, **extra: str) -> Path:
    path = tmp_path / "mm2.properties"
    flow = {"topics": topic, "groups": group, "trigger.interval.ms": "200", "emit.checkpoints.interval.seconds": "2",
            "refresh.groups.interval.seconds": "5",
            "refresh.topics.interval.seconds": "5", "admin.timeout.ms": "10000", **extra}
    path.write_text(properties({"A": source, "B": target}, {"A->B": flow},
                               f"metrics.port = {metrics_port}\nmetrics.bind.address = 127.0.0.1\n"
                               f"audit.interval.seconds = {AUDIT_SECONDS}\n"))
    return path


def value(prometheus: prom.LocalPrometheus, expr: str) -> float | None:
    result = prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


def firing(prometheus: prom.LocalPrometheus, alert: str, state: str = "firing") -> list[dict]:
    return [a for a in prometheus.alerts() if a["labels"].get("alertname") == alert and a["state"] == state]


def run_promtool(scrapes: list[tuple[str, str, float, bool, dict]], tmp_path: Path) -> None:
    """One promtool test per (name, scrape text, scrape time, frozen, {alert: expected labels}).

    A live scrape is checked for every alert (only the expected ones fire); a frozen one, whose ages
    grow, for the expected alerts and FlowFailed (quiet).
    """
    tests = []
    for name, text, at, frozen, expect in scrapes:
        checks = []
        for alert in prom.rules_by_alert():
            if frozen and alert not in expect and alert != "FlowFailed":
                continue
            labels = expect.get(alert)
            checks.append({"eval_time": "15m", "alertname": alert,
                           "exp_alerts": [prom.expected_alert(alert, labels)] if labels else []})
            wait = prom.rules_by_alert()[alert].get("for", "0m")
            if labels and frozen and wait.endswith("m") and int(wait[:-1]) > 1:
                # the shipped for: holds the alert back while the condition is younger than it
                checks.append({"eval_time": f"{int(wait[:-1]) - 1}m", "alertname": alert, "exp_alerts": []})
        tests.append({"name": name, "interval": "1m", "alert_rule_test": checks,
                      "input_series": prom.promtool_series(text, steps=20, frozen=frozen, at=at)})
    result = prom.run_promtool_tests(tests, tmp_path / "promtool")
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_scrapes_mm2py_dashboards_strimzi_panels_healthy_rules_and_audit(
        prom_source, prom_target, unique_name, tmp_path):
    cluster_a, cluster_b = prom_source, prom_target
    topic, group, remote = f"{unique_name}-t", f"{unique_name}-g", f"A.{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 2)
    # six minutes of history, 50 records per minute and partition, one produce call per minute so
    # that no batch spans two minutes: offsets 0-49 are the first minute, 50-99 the second ...
    minute = int(time.time() // 60 * 60 * 1000)
    for k in range(6):
        for p in (0, 1):
            produce(cluster_a.bootstrap, topic, [(None, b"old", None, minute - (6 - k) * 60_000 + 1000)] * 50,
                    partition=p)
    metrics_port, prometheus_port = METRICS_PORTS[0], PROMETHEUS_PORTS[0]
    rep = Replicator(config(tmp_path, cluster_a.bootstrap, cluster_b.bootstrap, topic, group, metrics_port),
                     tmp_path / "replicator.log").start()
    server = prom.LocalPrometheus(tmp_path / "prometheus", prometheus_port, [f"127.0.0.1:{metrics_port}"])
    traffic = Traffic(cluster_a.bootstrap, topic, group)
    started = time.monotonic()
    try:
        server.start()
        wait_for(lambda: value(server, f'sum({SRC}record_count{{topic="{remote}"}})') == 600, 180,
                 "the history mirrored, seen by Prometheus", rep)
        traffic.start()
        # everything every panel needs: checkpoints (freshness refreshes every 30 s), audit, a minute of
        # fresh latency samples after the old records' ones aged out of the 60 s window
        needed = [f"{CKPT}checkpoint_latency_ms", "mm2py_checkpoint_age_seconds", "mm2py_audit_source_records",
                  "mm2py_heartbeat_age_seconds", "mm2py_lag_seconds"]
        absent: list[str] = []

        def served() -> bool:
            absent[:] = [n for n in needed if not server.query(n)]
            return not absent
        try:
            wait_for(served, 180, "series of every panel", rep)
        except AssertionError as e:
            raise AssertionError(f"never served: {absent}") from e
        wait_for(lambda: (v := value(server, f'max(mm2py_replication_latency_ms{{quantile="0.99",topic="{remote}"}})'))
                 is not None and v < 30_000, 180, "p99 latency under 30 s (fresh records)", rep)

        dashboard = prom.dashboard_queries(variables={"source": ".*", "target": ".*", "job": ".*"})
        empty = [(title, expr) for title, expr in dashboard if not server.query(expr)]
        assert not empty, f"dashboard panels without data: {empty}"

        report, missing = [], []
        for title, exprs in STRIMZI_PANELS:
            results = [server.query(adjust(e)) for e in exprs]
            has_data = all(results)
            labels_ok = all(all(r["metric"].get(label) for r in res for label in grouping(e))
                            for e, res in zip(exprs, results, strict=True))
            if title in EMPTY:
                assert not has_data, f"{title}: expected empty, got {results}"
                report.append(f"  empty   {title}: {EMPTY[title]}")
            else:
                if not (has_data and labels_ok):
                    missing.append((title, [adjust(e) for e in exprs], results))
                report.append(f"  data    {title}")
        print("\nStrimzi's MirrorMaker 2 dashboard on a live mm2py (label filters adjusted):\n" + "\n".join(report))
        assert not missing, missing

        text, at = prom.scrape(f"http://127.0.0.1:{metrics_port}/metrics"), time.time()
        run_promtool([("healthy replicator, real scrape", text, at, False, {})], tmp_path)
        assert not [a for a in server.alerts() if a["state"] == "firing"], server.alerts()

        # the audit: DeleteRecords behind mm2py's back on the target's partition 0, and on both sides of
        # partition 1 (as retention would): 70 records missing (the oldest source minute is not audited)
        admin_a, admin_b = AdminClient({"bootstrap.servers": cluster_a.bootstrap}), AdminClient(
            {"bootstrap.servers": cluster_b.bootstrap})
        audit_at = value(server, 'max(mm2py_audit_timestamp_seconds{source="A",target="B"})')
        # (the source side first, as retention runs: a round between the two deletions sees the target
        # holding more, which a single round does not report; the other order would be a real gap)
        for future in admin_a.delete_records([TopicPartition(topic, 1, 120)]).values():
            future.result(30)
        for future in admin_b.delete_records([TopicPartition(remote, 0, 120), TopicPartition(remote, 1, 120)]).values():
            future.result(30)
        deleted = time.monotonic()
        missing = [f'mm2py_audit_missing_records{{topic="{remote}",partition="{p}"}}' for p in (0, 1)]
        wait_for(lambda: value(server, missing[0]) == 70, 3 * AUDIT_SECONDS + 10, "the audit sees 70 missing", rep)
        found_in = time.monotonic() - deleted
        # a round may have scanned partition 1's source before and its target after the deletions;
        # the next round, reading both from their new log starts, must find nothing missing there
        wait_for(lambda: value(server, missing[1]) == 0 and value(server, missing[0]) == 70, 2 * AUDIT_SECONDS + 10,
                 "partition 1, cut on both sides, has nothing missing", rep)
        assert value(server, f'sum(mm2py_audit_duplicate_records{{topic="{remote}"}})') == 0
        assert (value(server, 'max(mm2py_audit_timestamp_seconds{source="A",target="B"})') or 0) > (audit_at or 0)
        wait_for(lambda: firing(server, "RecordsMissing", "pending"), 30, "RecordsMissing pending", rep)
        print(f"audit: 70 missing records found {found_in:.1f} s after DeleteRecords (interval {AUDIT_SECONDS} s); "
              f"test took {time.monotonic() - started:.0f} s")
        assert "records on the source are missing on the target" in (tmp_path / "replicator.log").read_text()
    finally:
        rc = rep.stop()  # first: a clean-up error after it leaves no replicator running
        traffic.stop()
        server.stop()
    assert rc == 0, rep.tail()


def rules_with_for(tmp_path: Path, alert: str, duration: str) -> Path:
    """The shipped rules with ``alert``'s ``for:`` set to ``duration`` (its expression unchanged)."""
    doc = yaml.safe_load(prom.RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == alert]
    assert len(rules) == 1, f"{alert} not in {prom.RULES}"
    rules[0]["for"] = duration
    path = tmp_path / "mm2py-rules.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def prom_source(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    with own_cluster("prom-source-a", SOURCE_CLUSTER_PORT, cluster_workdir) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def prom_target(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    with own_cluster("prom-target-b", TARGET_CLUSTER_PORT, cluster_workdir) as cluster:
        yield cluster


@pytest.fixture
def stall_target(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    with own_cluster("prom-stall-b", STALL_CLUSTER_PORT, cluster_workdir) as cluster:
        yield cluster


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
@pytest.mark.long  # tests/lanes.py: minutes waiting on an outage and an alert's for: period
def test_flow_stalled_fires_in_prometheus_when_the_target_stops_and_clears_when_it_returns(
        prom_source, stall_target, cluster_workdir, unique_name, tmp_path):
    cluster_a = prom_source
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    create_topic(cluster_a.bootstrap, topic, 2)
    metrics_port, prometheus_port = METRICS_PORTS[1], PROMETHEUS_PORTS[1]
    rep = Replicator(config(tmp_path, cluster_a.bootstrap, stall_target.bootstrap, topic, group, metrics_port),
                     tmp_path / "replicator.log").start()
    server = prom.LocalPrometheus(tmp_path / "prometheus", prometheus_port, [f"127.0.0.1:{metrics_port}"],
                                  rules=rules_with_for(tmp_path, "FlowStalled", f"{FLOW_STALLED_FOR}s"))
    traffic = Traffic(cluster_a.bootstrap, topic, group)
    stalled = 'max(mm2py_flow_state{source="A",target="B",state="stalled"})'
    try:
        server.start()
        traffic.start()
        wait_for(lambda: (value(server, f'sum({SRC}record_count{{source="A",target="B"}})') or 0) > 100, 180,
                 "the flow mirrors, seen by Prometheus", rep)
        wait_for(lambda: server.query("mm2py_heartbeat_age_seconds"), 60, "heartbeat age served", rep)
        healthy, healthy_at = prom.scrape(f"http://127.0.0.1:{metrics_port}/metrics"), time.time()

        devcluster.kill_cluster_hard(stall_target.name, cluster_workdir)
        killed = time.monotonic()
        wait_for(lambda: value(server, stalled) == 1, 180, "Prometheus sees the flow stalled", rep)
        seen_stalled = time.monotonic()
        wait_for(lambda: firing(server, "FlowStalled"), FLOW_STALLED_FOR + 30, "FlowStalled firing", rep)
        fired = time.monotonic()
        alert = firing(server, "FlowStalled")[0]
        assert (alert["labels"]["source"], alert["labels"]["target"], alert["labels"]["severity"]) == ("A", "B",
                                                                                                      "warning")
        stalled_text, stalled_at = prom.scrape(f"http://127.0.0.1:{metrics_port}/metrics"), time.time()

        devcluster.start_cluster(stall_target.name, STALL_CLUSTER_PORT, workdir=cluster_workdir)
        back = time.monotonic()
        wait_for(lambda: not firing(server, "FlowStalled") and not firing(server, "FlowStalled", "pending"), 180,
                 "FlowStalled cleared", rep)
        cleared = time.monotonic()
        assert value(server, 'max(mm2py_flow_state{source="A",target="B",state="running"})') == 1
        print(f"\nFlowStalled: stalled {seen_stalled - killed:.0f} s after the kill, firing "
              f"{fired - seen_stalled:.0f} s later (for: {FLOW_STALLED_FOR} s), cleared {cleared - back:.0f} s "
              "after the cluster returned")
        assert fired - seen_stalled <= FLOW_STALLED_FOR + 20

        ab = {"source": "A", "target": "B"}
        run_promtool([("healthy, real scrape", healthy, healthy_at, False, {}),
                      ("stalled, real scrape", stalled_text, stalled_at, True, {"FlowStalled": ab})], tmp_path)
    finally:
        rc = rep.stop()  # first: a clean-up error after it leaves no replicator running
        traffic.stop()
        server.stop()
    assert rc == 0, rep.tail()
