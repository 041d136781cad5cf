"""Issue 5, item 6: per-cluster security settings reach every client of a flow.

A SASL_PLAINTEXT source and an SSL target (a throw-away self-signed CA made by the dev-cluster
fixture, in PEM): the data copy (raw fetch and produce), the planner's admin client, the offset
syncs written to the source and the checkpoints written to the target all use the
``{alias}.security.protocol``, ``sasl.*`` and ``ssl.*`` settings of the file, and nothing else
(the clusters have no plaintext listener to fall back to).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2py.checkpoint.task import load_checkpoints, run_checkpoints
from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.errors import AuthenticationError
from mm2py.heartbeat.emitter import emit_heartbeat
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import SINGLE_BROKER, mirror_once
from tests.kafkautil import TS0, commit_offsets, consume_all, create_topic, produce

pytestmark = pytest.mark.integration

# below the kernel's ephemeral range (32768+), so no client connection can hold them at start-up
SASL_PORT, SSL_PORT = 31800 + PORT_OFFSET, 31900 + PORT_OFFSET


@pytest.fixture(scope="module")
def secure_clusters(cluster_workdir: Path) -> Iterator[tuple[devcluster.DevCluster, devcluster.DevCluster]]:
    try:
        sasl = devcluster.start_cluster("sec-sasl", SASL_PORT, workdir=cluster_workdir,
                                        listeners_security="SASL_PLAINTEXT")
        ssl = devcluster.start_cluster("sec-ssl", SSL_PORT, workdir=cluster_workdir, listeners_security="SSL")
        yield sasl, ssl
    finally:
        for name in ("sec-sasl", "sec-ssl"):
            with contextlib.suppress(Exception):
                devcluster.stop_cluster(name, cluster_workdir)


def file_text(sasl: devcluster.DevCluster, ssl: devcluster.DevCluster, flow_keys: str) -> str:
    lines = ["clusters = A, B", f"A.bootstrap.servers = {sasl.bootstrap}", f"B.bootstrap.servers = {ssl.bootstrap}"]
    lines += [f"{alias}.{k} = {v}" for alias, c in (("A", sasl), ("B", ssl)) for k, v in c.client_properties.items()]
    return "\n".join(lines) + "\n" + flow_keys + SINGLE_BROKER


def test_sasl_source_to_ssl_target_data_syncs_and_checkpoints(spark, secure_clusters, unique_name, tmp_path):
    sasl, ssl = secure_clusters
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    src_client, dst_client = sasl.rdkafka_config(), ssl.rdkafka_config()
    create_topic(sasl.bootstrap, topic, 2, client=src_client)
    records = [(b"k%d" % i, b"v%d" % i, [("h", b"1")], TS0 + i) for i in range(200)]
    produce(sasl.bootstrap, topic, records, client=src_client)
    commit_offsets(sasl.bootstrap, group, {(topic, 0): 60, (topic, 1): 40}, client=src_client)

    text = file_text(sasl, ssl, f"A->B.enabled = true\nA->B.topics = {topic}\nA->B.groups = {group}\n")
    assert "A.security.protocol = SASL_PLAINTEXT" in text and "B.security.protocol = SSL" in text
    assert "B.ssl.truststore.location" in text and "A.sasl.jaas.config" in text
    mirror_once(spark, text, tmp_path)

    mirrored = consume_all(ssl.bootstrap, f"A.{topic}", client=dst_client)
    assert sorted((r.key, r.value, r.headers, r.timestamp) for p in mirrored.values() for r in p) == sorted(
        (k, v, tuple(h), ts) for k, v, h, ts in records), "every record once, every field kept"
    syncs = consume_all(sasl.bootstrap, "mm2-offset-syncs.B.internal", client=src_client)
    assert any(topic.encode() in r.key for p in syncs.values() for r in p), "offset syncs written to the source"

    flow = load_text(text).enabled_flows[0]
    report = run_checkpoints(flow)
    assert report.groups == 1
    checkpoints = load_checkpoints(flow)  # read back from the SSL target
    got = {(t, p): (cp.upstream_offset, cp.downstream_offset) for (g, t, p), cp in checkpoints.items() if g == group}
    # the remote topic started empty, so offsets map one to one
    assert got == {(f"A.{topic}", 0): (60, 60), (f"A.{topic}", 1): (40, 40)}
    on_target = consume_all(ssl.bootstrap, "A.checkpoints.internal", client=dst_client)
    assert sum(len(p) for p in on_target.values()) >= 2, "checkpoints written to the SSL target"

    beat = emit_heartbeat(flow, now_ms=1_700_000_123_000)
    beats = consume_all(ssl.bootstrap, "heartbeats", client=dst_client)
    assert any(r.timestamp == beat.timestamp for p in beats.values() for r in p), "heartbeat on the SSL target"


def test_ssl_source_to_sasl_target_with_syncs_on_target(spark, secure_clusters, unique_name, tmp_path):
    sasl, ssl = secure_clusters
    topic = f"{unique_name}-t"
    create_topic(ssl.bootstrap, topic, 1, client=ssl.rdkafka_config())
    produce(ssl.bootstrap, topic, [(None, b"v%d" % i, None, None) for i in range(50)], client=ssl.rdkafka_config())
    # the same two clusters the other way round: B (SSL) -> A (SASL), offset syncs kept on the target
    text = file_text(sasl, ssl, f"B->A.enabled = true\nB->A.topics = {topic}\n"
                                "B->A.offset-syncs.topic.location = target\n")
    mirror_once(spark, text, tmp_path)
    got = consume_all(sasl.bootstrap, f"B.{topic}", client=sasl.rdkafka_config())
    assert [r.value for r in got[0]] == [b"v%d" % i for i in range(50)]
    syncs = consume_all(sasl.bootstrap, "mm2-offset-syncs.B.internal", client=sasl.rdkafka_config())
    assert any(topic.encode() in r.key for p in syncs.values() for r in p), "offset syncs written to the target"


def test_ssl_without_the_ca_is_refused_naming_the_cluster(spark, secure_clusters, unique_name, tmp_path):
    sasl, ssl = secure_clusters
    text = file_text(sasl, ssl, f"A->B.enabled = true\nA->B.topics = {unique_name}\nadmin.timeout.ms = 8000\n")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("B.ssl.truststore")) + "\n"
    with pytest.raises(AuthenticationError) as err:
        mirror_once(spark, text, tmp_path, timeout=120)
    message = str(err.value)
    assert "authentication failed" in message and "certificate verify failed" in message, message
    assert "cluster=B" in message and "ssl" in message
