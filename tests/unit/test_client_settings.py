"""Client settings reach the clients MM2 4.3 gives them to (mm2py.config.clients), and mm2py's clients take them.

One test per rule of the precedence table, one per setting the raw copy path passes on, one per
producer setting it cannot apply (named in the start-up warning), and the refusals.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping

import pytest
from kafka.future import Future
from structlog.testing import capture_logs

from mm2py.config import clients as cc
from mm2py.config import load_text
from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.config.rdkafka_keys import RDKAFKA_CONSUMER, RDKAFKA_PRODUCER
from mm2py.errors import ConfigError
from mm2py.flow_policy import offset_syncs_location
from mm2py.kafka.clientconf import kafka_python_config, rdkafka_config
from mm2py.kafka.wire import RawClient, TopicIds, settings_of
from mm2py.source.copy.copy_settings import MAX_IN_FLIGHT_PER_PARTITION, CopySettings

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="{}" password="p";'


def flow(text: str, name: str = "A->B") -> FlowConfig:
    return next(f for f in load_text(BASE + text).flows if f.name == name)


def warned(text: str) -> dict[str, str]:
    """The start-up warning's settings (key -> why), {} when there is none."""
    with capture_logs() as logs:
        load_text(BASE + text)
    found = [e for e in logs if e["log_level"] == "warning" and "settings" in e]
    assert len(found) <= 1, "one warning for all client settings"
    return found[0]["settings"] if found else {}


def refused(text: str) -> dict[str | None, str]:
    with pytest.raises(ConfigError) as err:
        load_text(BASE + text)
    return {p.key: p.message for p in err.value.problems}


# -- precedence (the module's table) -------------------------------------------------------------


def test_replication_consumer_layers_weakest_first():
    layers = [("A.max.poll.records", "1"),  # a non-security cluster key: the worker's clients only
              ("A->B.consumer.fetch.min.bytes", "2"), ("A.consumer.fetch.min.bytes", "3"),
              ("A->B.source.consumer.fetch.min.bytes", "4")]
    text = ""
    for depth, (key, value) in enumerate(layers):
        text += f"{key} = {value}\n"
        consumer = flow(text).source.consumer
        if depth == 0:
            assert "max.poll.records" not in consumer and "fetch.min.bytes" not in consumer
        else:
            assert consumer["fetch.min.bytes"] == value, f"{key} beats the layers before it"


def test_a_cluster_typed_setting_beats_the_flow_s_and_the_flow_s_source_prefix_beats_both():
    f = flow("A->B.consumer.fetch.max.bytes = 1\nA.consumer.fetch.max.bytes = 2\nB->A.consumer.fetch.max.bytes = 3\n")
    assert f.source.consumer["fetch.max.bytes"] == "2", "MM2: A.consumer.* is source.consumer.*, read last"
    assert flow("A->B.consumer.fetch.max.bytes = 1\n").source.consumer["fetch.max.bytes"] == "1"
    assert "fetch.max.bytes" not in flow("B->A.consumer.fetch.max.bytes = 3\n").source.consumer


def test_security_settings_fill_each_client_type_cluster_first_then_top_level():
    f = flow("security.protocol = SSL\nsasl.mechanism = PLAIN\nA.security.protocol = SASL_PLAINTEXT\n"
             "A.consumer.sasl.mechanism = SCRAM-SHA-256\nA->B.consumer.ssl.key.password = flow\n"
             "ssl.key.password = top\n")
    consumer, admin = f.source.consumer, f.source.admin
    assert consumer["security.protocol"] == "SASL_PLAINTEXT" and admin["security.protocol"] == "SASL_PLAINTEXT"
    assert consumer["sasl.mechanism"] == "SCRAM-SHA-256" and admin["sasl.mechanism"] == "PLAIN"
    # MM2's quirk, kept: top-level <sec> fills A.consumer.*, which is read after A->B.consumer.*
    assert consumer["ssl.key.password"] == "top"
    assert flow("A->B.consumer.ssl.key.password = flow\n").source.consumer["ssl.key.password"] == "flow"
    assert f.target.producer["security.protocol"] == "SSL", "B has none of its own: top level fills"


