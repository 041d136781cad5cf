"""Issue 23: the bench's landed check passes on a copy and reports duplicates and differences apart."""

from __future__ import annotations

import pytest

from bench.landed import check_landed
from mm2py.config.model import ClusterConfig
from tests.kafkautil import TS0, consume_all, create_topic, produce

pytestmark = pytest.mark.integration


def rows(bootstrap: str, topic: str) -> dict[int, list[tuple]]:
    return {p: [(r.key, r.value, list(r.headers) or None, r.timestamp) for r in records]
            for p, records in consume_all(bootstrap, topic).items()}


def source_topic(bootstrap: str, topic: str) -> dict[int, list[tuple]]:
    create_topic(bootstrap, topic, 3)
    for p in range(3):
        produce(bootstrap, topic, [(b"k%d" % i, b"v%d-%d" % (p, i), [("h", b"%d" % i)], TS0 + i)
                                   for i in range(30)], partition=p)
    return rows(bootstrap, topic)


def copy(bootstrap: str, topic: str, records: dict[int, list[tuple]]) -> None:
    create_topic(bootstrap, topic, len(records))
    for p, rs in records.items():
        produce(bootstrap, topic, rs, partition=p)


def test_a_copy_is_ok_then_a_duplicate_and_a_changed_record_are_reported(cluster_a, cluster_b, unique_name):
    src, dst = ClusterConfig("A", cluster_a.bootstrap), ClusterConfig("B", cluster_b.bootstrap)
    topic, remote = f"{unique_name}-t", f"A.{unique_name}-t"
    records = source_topic(cluster_a.bootstrap, topic)
    copy(cluster_b.bootstrap, remote, records)

    landed = check_landed(src, dst, [(topic, remote)])
    assert landed.ok and landed.verdict() == "ok"
    assert (landed.records_source, landed.records_target, landed.partitions) == (90, 90, 3)

    # at-least-once: partition 0's records 20-29 sent again after a "restart"
    produce(cluster_b.bootstrap, remote, records[0][20:], partition=0)
    landed = check_landed(src, dst, [(topic, remote)])
    assert landed.complete and not landed.ok
    assert (landed.records_target, landed.duplicates, landed.differing_partitions) == (100, 10, ())
    assert landed.verdict() == "10 dup / 0 diff"

    # a record on partition 1 that the source never had (record 3 with another value)
    key, _, headers, ts = records[1][3]
    produce(cluster_b.bootstrap, remote, [(key, b"changed", headers, ts)], partition=1)
    landed = check_landed(src, dst, [(topic, remote)])
    assert landed.differing_partitions == (f"{topic}:1",) and not landed.complete
    assert (landed.records_source, landed.records_target, landed.duplicates) == (90, 101, 11)
    assert landed.verdict() == "11 dup / 1 diff"


def test_changed_timestamp_header_and_missing_records_are_differences(cluster_a, cluster_b, unique_name):
    src, dst = ClusterConfig("A", cluster_a.bootstrap), ClusterConfig("B", cluster_b.bootstrap)
    topics = [f"{unique_name}-{i}" for i in range(3)]
    sources = [source_topic(cluster_a.bootstrap, t) for t in topics]
    # topic 0: an exact copy; topic 1: one timestamp and one header changed; topic 2: a record left out
    copy(cluster_b.bootstrap, f"A.{topics[0]}", sources[0])
    changed = {p: list(rs) for p, rs in sources[1].items()}
    key, value, headers, ts = changed[0][10]
    changed[0][10] = (key, value, headers, ts + 1)
    key, value, _, ts = changed[2][29]
    changed[2][29] = (key, value, [("h", b"other")], ts)
    copy(cluster_b.bootstrap, f"A.{topics[1]}", changed)
    copy(cluster_b.bootstrap, f"A.{topics[2]}", {p: rs[:-1] if p == 1 else rs for p, rs in sources[2].items()})

    landed = check_landed(src, dst, [(t, f"A.{t}") for t in topics], workers=2)
    assert landed.differing_partitions == (f"{topics[1]}:0", f"{topics[1]}:2", f"{topics[2]}:1")
    assert (landed.records_source, landed.records_target, landed.duplicates, landed.partitions) == (270, 269, 0, 9)
    assert landed.verdict() == "0 dup / 3 diff"


def test_a_missing_remote_topic_is_a_difference(cluster_a, cluster_b, unique_name):
    topic = f"{unique_name}-t"
    source_topic(cluster_a.bootstrap, topic)
    landed = check_landed(ClusterConfig("A", cluster_a.bootstrap), ClusterConfig("B", cluster_b.bootstrap),
                          [(topic, f"A.{topic}")])
    assert landed.records_target == 0 and landed.records_source == 90
    assert landed.differing_partitions == tuple(f"{topic}:{p}" for p in range(3))
