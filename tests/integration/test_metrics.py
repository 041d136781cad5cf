"""Issue 5: the metrics endpoint of a running replicator, scraped over HTTP."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.kafkautil import create_topic, produce

pytestmark = pytest.mark.integration
P = "kafka_connect_mirror_mirrorsourceconnector_"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def total(metrics: dict, name: str, topic: str, **labels: str) -> float:
    return sum(v for (n, ls), v in metrics.items()
               if n == name and ("topic", topic) in ls and all((k, v2) in ls for k, v2 in labels.items()))


def test_metrics_endpoint_counts_latency_lag_and_heartbeats(cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 2)
    port = free_port()
    config = tmp_path / "mm2.properties"
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}},
                                 f"metrics.port = {port}\nemit.checkpoints.enabled = false\n"))
    rep = Replicator(config, tmp_path / "replicator.log").start()
    try:
        wait_for(lambda: scrape(port), 120, "metrics endpoint up", rep)
        produce(cluster_a.bootstrap, topic, [(b"k%d" % i, b"v" * 100, None, None) for i in range(300)])
        remote = f"A.{topic}"  # MM2 tags its metrics with the remote topic
        wait_for(lambda: total(scrape(port), P + "record_count", remote) == 300, 120, "300 records counted", rep)
        got = scrape(port)
        assert total(got, P + "byte_count", remote) > 300 * 100
        assert total(got, "mm2py_replication_latency_ms", remote, quantile="0.99") > 0
        assert total(got, P + "record_age_ms_max", remote) >= 0
        wait_for(lambda: (m := scrape(port)) and any(n == "mm2py_lag_records" and ("topic", remote) in ls
                                                     for n, ls in m) and total(m, "mm2py_lag_records", remote) == 0,
                 60, "lag refreshed to 0 after catch-up", rep)
        wait_for(lambda: any(n == "mm2py_heartbeat_age_seconds" and ("source", "A") in ls and v < 30
                             for (n, ls), v in scrape(port).items()), 60, "heartbeat age on A->B", rep)
    finally:
        assert rep.stop() == 0, rep.tail()