def test_a_credential_only_under_a_typed_prefix_reaches_that_client_only():
    f = flow(f"A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n"
             f"A.consumer.sasl.jaas.config = {JAAS.format('reader')}\n")
    assert "reader" in f.source.consumer["sasl.jaas.config"]
    assert "sasl.jaas.config" not in f.source.admin and "sasl.jaas.config" not in f.source.producer
    assert "sasl.jaas.config" not in f.source.client, "the cluster-wide settings stay the cluster's"
    assert kafka_python_config("a:9092", settings_of(f.source, "consumer"), "A")["sasl_plain_username"] == "reader"


def test_source_cluster_spelling_scopes_security_to_one_flow():
    f = flow("A->B.source.cluster.security.protocol = SSL\n"
             "A->B.target.cluster.security.protocol = SASL_SSL\nA->B.source.cluster.linger.ms = 9\n")
    assert f.source.consumer["security.protocol"] == "SSL" and f.source.admin["security.protocol"] == "SSL"
    assert f.target.admin["security.protocol"] == "SASL_SSL" and f.target.consumer["security.protocol"] == "SASL_SSL"
    assert "linger.ms" not in f.source.producer, "source.cluster.* keeps security settings only"
    assert "security.protocol" not in f.target.producer, "the data producer is the worker's: B.* only"
    # MM2's quirk, kept: A.<sec> fills A.consumer.*, read after source.cluster.*
    f = flow("A.security.protocol = PLAINTEXT\nA->B.source.cluster.security.protocol = SSL\n")
    assert f.source.consumer["security.protocol"] == "PLAINTEXT"


def test_data_producer_is_the_target_worker_s_and_flow_producer_settings_go_to_the_offset_syncs_writer():
    f = flow("B.producer.batch.size = 1\nA->B.producer.override.batch.size = 2\nA->B.producer.linger.ms = 3\n"
             "A.producer.linger.ms = 4\nA->B.source.producer.acks = all\nproducer.retries = 5\n")
    assert f.target.producer == {"batch.size": "2"}, "B.producer.* < A->B.producer.override.*; nothing else"
    assert f.source.producer == {"linger.ms": "4", "acks": "all"}, "A->B.producer.* < A.producer.* < source."
    cluster, _topic = offset_syncs_location(f)
    assert cluster.alias == "A" and cluster.producer == f.source.producer
    # B.producer.* reaches every producer writing to B: B->A's offset-syncs writer too
    assert flow("B.producer.batch.size = 1\n", "B->A").source.producer == {"batch.size": "1"}


def test_admin_and_checkpoint_reader_layers():
    f = flow("A->B.admin.retries = 1\nB.admin.retries = 2\nA->B.target.admin.retries = 3\nA.admin.retries = 4\n"
             "A->B.consumer.check.crcs = false\nB.consumer.check.crcs = true\n")
    assert (f.source.admin["retries"], f.target.admin["retries"]) == ("4", "3")
    assert f.target.consumer["check.crcs"] == "true" and f.source.consumer["check.crcs"] == "false"
    assert "timeout.ms" not in f.source.admin, "admin.timeout.ms is MM2's own key, no client setting"


def test_offset_syncs_on_the_target_get_the_target_s_producer_not_the_data_producer():
    f = flow("A->B.offset-syncs.topic.location = target\nB.producer.linger.ms = 1\nA->B.producer.linger.ms = 2\n"
             "A->B.producer.override.linger.ms = 3\nA->B.target.producer.acks = all\n")
    cluster, topic = offset_syncs_location(f)
    assert (cluster.alias, topic) == ("B", "mm2-offset-syncs.A.internal")
    assert cluster.producer == {"linger.ms": "1", "acks": "all"}, "A->B.producer.* < B.producer.* < target."
    assert f.target.producer["linger.ms"] == "3"


def test_client_id_gets_mm2_s_role_suffix_except_on_the_data_producer():
    f = flow("A.consumer.client.id = reader\nB.producer.client.id = writer\nA->B.admin.client.id = adm\n")
    assert f.source.consumer["client.id"] == "reader|A->B|MirrorSourceConnector|replication-consumer"
    assert f.target.producer["client.id"] == "writer"
    assert f.source.admin["client.id"] == "adm|A->B|MirrorSourceConnector|replication-source-admin"
    assert f.target.admin["client.id"] == "adm|A->B|MirrorSourceConnector|replication-target-admin"
    assert "client.id" not in flow("").source.consumer


