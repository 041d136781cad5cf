"""Issue 19: client settings reach the raw fetch and produce connections of the copy path as MM2 routes them.

The source is a SASL cluster whose cluster-wide credential (``A.sasl.jaas.config``) is wrong on
purpose: every client of the flow works only if it takes the credential of its own kind
(``A.consumer.``, ``A.admin.``, ``A.producer.``), the raw fetch connection included. Then, on
the copy path itself, ``A.consumer.max.partition.fetch.bytes`` bounds what each fetch returns
and ``A->B.producer.override.client.id`` is the id the target broker applies its quota to.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest

from mm2py import worker
from mm2py.config import load_text
from mm2py.config.model import FlowConfig
from mm2py.dev import cluster as devcluster
from mm2py.errors import KafkaError
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.task import CopySpec, TaskRun, copy_ranges
from mm2py.source.ranges import PartitionRange
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import SINGLE_BROKER, mirror_once
from tests.kafkautil import consume_all, create_topic, produce

pytestmark = pytest.mark.integration

SASL_PORT = 31340 + PORT_OFFSET  # controller on +1
READER, READER_PASSWORD = "reader", "reader-secret"


def jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" password="{password}";'


@pytest.fixture(scope="module")
def sasl_source(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    try:
        yield devcluster.start_cluster("cs-sasl", SASL_PORT, workdir=cluster_workdir,
                                       listeners_security="SASL_PLAINTEXT", sasl_users={READER: READER_PASSWORD})
    finally:
        with contextlib.suppress(Exception):
            devcluster.stop_cluster("cs-sasl", cluster_workdir)


def file_text(source: devcluster.DevCluster, target: devcluster.DevCluster, topic: str, extra: str = "",
              reader_password: str = READER_PASSWORD) -> str:
    admin = jaas(devcluster.ADMIN_USER, devcluster.ADMIN_PASSWORD)
    return (f"clusters = A, B\nA.bootstrap.servers = {source.bootstrap}\nB.bootstrap.servers = {target.bootstrap}\n"
            "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n"
            f"A.sasl.jaas.config = {jaas(devcluster.ADMIN_USER, 'not-the-password')}\n"
            f"A.admin.sasl.jaas.config = {admin}\nA.producer.sasl.jaas.config = {admin}\n"
            f"A.consumer.sasl.jaas.config = {jaas(READER, reader_password)}\n"
            f"A->B.enabled = true\nA->B.topics = {topic}\n" + extra + SINGLE_BROKER)


def small_batches(source: devcluster.DevCluster, topic: str, batches: int, per_batch: int = 10) -> None:
    """``batches`` separate record batches of about 1 KiB each on partition 0."""
    for b in range(batches):
        produce(source.bootstrap, topic, [(b"k", b"%04d-%03d-" % (b, i) + b"x" * 90, None, None)
                                          for i in range(per_batch)], partition=0, client=source.rdkafka_config())


def test_a_credential_only_under_the_consumer_prefix_reaches_the_raw_fetch(spark, sasl_source, cluster_b,
                                                                           unique_name, tmp_path):
    topic = unique_name
    create_topic(sasl_source.bootstrap, topic, 1, client=sasl_source.rdkafka_config())
    small_batches(sasl_source, topic, 5)
    text = file_text(sasl_source, cluster_b, topic)
    flow = load_text(text).enabled_flows[0]
    assert "reader" in flow.source.consumer["sasl.jaas.config"] and "reader" not in flow.source.client.get(
        "sasl.jaas.config", "")
    mirror_once(spark, text, tmp_path)
    assert sum(len(p) for p in consume_all(cluster_b.bootstrap, f"A.{topic}").values()) == 50

    # more to copy, and the same file with a wrong password under A.consumer. only: the fetch is refused
    small_batches(sasl_source, topic, 1)
    # (kafka-python's bootstrap retries a refused SASL login until it times out: no AuthenticationError)
    with pytest.raises(KafkaError) as err:
        mirror_once(spark, file_text(sasl_source, cluster_b, topic, "admin.timeout.ms = 8000\n",
                                     reader_password="wrong"), tmp_path / "wrong", timeout=120)
    assert "cluster=A" in str(err.value) and "refused the SASL login of this client (consumer" in str(err.value)
    assert sum(len(p) for p in consume_all(cluster_b.bootstrap, f"A.{topic}").values()) == 50


def copy(flow: FlowConfig, topic: str, end: int, client_id: str) -> None:
    ranges = [PartitionRange(topic, 0, 0, end, f"A.{topic}")]
    [result] = copy_ranges(CopySpec(flow.source, flow.target, CopySettings.for_flow(flow)), ranges, TaskRun(client_id))
    assert result.next_offset == end


def test_max_partition_fetch_bytes_bounds_each_raw_fetch(sasl_source, cluster_b, unique_name, monkeypatch):
    topic = unique_name
    create_topic(sasl_source.bootstrap, topic, 1, client=sasl_source.rdkafka_config())
    create_topic(cluster_b.bootstrap, f"A.{topic}", 1)
    small_batches(sasl_source, topic, 30)  # about 30 KiB in 30 batches
    sizes: list[int] = []
    fetched = RawClient.fetched

    def spy(self: RawClient, response: object) -> dict:
        out = fetched(self, response)
        sizes.extend(len(p.records) for tp, p in out.items() if tp[0] == topic and len(p.records))
        return out

    monkeypatch.setattr(RawClient, "fetched", spy)
    copy(load_text(file_text(sasl_source, cluster_b, topic)).enabled_flows[0], topic, 300, "cs-fetch-default")
    assert max(sizes) > 20_000, f"without the setting one fetch brings (nearly) everything: {sizes}"
    sizes.clear()
    text = file_text(sasl_source, cluster_b, topic, "A.consumer.max.partition.fetch.bytes = 2048\n")
    copy(load_text(text).enabled_flows[0], topic, 300, "cs-fetch-bounded")
    assert max(sizes) <= 2048 and len(sizes) >= 15, f"each fetch is bounded by the setting: {sizes}"


def set_producer_quota(cluster: devcluster.DevCluster, client_id: str, rate: float | None) -> None:
    """A produce byte-rate quota for ``client_id`` on ``cluster`` (None: removed)."""
    request = AlterClientQuotasRequest[0]
    entry = request.EntryData(
        entity=[request.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[request.EntryData.OpData(key="producer_byte_rate", value=rate or 0.0, remove=rate is None)])
    client = RawClient(load_text(f"clusters = B\nB.bootstrap.servers = {cluster.bootstrap}\n").clusters["B"],
                       client_id="cs-quota-admin", role="admin")
    try:
        response = client.wait(client._send(client.any_node(), request(entries=[entry], validate_only=False)))
        assert all(e.error_code == 0 for e in response.entries), response
    finally:
        client.close()


def test_the_data_producer_s_client_id_is_the_one_the_target_broker_sees(sasl_source, cluster_b, unique_name,
                                                                         monkeypatch):
    topic = unique_name
    client_id = f"cs-quota-{unique_name}"
    create_topic(sasl_source.bootstrap, topic, 1, client=sasl_source.rdkafka_config())
    create_topic(cluster_b.bootstrap, f"A.{topic}", 1)
    small_batches(sasl_source, topic, 60)  # about 60 KiB: above a 4 KiB/s quota over Kafka's 10 s window
    throttled: list[int] = []
    produced = RawClient.produced

    def spy(response: object) -> dict:
        throttled.append(response.throttle_time_ms)  # type: ignore[attr-defined]
        return produced(response)

    monkeypatch.setattr(RawClient, "produced", staticmethod(spy))
    set_producer_quota(cluster_b, client_id, 4096)
    try:
        time.sleep(1)  # the quota travels through the controller's metadata
        text = file_text(sasl_source, cluster_b, topic, f"A->B.producer.override.client.id = {client_id}\n")
        flow = load_text(text).enabled_flows[0]
        assert flow.target.producer["client.id"] == client_id
        copy(flow, topic, 600, "cs-quota-default")
        assert max(throttled) > 0, f"the broker throttles the quota's client id: {throttled}"
        worker_clients = [c for c in worker._kept.values() if c.client_id == client_id]
        assert worker_clients, "the raw produce connection was made with the flow's client.id"
    finally:
        set_producer_quota(cluster_b, client_id, None)
    throttled.clear()
    create_topic(cluster_b.bootstrap, f"A.{topic}-2", 1)
    ranges = [PartitionRange(topic, 0, 0, 600, f"A.{topic}-2")]
    flow = load_text(file_text(sasl_source, cluster_b, topic)).enabled_flows[0]
    copy_ranges(CopySpec(flow.source, flow.target, CopySettings.for_flow(flow)), ranges,
                TaskRun("cs-quota-unlimited"))
    assert max(throttled) == 0, "without the setting mm2py's own id, which has no quota"
