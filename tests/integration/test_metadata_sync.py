"""Issue 4: topic configs and ACLs follow the data (MM2's testSyncTopicConfigs,
testReplicateSourceDefault/TargetDefault, ACL sync), black-box on real brokers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.engine.driver import Engine
from tests.conftest import TEST_PORTS
from tests.integration.mirror_helpers import SINGLE_BROKER, mirror_once, properties, wait_for
from tests.kafkautil import create_topic, produce

pytestmark = pytest.mark.integration

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def configs(bootstrap: str, topic: str, client: dict | None = None) -> dict[str, tuple[str, bool]]:
    """name -> (value, is_default) of a topic's configs ({} while the topic does not exist)."""
    admin = AdminClient({**(client or {}), "bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(30)
    except KafkaException as e:
        if e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return {}
        raise
    return {e.name: (e.value, e.is_default) for e in entries.values()}


def alter(bootstrap: str, topic: str, **values: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in values.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def flow_text(cluster_a, cluster_b, topic: str, **keys: str) -> str:
    return properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topic, **{k.replace("_", "."): v for k, v in keys.items()}}},
                      "emit.checkpoints.enabled = false\nsync.topic.acls.enabled = false\n")


def test_remote_topic_created_with_source_configs(spark, cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 2, {"cleanup.policy": "compact", "retention.bytes": "12345678",
                                                 "delete.retention.ms": "1234", "max.message.bytes": "3000000"})
    produce(cluster_a.bootstrap, topic, [(b"k", b"v", None, None)])
    mirror_once(spark, flow_text(cluster_a, cluster_b, topic, config_properties_exclude=r"delete\.retention\..*"),
                tmp_path)
    remote = configs(cluster_b.bootstrap, f"A.{topic}")
    assert remote["cleanup.policy"] == ("compact", False)
    assert remote["retention.bytes"] == ("12345678", False)
    assert remote["max.message.bytes"] == ("3000000", False), "every batch the source took must fit"
    assert remote["delete.retention.ms"][1], "excluded: left at the target's default"


def test_sync_topic_configs(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """MM2's testSyncTopicConfigs, plus a source change arriving within the interval."""
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 1, {"retention.bytes": "5000000", "delete.retention.ms": "2000"})
    text = flow_text(cluster_a, cluster_b, topic, config_properties_exclude=r"delete\.retention\..*",
                     sync_topic_configs_interval_seconds="1", refresh_topics_interval_seconds="1",
                     **{"trigger.interval.ms": "200"})
    config = load_text(text)
    engine = Engine(config, spark, str(tmp_path / "ckpt"))
    remote = f"A.{topic}"
    try:
        engine.start(config.enabled_flows)
        wait_for(lambda: configs(cluster_b.bootstrap, remote).get("retention.bytes") == ("5000000", False), 120,
                 "remote topic with the source's retention.bytes")
        # on the target: an excluded key keeps its edit, an included one is reverted
        alter(cluster_b.bootstrap, remote, delete_retention_ms="7777", retention_bytes="1")
        # on the source: a change arrives within the interval
        alter(cluster_a.bootstrap, topic, retention_ms="3600000")
        wait_for(lambda: configs(cluster_b.bootstrap, remote)["retention.bytes"] == ("5000000", False)
                 and configs(cluster_b.bootstrap, remote)["retention.ms"] == ("3600000", False), 60,
                 "included key reverted and the source change synced")
        assert configs(cluster_b.bootstrap, remote)["delete.retention.ms"] == ("7777", False)
    finally:
        engine.stop()


@pytest.mark.parametrize("defaults_from", ["source", "target"])
def test_replicate_defaults(spark, cluster_a, cluster_b, unique_name, tmp_path, defaults_from):
    """MM2's testReplicateSourceDefault / testReplicateTargetDefault: a config at its default on the
    source is copied as a value (source) or left to the target's default (target)."""
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 1)  # retention.ms at its default on the source
    create_topic(cluster_b.bootstrap, f"A.{topic}", 1, {"retention.ms": "1000"})  # edited on the target
    source_default = configs(cluster_a.bootstrap, topic)["retention.ms"]
    assert source_default[1]
    mirror_once(spark, flow_text(cluster_a, cluster_b, topic, use_defaults_from=defaults_from), tmp_path)
    remote = configs(cluster_b.bootstrap, f"A.{topic}")["retention.ms"]
    if defaults_from == "source":
        assert remote == (source_default[0], False), "the source's default, set on the target"
    else:
        assert remote[1], "deleted on the target: its own default applies"


# -- ACLs: two brokers with an authorizer and SASL/PLAIN users -----------------------------


@pytest.fixture(scope="module")
def acl_clusters(cluster_workdir: Path) -> Iterator[tuple[devcluster.DevCluster, devcluster.DevCluster]]:
    started = []
    try:
        for key in ("acl-a", "acl-b"):
            started.append(devcluster.start_cluster(
                key, TEST_PORTS[key], workdir=cluster_workdir, listeners_security="SASL_PLAINTEXT",
                sasl_users={"alice": "alice-secret"}, extra_properties={"authorizer.class.name": STANDARD_AUTHORIZER}))
        yield started[0], started[1]
    finally:
        for key in ("acl-a", "acl-b"):
            with contextlib.suppress(Exception):
                devcluster.stop_cluster(key, cluster_workdir)


def binding(topic: str, who: str, op: AclOperation, perm: AclPermissionType = AclPermissionType.ALLOW,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, pattern, who, "*", op, perm)


def topic_acls(cluster: devcluster.DevCluster, topic: str) -> set[tuple[str, str, str]]:
    admin = AdminClient(cluster.rdkafka_config())
    wanted = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    return {(b.principal, b.operation.name, b.permission_type.name)
            for b in admin.describe_acls(wanted).result(30)}


def test_sync_topic_acls(spark, acl_clusters, unique_name, tmp_path):
    """MM2's ACL sync: literal TOPIC ACLs only, ALLOW WRITE dropped, ALLOW ALL downgraded to READ."""
    src, dst = acl_clusters
    topic = f"{unique_name}-t"
    create_topic(src.bootstrap, topic, 1, client=src.rdkafka_config())
    admin = AdminClient(src.rdkafka_config())
    for future in admin.create_acls([
        binding(topic, "User:alice", AclOperation.READ),
        binding(topic, "User:bob", AclOperation.WRITE),
        binding(topic, "User:carol", AclOperation.ALL),
        binding(topic, "User:mallory", AclOperation.READ, AclPermissionType.DENY),
        binding(topic[:8], "User:dave", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
    ]).values():
        future.result(30)
    produce(src.bootstrap, topic, [(b"k", b"v", None, None)], client=src.rdkafka_config())
    lines = ["clusters = A, B", f"A.bootstrap.servers = {src.bootstrap}", f"B.bootstrap.servers = {dst.bootstrap}",
             "A->B.enabled = true", f"A->B.topics = {topic}", "emit.checkpoints.enabled = false",
             "sync.topic.acls.enabled = true"]
    lines += [f"{alias}.{k} = {v}" for alias, c in (("A", src), ("B", dst)) for k, v in c.client_properties.items()]
    mirror_once(spark, "\n".join(lines) + "\n" + SINGLE_BROKER, tmp_path)
    assert topic_acls(dst, f"A.{topic}") == {
        ("User:alice", "READ", "ALLOW"),
        ("User:carol", "READ", "ALLOW"),
        ("User:mallory", "READ", "DENY"),
    }