def test_cluster_maps_for_mm2py_s_own_tools_are_unchanged():
    cfg: MirrorMakerConfig = load_text(BASE + "consumer.client.rack = r1\nA.consumer.fetch.min.bytes = 2\n")
    assert cfg.clusters["A"].consumer == {"client.rack": "r1", "fetch.min.bytes": "2"}
    assert "client.rack" not in cfg.enabled_flows[0].source.consumer, "no flow client takes top-level consumer.*"


def test_auto_offset_reset_follows_the_replication_consumer():
    assert flow("A->B.consumer.auto.offset.reset = latest\n").delivery.auto_offset_reset == "latest"
    assert flow("A.consumer.auto.offset.reset = latest\nA->B.consumer.auto.offset.reset = earliest\n"
                ).delivery.auto_offset_reset == "latest"
    assert "source.consumer.auto.offset.reset" in str(refused("A->B.source.consumer.auto.offset.reset = soon\n"))


# -- spellings that reach no client: one warning ----------------------------------------------------


def test_spellings_that_reach_no_client_are_named_in_one_warning():
    notes = warned("consumer.fetch.min.bytes = 1\nproducer.acks = all\nclient.id = x\nA->B.request.timeout.ms = 5\n"
                   "A.max.partition.fetch.bytes = 9\nA->B.consumer.fetch.min.bytes = 1\nA.security.protocol = SSL\n"
                   "consumer.poll.timeout.ms = 500\nadmin.timeout.ms = 9000\nsource.consumer.check.crcs = true\n"
                   "source.cluster.alias = A\n")
    assert notes["consumer.fetch.min.bytes"] == cc.NOWHERE_TOP
    assert notes["producer.acks"] == cc.NOWHERE_TOP and notes["client.id"] == cc.NOWHERE_TOP
    assert notes["A->B.request.timeout.ms"] == cc.NOWHERE_FLOW
    assert notes["A.max.partition.fetch.bytes"] == cc.WORKER_ONLY
    assert notes["source.consumer.check.crcs"] == cc.NOWHERE_TOP, "source.* is a flow's spelling only"
    assert set(notes) == {"consumer.fetch.min.bytes", "producer.acks", "client.id", "A->B.request.timeout.ms",
                          "A.max.partition.fetch.bytes", "source.consumer.check.crcs"}, "MM2 keys are not named"


def test_no_warning_for_a_file_of_security_settings():
    assert warned("A.security.protocol = SASL_SSL\nA.sasl.mechanism = PLAIN\nssl.truststore.location = /t\n"
                  f"A.sasl.jaas.config = {JAAS.format('u')}\nB.consumer.client.id = c\n") == {}


def test_unknown_and_bootstrap_under_a_client_prefix_are_warned():
    notes = warned("A.consumer.fetch.max.byte = 1\nA.consumer.bootstrap.servers = elsewhere:1\n")
    assert notes["A.consumer.fetch.max.byte"] == cc.UNKNOWN.format(kind="consumer")
    assert notes["A.consumer.bootstrap.servers"] == cc.BOOTSTRAP
    assert flow("A.consumer.bootstrap.servers = elsewhere:1\n").source.bootstrap_servers == "a:9092"


# -- the raw copy path: each pass-through setting ----------------------------------------------


@pytest.mark.parametrize(("java", "value", "python", "expected"), [
    ("client.id", "mirror", "client_id", "mirror"),
    ("request.timeout.ms", "45000", "request_timeout_ms", 45000),
    ("socket.connection.setup.timeout.ms", "1500", "socket_connection_setup_timeout_ms", 1500),
    ("socket.connection.setup.timeout.max.ms", "9000", "socket_connection_setup_timeout_max_ms", 9000),
    ("reconnect.backoff.ms", "70", "reconnect_backoff_ms", 70),
    ("reconnect.backoff.max.ms", "700", "reconnect_backoff_max_ms", 700),
    ("connections.max.idle.ms", "60000", "connections_max_idle_ms", 60000),
    ("connections.max.idle.ms", "-1", "connections_max_idle_ms", 2**31 - 1),
    ("metadata.max.age.ms", "1000", "metadata_max_age_ms", 1000),
    ("client.dns.lookup", "resolve_canonical_bootstrap_servers_only", "client_dns_lookup",
     "resolve_canonical_bootstrap_servers_only"),
    ("sasl.kerberos.service.name", "kfk", "sasl_kerberos_service_name", "kfk"),
])
def test_each_connection_setting_reaches_kafka_python(java: str, value: str, python: str, expected: object):
    assert kafka_python_config("a:1", {java: value}, "A")[python] == expected
    assert python not in kafka_python_config("a:1", {}, "A")


