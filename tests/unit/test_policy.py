"""Replication policies and cycle detection, ported from MM2's MirrorSourceConnectorTest and
ReplicationPolicyTest; the edge cases were checked against Apache Kafka 4.3.0's own classes."""

from __future__ import annotations

import pickle
from collections.abc import Mapping

import pytest

from mm2py.config.filters import TopicFilter
from mm2py.errors import ConfigError
from mm2py.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from mm2py.policy_loader import load_policy

JAVA = "org.apache.kafka.connect.mirror."


class Everything:
    def should_replicate_topic(self, topic: str) -> bool:
        return True


class Nothing:
    def should_replicate_topic(self, topic: str) -> bool:
        return False


def test_default_naming_and_tracing() -> None:
    p = DefaultReplicationPolicy()
    assert p.format_remote_topic("A", "orders") == "A.orders"
    assert p.topic_source("B.A.orders") == "B" and p.upstream_topic("B.A.orders") == "A.orders"
    assert p.original_topic("B.A.orders") == "orders"
    assert p.topic_source("orders") is None and p.upstream_topic("orders") is None
    assert p.original_topic("orders") == "orders"
    assert p.heartbeats_topic() == "heartbeats"


@pytest.mark.parametrize("topic,source,upstream", [
    # Java's String.split drops trailing empty parts, so these are local topics
    ("A.", None, None), ("A..", None, None), (".", None, None), ("...", None, None), ("", None, None),
    # ... while a leading empty part is kept
    (".A", "", "A"), ("A..B", "A", ".B"), ("A.B.", "A", "B."),
])
def test_default_parses_like_java_split(topic: str, source: str | None, upstream: str | None) -> None:
    p = DefaultReplicationPolicy()
    assert (p.topic_source(topic), p.upstream_topic(topic)) == (source, upstream)


def test_custom_separator() -> None:
    p = DefaultReplicationPolicy("__")
    assert p.format_remote_topic("A", "t") == "A__t"
    assert p.topic_source("A__B__t") == "A" and p.upstream_topic("A__B__t") == "B__t"
    assert (p.topic_source("a___b"), p.upstream_topic("a___b")) == ("a", "_b")
    assert (p.topic_source("a____b"), p.upstream_topic("a____b")) == ("a", "__b")
    assert p.topic_source("A.t") is None


def test_internal_topic_names_follow_the_separator_unless_disabled() -> None:
    """ReplicationPolicyTest: offsetSyncsTopic/checkpointsTopic_shouldBeEffectedByInternalTopicSeparatorEnabled."""
    p = DefaultReplicationPolicy("__")
    assert p.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs__CLUSTER__internal"
    assert p.checkpoints_topic("CLUSTER") == "CLUSTER__checkpoints__internal"
    assert p.is_checkpoints_topic("A__checkpoints__internal") and not p.is_checkpoints_topic("A.checkpoints.internal")
    legacy = DefaultReplicationPolicy("__", internal_topic_separator_enabled=False)
    assert legacy.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    assert legacy.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"
    assert legacy.is_checkpoints_topic("A.checkpoints.internal")
    assert legacy.format_remote_topic("A", "t") == "A__t"  # data topics keep the custom separator
    for policy in (p, legacy):
        assert policy.heartbeats_topic() == "heartbeats"


def test_internal_topics() -> None:
    """ReplicationPolicyTest.testInternalTopic, as of Kafka 4.x (KAFKA-17200)."""
    p = DefaultReplicationPolicy()
    for topic in ("__consumer_offsets", ".hiddentopic", "mm2-offsets.CLUSTER.internal",
                  "mm2-offset-syncs.B.internal", "A.checkpoints.internal"):
        assert p.is_internal_topic(topic), topic
    # user topics that merely look internal may be mirrored when the filter allows them
    for topic in ("mm2-offsets_CLUSTER_internal", "payments.internal", "payments-internal", "heartbeats.internal"):
        assert not p.is_internal_topic(topic), topic
    assert p.should_replicate_topic("payments.internal", "B", Everything())
    assert not p.should_replicate_topic("payments.internal", "B", TopicFilter((".*",), (r".*[\-\.]internal",)))


def test_connect_topics_of_mm2_stay_home_under_a_custom_separator() -> None:
    # MirrorMakerConfig names them with "." whatever the separator (MM2 4.3 would mirror them)
    p = DefaultReplicationPolicy("_")
    for topic in ("mm2-offsets.A.internal", "mm2-status.A.internal", "mm2-offset-syncs_B_internal",
                  "A_checkpoints_internal"):
        assert p.is_mm2_internal_topic(topic) and not p.should_replicate_topic(topic, "B", Everything()), topic


def test_no_cycles() -> None:
    """MirrorSourceConnectorTest.testNoCycles: flow source->target."""
    p = DefaultReplicationPolicy()
    for topic in ("target.topic1", "target.source.topic1", "source.target.topic1", "target.source.target.topic1",
                  "source.target.source.topic1"):
        assert p.is_cycle(topic, "target"), topic
        assert not p.should_replicate_topic(topic, "target", Everything()), topic
    for topic in ("topic1", "source.topic1", "othersource.source.topic1"):
        assert not p.is_cycle(topic, "target"), topic
        assert p.should_replicate_topic(topic, "target", Everything()), topic


