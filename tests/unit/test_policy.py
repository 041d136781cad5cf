"""Replication policies and cycle detection, ported from MM2's MirrorSourceConnectorTest."""

from __future__ import annotations

import pickle

import pytest

from mm2py.errors import ConfigError
from mm2py.filters import GroupFilter, TopicFilter
from mm2py.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    find_cycle,
    load_policy,
)

ALL = TopicFilter((".*",), ())


def test_default_naming_and_tracing():
    p = DefaultReplicationPolicy()
    assert p.format_remote_topic("A", "orders") == "A.orders"
    assert p.topic_source("B.A.orders") == "B" and p.upstream_topic("B.A.orders") == "A.orders"
    assert p.original_topic("B.A.orders") == "orders"
    assert p.topic_source("orders") is None and p.upstream_topic("orders") is None


def test_custom_separator_and_internal_topic_names():
    p = DefaultReplicationPolicy("__")
    assert p.format_remote_topic("A", "t") == "A__t"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs__B__internal"
    assert p.checkpoints_topic("A") == "A__checkpoints__internal"
    legacy = DefaultReplicationPolicy("__", internal_topic_separator_enabled=False)
    assert legacy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert legacy.checkpoints_topic("A") == "A.checkpoints.internal"


def test_no_cycles():
    """MM2 testNoCycles: target is 'target'."""
    p = DefaultReplicationPolicy()
    for topic in ("target.topic1", "target.source.topic1", "source.target.topic1", "target.source.target.topic1",
                  "source.target.source.topic1"):
        assert p.is_cycle(topic, "target"), topic
        assert not p.should_replicate_topic(topic, "target", ALL)
    for topic in ("topic1", "source.topic1", "othersource.source.topic1"):
        assert not p.is_cycle(topic, "target")
        assert p.should_replicate_topic(topic, "target", ALL)


def test_internal_topics_never_replicate():
    p = DefaultReplicationPolicy()
    for topic in ("__consumer_offsets", ".hidden", "mm2-offsets.A.internal", "A.checkpoints.internal",
                  "x-internal", "heartbeats.internal"):
        assert not p.should_replicate_topic(topic, "B", ALL), topic


def test_heartbeats_follow_even_outside_the_filter():
    p = DefaultReplicationPolicy()
    only_orders = TopicFilter(("orders",), ())
    assert p.should_replicate_topic("heartbeats", "B", only_orders)
    assert p.should_replicate_topic("C.heartbeats", "B", only_orders)
    assert not p.should_replicate_topic("heartbeats", "B", only_orders, heartbeats_replication_enabled=False)
    assert not p.should_replicate_topic("B.heartbeats", "B", only_orders)


def test_identity_replication():
    """MM2 testIdentityReplication: names unchanged, heartbeats still prefixed."""
    p = IdentityReplicationPolicy("source")
    assert p.format_remote_topic("source", "topic1") == "topic1"
    assert p.format_remote_topic("source", "heartbeats") == "source.heartbeats"
    assert p.topic_source("topic1") == "source" and p.upstream_topic("topic1") == "topic1"
    assert p.original_topic("topic1") == "topic1"
    assert p.should_replicate_topic("topic1", "target", ALL)
    # cannot see cycles by name: this is why mm2py refuses cyclic Identity topologies
    assert not p.is_cycle("topic1", "target")
    assert p.is_cycle("target.heartbeats", "target")


def test_loader_accepts_java_short_and_python_names():
    java = "org.apache.kafka.connect.mirror."
    assert type(load_policy(java + "DefaultReplicationPolicy")) is DefaultReplicationPolicy
    ident = load_policy(java + "IdentityReplicationPolicy", source_cluster_alias="A")
    assert isinstance(ident, IdentityReplicationPolicy) and ident.topic_source("t") == "A"
    assert type(load_policy("IdentityReplicationPolicy")) is IdentityReplicationPolicy
    assert type(load_policy("mm2py.policy.DefaultReplicationPolicy", separator="_")).__name__ == \
        "DefaultReplicationPolicy"
    assert load_policy("DefaultReplicationPolicy", separator="_").format_remote_topic("A", "t") == "A_t"


@pytest.mark.parametrize("name", ["org.apache.kafka.connect.mirror.Nope", "no.such.module.Policy",
                                  "mm2py.filters.TopicFilter", "Nope"])
def test_loader_rejects_bad_names_naming_the_key(name):
    with pytest.raises(ConfigError) as err:
        load_policy(name)
    assert "replication.policy.class" in str(err.value) and name in str(err.value)


def test_custom_policy_needs_only_three_methods():
    class Suffix(ReplicationPolicy):
        def format_remote_topic(self, source, topic):  # noqa: ANN001, ANN201
            return f"{topic}-from-{source}"

        def topic_source(self, topic):  # noqa: ANN001, ANN201
            return topic.rsplit("-from-", 1)[1] if "-from-" in topic else None

        def upstream_topic(self, topic):  # noqa: ANN001, ANN201
            return topic.rsplit("-from-", 1)[0] if "-from-" in topic else None

    p = Suffix()
    assert p.original_topic("t-from-A-from-B") == "t"
    assert p.is_cycle("t-from-A-from-B", "A") and not p.is_cycle("t-from-A", "C")


def test_find_cycle():
    assert find_cycle([("A", "B"), ("B", "A")]) == ["A", "B", "A"]
    assert find_cycle([("A", "B"), ("B", "C"), ("C", "A")]) == ["A", "B", "C", "A"]
    assert find_cycle([("A", "K"), ("B", "K"), ("K", "C")]) is None


def test_filters_full_match_exclude_wins_and_pickle():
    f = TopicFilter(("orders.*", "pay"), ("orders-internal",))
    assert f.matches("orders-eu") and f.matches("pay") and not f.matches("payments")
    assert not f.matches("orders-internal") and not f.matches("xorders")
    g = pickle.loads(pickle.dumps(GroupFilter((".*",), ("console-consumer-.*",))))
    assert g.matches("app") and not g.matches("console-consumer-1")