def test_socket_buffer_sizes_become_socket_options_and_minus_one_keeps_the_os_s():
    options = kafka_python_config("a:1", {"send.buffer.bytes": "131072", "receive.buffer.bytes": "65536"},
                                  "A")["socket_options"]
    assert (socket.SOL_SOCKET, socket.SO_SNDBUF, 131072) in options
    assert (socket.SOL_SOCKET, socket.SO_RCVBUF, 65536) in options
    assert (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) in options, "kafka-python's own options are kept"
    assert "socket_options" not in kafka_python_config("a:1", {"receive.buffer.bytes": "-1"}, "A")


def test_every_raw_connection_setting_has_a_translation():
    samples = {"client.dns.lookup": "use_all_dns_ips", "client.id": "x", "send.buffer.bytes": "1024",
               "receive.buffer.bytes": "1024"}
    for java in cc.RAW_CONNECTION:
        assert kafka_python_config("a:1", {java: samples.get(java, "1234")}, "A") != kafka_python_config(
            "a:1", {}, "A"), java


def test_copy_settings_come_from_the_replication_consumer_and_the_data_producer():
    f = flow("A.consumer.max.partition.fetch.bytes = 1048576\nA->B.consumer.fetch.max.bytes = 5242880\n"
             "A.consumer.fetch.max.wait.ms = 50\nA.consumer.fetch.min.bytes = 1024\nA.consumer.check.crcs = true\n"
             "A.consumer.retry.backoff.ms = 30\nB.producer.request.timeout.ms = 45000\n"
             "B.producer.max.in.flight.requests.per.connection = 2\nadmin.timeout.ms = 20000\noffset.lag.max = 7\n")
    s = CopySettings.for_flow(f)
    assert (s.partition_max_bytes, s.fetch_max_bytes, s.fetch_max_wait_ms, s.fetch_min_bytes) == (
        1048576, 5242880, 50, 1024)
    assert (s.verify_crc, s.retry_backoff_ms, s.produce_timeout_ms) == (True, 30, 45000)
    assert (s.max_in_flight_per_partition, s.request_timeout_ms, s.offset_lag_max) == (2, 20000, 7)


def test_copy_settings_default_to_mm2py_s_own_where_the_file_says_nothing():
    assert CopySettings.for_flow(flow("")) == CopySettings(request_timeout_ms=60000)
    s = CopySettings.for_flow(flow("B.producer.max.in.flight.requests.per.connection = 50\n"
                                   "A.consumer.max.partition.fetch.bytes = 0\n"))
    assert s.max_in_flight_per_partition == MAX_IN_FLIGHT_PER_PARTITION, "the broker tracks 5 batches per partition"
    assert s.partition_max_bytes == 1


class _SendSpy(RawClient):
    """A RawClient without a connection: ``_send`` hands back the request."""

    def __init__(self, cluster, role: str):  # no broker needed
        settings = settings_of(cluster, role)
        self.rack = settings.get("client.rack", "") if role == "consumer" else ""
        self._sessions = {}
        self._topic_ids = TopicIds()
        self.sent: list[object] = []

    def _send(self, node: int, request: object) -> Future:
        self.sent.append(request)
        return Future()

    def fetch_request(self, *args, **kwargs) -> object:
        self.fetch(*args, **kwargs)
        return self.sent[-1]


def test_client_rack_is_the_fetch_request_s_rack_id():
    f = flow("A.consumer.client.rack = eu-west-1a\nB.producer.client.rack = ignored\n")
    client = _SendSpy(f.source, "consumer")
    request = client.fetch_request(1, {("t", 0): 5}, partition_max_bytes=10, max_bytes=20, max_wait_ms=30,
                                   min_bytes=40, closest_replica=True)
    assert request.rack_id == "eu-west-1a"
    assert client.fetch_request(1, {("t", 0): 5}, partition_max_bytes=1, max_bytes=1).rack_id == "", \
        "only when followed"
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (30, 40, 20)
    assert request.topics[0].partitions[0].partition_max_bytes == 10
    assert _SendSpy(flow("").source, "consumer").fetch_request(1, {("t", 0): 0}, partition_max_bytes=1, max_bytes=1,
                                                               closest_replica=True).rack_id == ""