def test_identity_replication() -> None:
    """MirrorSourceConnectorTest.testIdentityReplication: cycles pass, heartbeat cycles do not."""
    p = IdentityReplicationPolicy()
    for topic in ("target.topic1", "target.source.topic1", "source.target.topic1", "target.source.target.topic1",
                  "source.target.source.topic1", "topic1", "othersource.topic1", "heartbeats",
                  "othersource.heartbeats"):
        assert p.should_replicate_topic(topic, "target", Everything()), topic
    for topic in ("target.heartbeats", "target.source.heartbeats", "source.target.heartbeats",
                  "target.source.target.heartbeats", "source.target.source.heartbeats"):
        assert not p.should_replicate_topic(topic, "target", Everything()), topic


def test_identity_naming() -> None:
    p = IdentityReplicationPolicy("source")
    assert p.format_remote_topic("source", "topic1") == "topic1"
    assert p.format_remote_topic("source", "heartbeats") == "source.heartbeats"
    assert p.format_remote_topic("source", "myheartbeats") == "source.myheartbeats"  # MM2 tests the suffix
    assert p.topic_source("topic1") == "source" and p.upstream_topic("topic1") == "topic1"
    assert p.original_topic("topic1") == "topic1"
    assert p.topic_source("x.y.heartbeats") == "x" and p.original_topic("x.y.heartbeats") == "heartbeats"
    assert p.is_heartbeats_topic("source.heartbeats") and not p.is_heartbeats_topic("myheartbeats")
    assert not p.is_cycle("topic1", "target")  # cannot see cycles: hence mm2py.topology
    assert p.is_cycle("target.heartbeats", "target")
    assert IdentityReplicationPolicy().topic_source("topic1") is None


def test_heartbeats_replication_rule() -> None:
    """testReplicatesHeartbeatsDespiteFilter / ...WhenDisabled / ...WhenDisabledButFilterAllows."""
    p = DefaultReplicationPolicy()
    for topic in ("heartbeats", "us-west.heartbeats"):
        assert p.should_replicate_topic(topic, "target", Nothing())
        assert not p.should_replicate_topic(topic, "target", Nothing(), heartbeats_replication_enabled=False)
        assert p.should_replicate_topic(topic, "target", Everything(), heartbeats_replication_enabled=False)
    assert not p.should_replicate_topic("target.heartbeats", "target", Nothing())  # still a cycle
    underscore = DefaultReplicationPolicy("_")
    assert underscore.should_replicate_topic("heartbeats", "target", Nothing())
    assert not underscore.should_replicate_topic("us-west.heartbeats", "target", Nothing())


def test_loader_accepts_java_short_and_python_names() -> None:
    assert type(load_policy(JAVA + "DefaultReplicationPolicy")) is DefaultReplicationPolicy
    ident = load_policy(JAVA + "IdentityReplicationPolicy", source_cluster_alias="A")
    assert isinstance(ident, IdentityReplicationPolicy) and ident.topic_source("t") == "A"
    assert type(load_policy(" IdentityReplicationPolicy ")) is IdentityReplicationPolicy
    custom = load_policy("mm2py.policy.DefaultReplicationPolicy", separator="_", internal_topic_separator_enabled=False)
    assert custom.format_remote_topic("A", "t") == "A_t" and custom.checkpoints_topic("A") == "A.checkpoints.internal"


@pytest.mark.parametrize("name", [JAVA + "Nope", "no.such.module.Policy", "mm2py.policy.NoSuchPolicy",
                                  "mm2py.filters.TopicFilter", "mm2py.policy.ReplicationPolicy", "Nope"])
def test_loader_rejects_bad_names_naming_the_key(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_policy(name)
    assert "replication.policy.class" in str(err.value) and name in str(err.value)


class Suffixing(ReplicationPolicy):
    """A custom policy defines only the three naming methods; ``configure`` is optional."""

    def __init__(self) -> None:
        self.alias_seen: str | None = None

    def configure(self, props: Mapping[str, object]) -> None:
        self.alias_seen = str(props.get("source.cluster.alias"))

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{topic}-from-{source_cluster_alias}"

    def topic_source(self, topic: str) -> str | None:
        return topic.rsplit("-from-", 1)[1] if "-from-" in topic else None

    def upstream_topic(self, topic: str) -> str | None:
        return topic.rsplit("-from-", 1)[0] if "-from-" in topic else None


def test_custom_policy_needs_only_three_methods() -> None:
    p = load_policy(f"{__name__}.Suffixing", source_cluster_alias="A")
    assert isinstance(p, Suffixing) and p.alias_seen == "A"
    assert p.original_topic("t-from-A-from-B") == "t"
    assert p.is_cycle("t-from-A-from-B", "A") and not p.is_cycle("t-from-A", "C")
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"  # MM2's interface defaults


def test_walks_end_on_policies_whose_upstream_loops() -> None:
    class Looping(Suffixing):
        def upstream_topic(self, topic: str) -> str | None:
            return "b" if topic == "a" else "a"

        def topic_source(self, topic: str) -> str | None:
            return "X"

    p = Looping()
    assert not p.is_cycle("a", "target") and p.original_topic("a") in ("a", "b")


def test_policies_pickle_for_spark_executors() -> None:
    p = pickle.loads(pickle.dumps(IdentityReplicationPolicy("A", "_", False)))
    assert (p.source_cluster_alias, p.separator, p.internal_topic_separator_enabled) == ("A", "_", False)


def test_empty_separator_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="replication.policy.separator"):
        DefaultReplicationPolicy("")
