"""Topic config and ACL sync rules (MM2's MirrorSourceConnector semantics), as pure functions."""

from __future__ import annotations

from mm2py.config.filters import ConfigPropertyFilter
from mm2py.config.model import MetadataSyncConfig
from mm2py.kafka.resources import TopicAcl
from mm2py.kafka.resources import TopicConfigEntry as E
from mm2py.metadata.acls import target_acls
from mm2py.metadata.configs import creation_configs, pending, sync_operations

MM2_EXCLUDES = MetadataSyncConfig().config_properties_exclude
TARGET = ConfigPropertyFilter(MM2_EXCLUDES)
SOURCE = ConfigPropertyFilter(MM2_EXCLUDES, "source")

SOURCE_TOPIC = [
    E("cleanup.policy", "compact", is_default=False),
    E("retention.ms", "604800000", is_default=True),
    E("min.insync.replicas", "2", is_default=False),  # excluded by MM2's default list
    E("max.message.bytes", "1048588", is_default=True),
    E("segment.bytes", "1073741824", is_default=False, static_broker=True),
    E("some.password", "secret", is_default=False, sensitive=True),
    E("read.only.thing", "x", is_default=False, read_only=True),
]


def test_created_with_non_defaults_and_max_message_bytes():
    assert creation_configs(SOURCE_TOPIC, TARGET) == {"cleanup.policy": "compact", "max.message.bytes": "1048588"}


def test_created_with_source_defaults_too_when_defaults_come_from_the_source():
    assert creation_configs(SOURCE_TOPIC, SOURCE) == {
        "cleanup.policy": "compact", "retention.ms": "604800000", "max.message.bytes": "1048588"}


def test_sync_deletes_source_defaults_unless_defaults_come_from_the_source():
    assert sync_operations(SOURCE_TOPIC, TARGET) == {
        "cleanup.policy": "compact", "retention.ms": None, "max.message.bytes": "1048588"}
    assert sync_operations(SOURCE_TOPIC, SOURCE)["retention.ms"] == "604800000"


def test_static_broker_max_message_bytes_still_bounds_batches():
    entries = [E("max.message.bytes", "10485760", is_default=False, static_broker=True)]
    assert creation_configs(entries, TARGET) == {"max.message.bytes": "10485760"}
    assert creation_configs(entries, ConfigPropertyFilter((r"max\.message\.bytes",))) == {}


def test_pending_keeps_only_changes():
    ops = {"cleanup.policy": "compact", "retention.ms": None, "max.message.bytes": "1048588"}
    target = [E("cleanup.policy", "compact", is_default=False), E("retention.ms", "1000", is_default=False),
              E("max.message.bytes", "1048588", is_default=True)]
    # an edited retention.ms is reverted; a default max.message.bytes is pinned to the source's value
    assert pending(ops, target) == {"retention.ms": None, "max.message.bytes": "1048588"}
    assert pending({"retention.ms": None}, [E("retention.ms", "604800000", is_default=True)]) == {}


def acl(topic: str, op: str, perm: str = "ALLOW", pattern: str = "LITERAL", who: str = "User:alice") -> TopicAcl:
    return TopicAcl(topic, who, "*", op, perm, pattern)


def test_acl_transformation_as_mm2():
    """MirrorSourceConnectorTest.testAclTransformation, and the filters of syncTopicAcls."""
    source = [acl("orders", "READ"), acl("orders", "WRITE"), acl("orders", "ALL"), acl("orders", "DESCRIBE"),
              acl("orders", "ALL", "DENY"), acl("orders", "WRITE", "DENY"), acl("ord", "READ", pattern="PREFIXED"),
              acl("private", "READ")]
    got = target_acls(source, lambda t: f"A.{t}", lambda t: t != "private")
    assert got == [acl("A.orders", "READ"), acl("A.orders", "READ"), acl("A.orders", "DESCRIBE"),
                   acl("A.orders", "ALL", "DENY"), acl("A.orders", "WRITE", "DENY")]