def test_session_fetches_name_only_changed_partitions_and_forget_the_rest():
    from types import SimpleNamespace

    client = _SendSpy(flow("").source, "consumer")
    client.fetch(1, {("t", 0): 5}, partition_max_bytes=10, max_bytes=20, session=True)
    assert (client.sent[-1].API_VERSION, client.sent[-1].session_epoch) == (12, -1), \
        "a topic whose id the client has not seen is fetched without a session"
    tid = uuid.uuid4()
    client._topic_ids.learn("t", tid)
    opening = client.fetch(1, {("t", 0): 5, ("t", 1): 7}, partition_max_bytes=10, max_bytes=20, session=True)
    assert (client.sent[-1].session_id, client.sent[-1].session_epoch) == (0, 0)
    opening.success(SimpleNamespace(error_code=0, session_id=9))
    client.fetch(1, {("t", 0): 6}, partition_max_bytes=10, max_bytes=20, session=True)
    request = client.sent[-1]
    assert (request.API_VERSION, request.session_id, request.session_epoch) == (13, 9, 1), "sessions name topics by id"
    assert [(t.topic_id, [p.partition for p in t.partitions]) for t in request.topics] == [(tid, [0])]
    assert [(t.topic_id, t.partitions) for t in request.forgotten_topics_data] == [(tid, [1])]
    assert client.sent[-2].forgotten_topics_data == []


def test_raw_clients_read_their_role_s_settings():
    f = flow("A.consumer.client.id = c\nA.admin.client.id = a\nB.producer.client.id = p\n")
    assert settings_of(f.source, "consumer")["client.id"].startswith("c|")
    assert settings_of(f.source, "admin")["client.id"].startswith("a|")
    assert settings_of(f.target, "producer")["client.id"] == "p"
    with pytest.raises(ValueError):
        settings_of(f.source, "client")


@pytest.mark.parametrize("java", sorted(cc.RAW_FETCH - {"isolation.level", "auto.offset.reset"}))
def test_each_fetch_setting_is_honoured_without_a_warning(java: str):
    value = {"client.dns.lookup": "use_all_dns_ips", "client.id": "x", "client.rack": "r", "check.crcs": "true"}
    assert warned(f"A.consumer.{java} = {value.get(java, '100')}\n") == {}


@pytest.mark.parametrize("java", sorted(cc.RAW_PRODUCE - {"acks", "enable.idempotence"}))
def test_each_produce_setting_is_honoured_without_a_warning(java: str):
    value = {"client.dns.lookup": "use_all_dns_ips", "client.id": "x"}
    assert warned(f"B.producer.{java} = {value.get(java, '3')}\n") == {}


# -- producer settings that cannot apply to batches passed through: warned, with the reason -------------


@pytest.mark.parametrize(("setting", "why"), [
    ("compression.type = zstd", cc.CODEC), ("compression.gzip.level = 9", cc.CODEC),
    ("compression.lz4.level = 9", cc.CODEC), ("compression.zstd.level = 9", cc.CODEC),
    ("batch.size = 1000000", cc.BATCHING), ("linger.ms = 50", cc.BATCHING),
    ("buffer.memory = 1000000", cc.BUFFERING), ("max.block.ms = 1000", cc.BUFFERING),
    ("retries = 3", cc.FAILURES), ("retry.backoff.max.ms = 5000", cc.BACKOFF),
    ("max.request.size = 100", cc.REQUEST_SIZE),
    ("acks = 1", cc.ACKS), ("acks = 0", cc.ACKS), ("enable.idempotence = false", cc.IDEMPOTENCE),
    ("transactional.id = t", cc.TRANSACTIONS), ("interceptor.classes = com.x.I", cc.JAVA_CLASSES),
    ("metric.reporters = com.x.R", cc.JAVA_CLASSES), ("metrics.num.samples = 3", cc.METRICS),
    ("metadata.max.idle.ms = 1000", cc.METADATA_IDLE),
])
def test_each_producer_setting_the_copy_path_cannot_apply_is_warned_with_its_reason(setting: str, why: str):
    for spelling in (f"B.producer.{setting}", f"A->B.producer.override.{setting}"):
        assert warned(spelling + "\n") == {spelling.partition(" =")[0]: why}


