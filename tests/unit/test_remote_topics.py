"""Remote topics that differ from their source: fewer partitions (hash by key) and deleted sources."""

from __future__ import annotations

import dataclasses

import pytest

from mm2py.config import load_text
from mm2py.config.filters import TopicFilter
from mm2py.errors import KafkaError
from mm2py.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from mm2py.source.copy.rehash import key_partition, murmur2
from mm2py.source.plan.deletes import orphaned_remote_topics
from mm2py.source.plan.mismatch import Action, on_fewer_partitions

FLOW = load_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
                 ).enabled_flows[0]


def test_murmur2_matches_kafka_utils() -> None:
    # the vectors of Kafka's UtilsTest.testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for data, want in cases.items():
        assert murmur2(data) == want, data


def test_key_partition_is_java_to_positive_modulo() -> None:
    assert key_partition(b"foobar", 3) == (-790332482 & 0x7FFFFFFF) % 3
    assert {key_partition(f"k{i}".encode(), 2) for i in range(50)} == {0, 1}


def test_fewer_partitions_grow_ours_else_error_or_hash() -> None:
    assert on_fewer_partitions(FLOW, "t", "A.t", 1, 3, ours=True) is Action.GROW
    with pytest.raises(KafkaError) as err:
        on_fewer_partitions(FLOW, "t", "A.t", 1, 3, ours=False)
    message = str(err.value)
    assert "A.t has 1 partitions" in message and "the 3 of source topic t" in message
    assert "partition.mismatch = hash" in message
    hashing = dataclasses.replace(FLOW, delivery=dataclasses.replace(FLOW.delivery, partition_mismatch="hash"))
    assert on_fewer_partitions(hashing, "t", "A.t", 1, 3, ours=False) is Action.HASH


def test_orphaned_remote_topics_only_this_flows() -> None:
    policy = DefaultReplicationPolicy()
    found = orphaned_remote_topics(
        policy, "A", "B", TopicFilter(("keep.*", "gone.*"), ()),
        source_topics=["keep"],
        target_topics=["A.keep", "A.gone", "C.gone", "gone", "A.other", "A.B.gone", "A.heartbeats"],
    )
    # A.gone: A's, filtered in, deleted on A. Not C's topic, not local ones, not filtered-out ones,
    # not A.B.gone (would be a cycle back into B), and heartbeats only when A lost its heartbeats
    assert found == ["A.gone", "A.heartbeats"]


def test_identity_policy_deletes_nothing() -> None:
    policy = IdentityReplicationPolicy("A")
    assert orphaned_remote_topics(policy, "A", "B", TopicFilter((".*",), ()), ["keep"], ["gone", "keep"]) == []