def test_acks_all_and_idempotence_on_are_what_mm2py_does_anyway():
    assert warned("B.producer.acks = all\nB.producer.enable.idempotence = true\nA->B.producer.override.acks = -1\n"
                  ) == {}


def test_warned_producer_settings_still_reach_the_record_path_producer():
    f = flow("B.producer.compression.type = zstd\nB.producer.linger.ms = 50\n")
    conf = rdkafka_config("b:1", f.target.producer, "B", "producer")
    assert (conf["compression.type"], conf["linger.ms"]) == ("zstd", "50")


@pytest.mark.parametrize(("setting", "why"), [
    ("max.poll.records = 10", cc.RECORDS), ("isolation.level = read_uncommitted", cc.READ_COMMITTED),
    ("default.api.timeout.ms = 1000", cc.API_TIMEOUT), ("interceptor.classes = com.x.I", cc.JAVA_CLASSES),
])
def test_consumer_settings_the_raw_fetch_cannot_apply_are_warned(setting: str, why: str):
    assert warned(f"A.consumer.{setting}\n") == {f"A.consumer.{setting.partition(' =')[0]}": why}


def test_consumer_settings_without_effect_in_mm2_either_are_accepted_quietly():
    assert warned("A.consumer.group.id = g\nA.consumer.session.timeout.ms = 10000\n"
                  "A.consumer.key.deserializer = x\nB.producer.partitioner.class = y\n") == {}


def test_admin_settings_without_a_librdkafka_equivalent_are_warned():
    assert warned("A.admin.retries = 3\n") == {"A.admin.retries": cc.NO_LIBRDKAFKA.format(kind="admin")}
    assert warned("A.admin.request.timeout.ms = 3000\n") == {}


# -- librdkafka clients ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "java", "value", "rd", "expected"), [
    ("consumer", "fetch.max.wait.ms", "100", "fetch.wait.max.ms", 100),
    ("consumer", "max.partition.fetch.bytes", "1000", "max.partition.fetch.bytes", "1000"),
    ("consumer", "client.rack", "r1", "client.rack", "r1"),
    ("producer", "max.request.size", "2000000", "message.max.bytes", 2000000),
    ("producer", "buffer.memory", "33554432", "queue.buffering.max.kbytes", 32768),
    ("producer", "linger.ms", "7", "linger.ms", "7"),
    ("admin", "request.timeout.ms", "5000", "socket.timeout.ms", 5000),
    (None, "receive.buffer.bytes", "-1", "socket.receive.buffer.bytes", 0),
    (None, "client.id", "x", "client.id", "x"),
])
def test_rdkafka_translation(kind: str | None, java: str, value: str, rd: str, expected: object):
    assert rdkafka_config("b:1", {java: value}, "B", kind)[rd] == expected


def test_rdkafka_gives_each_client_kind_its_own_settings_only():
    props: Mapping[str, str] = {"fetch.min.bytes": "5", "linger.ms": "5", "compression.type": "lz4",
                                "compression.lz4.level": "9"}
    consumer, producer = rdkafka_config("b:1", props, "B", "consumer"), rdkafka_config("b:1", props, "B", "producer")
    assert "fetch.min.bytes" in consumer and "linger.ms" not in consumer
    assert "linger.ms" in producer and "fetch.min.bytes" not in producer and producer["compression.level"] == 9
    assert "linger.ms" not in rdkafka_config("b:1", props, "B")
    assert "fetch.min.bytes" in RDKAFKA_CONSUMER and "linger.ms" in RDKAFKA_PRODUCER


# -- refused: settings whose absence would change security ------------------------------------------


@pytest.mark.parametrize("setting", [
    "A.consumer.ssl.cipher.suites = TLS_AES_256_GCM_SHA384", "A.ssl.enabled.protocols = TLSv1.3",
    "B.producer.ssl.truststore.certificates = -----BEGIN CERTIFICATE-----",
    "sasl.login.callback.handler.class = software.amazon.msk.auth.iam.IAMClientCallbackHandler",
    "A.sasl.mechanism = OAUTHBEARER", "A.ssl.engine.factory.class = com.x.Engine",
])
def test_security_settings_mm2py_cannot_honour_are_refused_naming_the_key(setting: str):
    key = setting.partition(" =")[0]
    problems = refused(setting + "\n")
    assert key in problems, problems


def test_a_malformed_number_for_a_raw_client_setting_is_refused():
    problems = refused("A.consumer.max.partition.fetch.bytes = lots\nB.producer.max.in.flight.requests."
                       "per.connection = 0\nA.consumer.client.dns.lookup = default\n")
    assert "integer" in problems["A.consumer.max.partition.fetch.bytes"]
    assert "at least 1" in problems["B.producer.max.in.flight.requests.per.connection"]
    assert "use_all_dns_ips" in problems["A.consumer.client.dns.lookup"]


def test_settings_of_flows_that_do_not_run_are_not_reviewed():
    text = BASE.replace("A->B.enabled = true\n", "") + "B->A.enabled = false\nemit.heartbeats.enabled = false\n"
    load_text(text + "A.consumer.ssl.cipher.suites = X\n")  # no flow runs: nothing to refuse


def test_every_java_setting_reaching_the_copy_path_is_classified():
    # honoured, warned with its own reason, or without effect in MM2 too: none falls to a generic reason
    for raw, notes, kind in ((cc.RAW_FETCH, cc._CONSUMER_NOTES, "consumer"), (cc.RAW_PRODUCE, cc._PRODUCER_NOTES,
                                                                              "producer")):
        left = cc.KNOWN[kind] - cc.NO_EFFECT[kind] - raw - set(notes) - set(cc._COMMON_NOTES) - {"bootstrap.servers"}
        assert not left, f"{kind} settings without a status: {sorted(left)}"


def test_a_recreated_topic_s_old_id_is_forgotten():
    ids, old, new = TopicIds(), uuid.uuid4(), uuid.uuid4()
    ids.learn("t", old)
    ids.learn("t", new)
    assert (ids.id_of("t"), ids.name_of(new)) == (new, "t")
    with pytest.raises(KeyError):
        ids.name_of(old)


def test_a_pinned_topic_keeps_its_id_and_names_the_one_metadata_gives_instead():
    ids, old, new = TopicIds(), uuid.uuid4(), uuid.uuid4()
    ids.learn("t", old)
    assert ids.pin({"t": old}) is False, "pinned to the id it had: nothing changed"
    ids.learn("t", new)  # re-created under the pin
    assert (ids.id_of("t"), ids.moved("t"), ids.learned("t")) == (old, new, new)
    assert ids.name_of(old) == ids.name_of(new) == "t", "an answer naming the pinned id is still named"
    assert ids.pin({"t": new}) is True, "the next copy pinned to the new id"
    assert (ids.id_of("t"), ids.moved("t")) == (new, None)
    with pytest.raises(KeyError):
        ids.name_of(old)
    assert ids.pin({}) is False and ids.id_of("t") == new and not ids.pinned("t")


def test_pinned_topics_are_fetched_by_id_outside_sessions_too_and_a_new_pin_ends_the_sessions():
    from types import SimpleNamespace

    client = _SendSpy(flow("").source, "consumer")
    old, new = uuid.uuid4(), uuid.uuid4()
    client._topic_ids.learn("t", old)
    client.fetch(1, {("t", 0): 5}, partition_max_bytes=10, max_bytes=20)
    assert client.sent[-1].API_VERSION == 12, "not pinned, no session: by name"
    client.pin_topic_ids({"t": str(old)})
    client._topic_ids.learn("t", new)  # metadata after the topic was re-created
    client.fetch(1, {("t", 0): 5}, partition_max_bytes=10, max_bytes=20)
    request = client.sent[-1]
    assert (request.API_VERSION, request.session_epoch) == (13, -1)
    assert [t.topic_id for t in request.topics] == [old], "the id it was pinned to, not the new one"
    assert client.recreated("t") == str(new)
    opening = client.fetch(1, {("t", 0): 5}, partition_max_bytes=10, max_bytes=20, session=True)
    opening.success(SimpleNamespace(error_code=0, session_id=9))
    assert client._sessions[1].session_id == 9
    client.pin_topic_ids({"t": str(new)})
    assert client._sessions == {}, "the brokers hold the session's partitions by the old id"
    assert client.recreated("t") is None
