"""Issue 4: multi-cluster topologies from the files in examples/, on three real clusters.

Each test loads an example file, points its aliases at the session clusters and narrows its
topic filters to the test's own topics; then counts every record per topic per cluster.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2py.config import load_text
from mm2py.engine.driver import Engine
from mm2py.formats import OffsetSync
from mm2py.source.copy.rehash import key_partition
from tests.integration.mirror_helpers import REPO, Replicator, mirror_once, wait_for
from tests.kafkautil import (
    TS0,
    add_partitions,
    consume_all,
    create_topic,
    delete_topic,
    end_offsets,
    list_topics,
    produce,
)

pytestmark = pytest.mark.integration

EXAMPLES = REPO / "examples"
# fast refreshes and no checkpoint connector: these tests are about where records go
FAST = {"refresh.topics.interval.seconds": "1", "emit.checkpoints.enabled": "false",
        "emit.heartbeats.interval.seconds": "1", "trigger.interval.ms": "200"}


def example(name: str, bootstraps: dict[str, str], overrides: dict[str, str] | None = None) -> str:
    """An example file with ``{alias}.bootstrap.servers`` pointed at ``bootstraps`` and keys overridden.

    Keys are replaced where the file sets them (so the file's own lines stay what is tested)
    and appended otherwise.
    """
    settings = {f"{alias}.bootstrap.servers": b for alias, b in bootstraps.items()} | (overrides or {})
    text = (EXAMPLES / name).read_text()
    assert all(f"{alias}.bootstrap.servers" in text for alias in bootstraps), f"{name} lacks an alias"
    lines, done = [], set()
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip()
        if not line.lstrip().startswith("#") and "=" in line and key in settings:
            lines.append(f"{key} = {settings[key]}")
            done.add(key)
        else:
            lines.append(line)
    lines += [f"{k} = {v}" for k, v in settings.items() if k not in done]
    return "\n".join(lines) + "\n"


def records(tag: str, count: int) -> list:
    return [(f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode(), None, TS0 + i) for i in range(count)]


def seed(bootstrap: str, topic: str, count: int, partitions: int = 2) -> None:
    create_topic(bootstrap, topic, partitions)
    produce(bootstrap, topic, records(topic, count))


def total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def ours(bootstrap: str, unique: str) -> dict[str, int]:
    """Every topic on the cluster holding the test's name, with its record count."""
    return {t: total(bootstrap, t) for t in sorted(list_topics(bootstrap)) if unique in t}


@contextlib.contextmanager
def running(spark, text: str, tmp_path: Path) -> Iterator[Engine]:
    """Every enabled flow of ``text`` running continuously in-process, with heartbeats, as ``run`` does."""
    config = load_text(text)
    engine = Engine(config, spark, str(tmp_path / "ckpt"))
    try:
        engine.start(config.enabled_flows, heartbeat_flows=config.flows)
        yield engine
    finally:
        engine.stop()


def test_active_active_nothing_loops(spark, cluster_a, cluster_b, unique_name, tmp_path):
    u = unique_name
    seed(cluster_a.bootstrap, f"{u}-on-a", 300)
    seed(cluster_b.bootstrap, f"{u}-on-b", 200)
    # the filter also matches remote names (A.<u>-on-a on B): only the policy keeps them home
    wide = f".*{re.escape(u)}.*"
    text = example("active-active.properties", {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                   {"A->B.topics": wide, "B->A.topics": wide, **FAST})
    want_a = {f"{u}-on-a": 300, f"B.{u}-on-b": 200}
    want_b = {f"{u}-on-b": 200, f"A.{u}-on-a": 300}
    with running(spark, text, tmp_path):
        wait_for(lambda: ours(cluster_a.bootstrap, u) == want_a and ours(cluster_b.bootstrap, u) == want_b,
                 180, "both directions mirrored")
        time.sleep(3 * 1 + 3)  # three refresh intervals, and a micro-batch more
        produce(cluster_a.bootstrap, f"{u}-on-a", records("late", 10))
        wait_for(lambda: total(cluster_b.bootstrap, f"A.{u}-on-a") == 310, 120, "later records mirrored")
        time.sleep(4)
        on_a, on_b = ours(cluster_a.bootstrap, u), ours(cluster_b.bootstrap, u)
    assert on_a == {f"{u}-on-a": 310, f"B.{u}-on-b": 200}, on_a
    assert on_b == {f"{u}-on-b": 200, f"A.{u}-on-a": 310}, on_b


def test_aggregation_hub(spark, cluster_a, cluster_b, cluster_c, unique_name, tmp_path):
    u = unique_name
    seed(cluster_a.bootstrap, f"orders-{u}", 120)
    seed(cluster_a.bootstrap, f"payments-{u}", 80)
    seed(cluster_b.bootstrap, f"orders-{u}", 150)
    seed(cluster_a.bootstrap, f"other-{u}", 50)  # not in the hub's filter
    # the example's own filters (orders.*, payments.*), narrowed to this test's topics
    only = f"orders-{u}, payments-{u}"
    text = example("hub.properties", {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap, "K": cluster_c.bootstrap},
                   {"A->K.topics": only, "B->K.topics": only, **FAST})
    mirror_once(spark, text, tmp_path)
    assert ours(cluster_c.bootstrap, u) == {f"A.orders-{u}": 120, f"A.payments-{u}": 80, f"B.orders-{u}": 150}
    assert ours(cluster_a.bootstrap, u) == {f"orders-{u}": 120, f"payments-{u}": 80, f"other-{u}": 50}
    assert ours(cluster_b.bootstrap, u) == {f"orders-{u}": 150}


def test_fan_out(spark, cluster_a, cluster_b, cluster_c, unique_name, tmp_path):
    u = unique_name
    seed(cluster_c.bootstrap, f"reference-{u}", 100, partitions=3)
    seed(cluster_c.bootstrap, f"prices-{u}", 70)
    only = f"reference-{u}, prices-{u}"
    text = example("fan-out.properties",
                   {"K": cluster_c.bootstrap, "A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                   {"K->A.topics": only, "K->B.topics": only, **FAST})
    mirror_once(spark, text, tmp_path)
    for cluster in (cluster_a, cluster_b):
        assert ours(cluster.bootstrap, u) == {f"K.reference-{u}": 100, f"K.prices-{u}": 70}
        assert end_offsets(cluster.bootstrap, f"K.reference-{u}").keys() == {0, 1, 2}
    assert ours(cluster_c.bootstrap, u) == {f"reference-{u}": 100, f"prices-{u}": 70}


def test_chain_two_hops(spark, cluster_a, cluster_b, cluster_c, unique_name, tmp_path):
    u = unique_name
    seed(cluster_a.bootstrap, f"{u}-t", 250)
    # Heartbeat topics left on the shared C by other tests (A.heartbeats from the hub test) would
    # be shorter paths from A; hops are about this chain, so C starts without any.
    for stale in [t for t in list_topics(cluster_c.bootstrap) if t.endswith("heartbeats")]:
        delete_topic(cluster_c.bootstrap, stale)
    wide = f".*{re.escape(u)}.*"
    bootstraps = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap, "C": cluster_c.bootstrap}
    text = example("chain.properties", bootstraps, {"A->B.topics": wide, "B->C.topics": wide, **FAST})
    with running(spark, text, tmp_path):
        wait_for(lambda: ours(cluster_c.bootstrap, u) == {f"B.A.{u}-t": 250}, 180, "A's topic two hops away on C")
        # heartbeats take the same path: heartbeats on A, A.heartbeats on B, B.A.heartbeats on C
        wait_for(lambda: "B.A.heartbeats" in list_topics(cluster_c.bootstrap), 120, "B.A.heartbeats on C")
    assert ours(cluster_b.bootstrap, u) == {f"A.{u}-t": 250}
    assert ours(cluster_a.bootstrap, u) == {f"{u}-t": 250}
    from mm2py.client import MirrorClient

    client = MirrorClient.for_cluster(load_text(text), "C")
    assert client._hops("B.A.heartbeats") == ["B", "A"]
    assert client.replication_hops("B") == 1
    assert client.replication_hops("A") == 2


def test_processes_split_flows_with_clusters(cluster_a, cluster_b, unique_name, tmp_path):
    """Two CLI processes on one file, each running the flows into its own cluster."""
    u = unique_name
    seed(cluster_a.bootstrap, f"{u}-on-a", 150)
    seed(cluster_b.bootstrap, f"{u}-on-b", 90)
    wide = f".*{re.escape(u)}.*"
    config = tmp_path / "active-active.properties"
    config.write_text(example("active-active.properties", {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                              {"A->B.topics": wide, "B->A.topics": wide, **FAST}))
    into_b = Replicator(config, tmp_path / "into-b.log", "--clusters", "B").start()
    into_a = Replicator(config, tmp_path / "into-a.log", "--clusters", "A").start()
    try:
        wait_for(lambda: ours(cluster_b.bootstrap, u) == {f"{u}-on-b": 90, f"A.{u}-on-a": 150}, 240,
                 "A->B by the process for B", into_b)
        wait_for(lambda: ours(cluster_a.bootstrap, u) == {f"{u}-on-a": 150, f"B.{u}-on-b": 90}, 240,
                 "B->A by the process for A", into_a)
    finally:
        rc_b, rc_a = into_b.stop(), into_a.stop()
    assert (rc_a, rc_b) == (0, 0), (into_a.tail(), into_b.tail())
    assert started_flows(tmp_path / "into-b.log") == {"A->B"}, into_b.tail()
    assert started_flows(tmp_path / "into-a.log") == {"B->A"}, into_a.tail()


def started_flows(log: Path) -> set[str]:
    """Flows a process started, from its JSON log lines."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return {e["flow"] for e in events if e.get("event") == "flow started"}


def test_identity_cycle_without_provenance_refused_by_the_cli(cluster_a, cluster_b, tmp_path):
    config = tmp_path / "identity-active-active.properties"
    config.write_text(example("active-active.properties", {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                              {"replication.policy.class":
                               "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
                               "provenance.enabled": "false"}))
    rep = Replicator(config, tmp_path / "mm2.log", "--once").start()
    assert rep.proc is not None
    rc = rep.proc.wait(120)
    out = rep.tail()
    assert rc == 2, out
    assert "cycle A->B->A" in out and "IdentityReplicationPolicy" in out, out
    assert "flow started" not in out



def test_identity_both_ways_mirrors_what_cannot_loop_and_holds_back_what_would(cluster_a, cluster_b, unique_name,
                                                                              tmp_path):
    """Identity A->B + B->A without provenance: disjoint names flow; a name both select is held back."""
    u = unique_name
    orders, payments, shared = f"{u}-orders", f"{u}-payments", f"{u}-shared"
    seed(cluster_a.bootstrap, orders, 30)
    seed(cluster_b.bootstrap, payments, 20)
    seed(cluster_a.bootstrap, shared, 5)
    seed(cluster_b.bootstrap, shared, 7)
    identity = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    config = tmp_path / "identity-both-ways.properties"
    config.write_text(example("active-active.properties", {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                              {"replication.policy.class": identity, **FAST, "provenance.enabled": "false",
                               "A->B.topics": f"{orders}, {shared}", "B->A.topics": f"{payments}, {shared}",
                               "A->B.groups": "none", "B->A.groups": "none"}))
    rep = Replicator(config, tmp_path / "mm2.log", "--once").start()
    assert rep.proc is not None
    rc = rep.proc.wait(240)
    out = (tmp_path / "mm2.log").read_text()
    assert rc == 0, rep.tail()
    assert ours(cluster_b.bootstrap, u) == {orders: 30, payments: 20, shared: 7}, out[-3000:]
    assert ours(cluster_a.bootstrap, u) == {orders: 30, payments: 20, shared: 5}, out[-3000:]
    held = [line for line in out.splitlines() if f"topic '{shared}' is not mirrored" in line]
    assert any("cycle A->B->A" in line for line in held), out[-3000:]
    assert any("cycle B->A->B" in line for line in held), out[-3000:]


# -- remote topics that differ from their source ------------------------------------------------------


def ab_flow(cluster_a, cluster_b, topics: str, **keys: str) -> str:
    return example("active-passive.properties", {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                   {"A->B.topics": topics, **FAST, **{k.replace("_", "."): v for k, v in keys.items()}})


def test_target_with_fewer_partitions_is_an_error(spark, cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    seed(cluster_a.bootstrap, topic, 60, partitions=3)
    create_topic(cluster_b.bootstrap, f"A.{topic}", 1)  # someone else's, too small
    # the query fails with the planner's error inside Spark's (StreamingQueryException)
    with pytest.raises(Exception) as err:  # the message is what is checked
        mirror_once(spark, ab_flow(cluster_a, cluster_b, topic), tmp_path, timeout=120)
    message = str(err.value)
    assert f"remote topic A.{topic} has 1 partitions, fewer than the 3 of source topic {topic}" in message
    assert end_offsets(cluster_b.bootstrap, f"A.{topic}") == {0: 0}, "nothing written, not grown"


def test_fewer_partitions_hash_places_keys_like_java(spark, cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 3)
    keyed = [(f"key-{i}".encode(), f"v{i}".encode(), [("h", b"x")], TS0 + i) for i in range(240)]
    produce(cluster_a.bootstrap, topic, keyed)
    produce(cluster_a.bootstrap, topic, [(None, f"nokey{i}".encode(), None, TS0 + i) for i in range(30)], partition=1)
    create_topic(cluster_b.bootstrap, f"A.{topic}", 2)
    mirror_once(spark, ab_flow(cluster_a, cluster_b, topic, partition_mismatch="hash"), tmp_path)

    got = consume_all(cluster_b.bootstrap, f"A.{topic}")
    assert sorted(got) == [0, 1], "the target keeps its own 2 partitions"
    on_target = [r for p in got.values() for r in p]
    assert len(on_target) == 270
    for p, recs in got.items():
        for r in recs:
            if r.key is not None:
                assert p == key_partition(r.key, 2), f"{r.key!r} on partition {p}"
    assert {r.key: (r.value, r.headers, r.timestamp) for r in on_target if r.key} == {
        k: (v, tuple(h), ts) for k, v, h, ts in keyed}
    assert sorted(r.value for r in on_target if r.key is None) == sorted(f"nokey{i}".encode() for i in range(30))
    syncs_topic = "mm2-offset-syncs.B.internal"
    syncs = [OffsetSync.from_record(r.key, r.value) for p in consume_all(cluster_a.bootstrap, syncs_topic).values()
             for r in p] if syncs_topic in list_topics(cluster_a.bootstrap) else []
    assert not [s for s in syncs if s.topic == topic], "no offset syncs for a re-partitioned topic"


def test_partition_growth_and_new_topic_within_refresh_interval(spark, cluster_a, cluster_b, unique_name,
                                                                tmp_path):
    first, later = f"{unique_name}-first", f"{unique_name}-later"
    seed(cluster_a.bootstrap, first, 40, partitions=1)
    with running(spark, ab_flow(cluster_a, cluster_b, f"{re.escape(unique_name)}.*"), tmp_path):
        wait_for(lambda: total(cluster_b.bootstrap, f"A.{first}") == 40, 120, "first topic mirrored")
        add_partitions(cluster_a.bootstrap, first, 3)
        produce(cluster_a.bootstrap, first, records("p2", 25), partition=2)
        seed(cluster_a.bootstrap, later, 35)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, f"A.{first}").get(2) == 25, 60, "partition 2 grown")
        wait_for(lambda: total(cluster_b.bootstrap, f"A.{later}") == 35, 60, "new topic mirrored")
    assert end_offsets(cluster_b.bootstrap, f"A.{first}") == end_offsets(cluster_a.bootstrap, first)


@pytest.mark.parametrize("enabled", [True, False])
def test_sync_topic_deletes(spark, cluster_a, cluster_b, unique_name, tmp_path, enabled):
    doomed, kept = f"{unique_name}-doomed", f"{unique_name}-kept"
    seed(cluster_a.bootstrap, doomed, 20)
    seed(cluster_a.bootstrap, kept, 20)
    create_topic(cluster_b.bootstrap, f"{unique_name}-local", 1)  # B's own: never a candidate
    # admin.timeout.ms bounds the wait on a topic deleted between two refreshes
    text = ab_flow(cluster_a, cluster_b, f"{re.escape(unique_name)}.*",
                   **{"sync.topic.deletes.enabled": str(enabled).lower(), "admin.timeout.ms": "15000"})
    with running(spark, text, tmp_path):
        wait_for(lambda: total(cluster_b.bootstrap, f"A.{doomed}") == 20 and total(cluster_b.bootstrap, f"A.{kept}")
                 == 20, 120, "both mirrored")
        delete_topic(cluster_a.bootstrap, doomed)
        if enabled:
            wait_for(lambda: f"A.{doomed}" not in list_topics(cluster_b.bootstrap), 60, "remote topic deleted")
        else:
            time.sleep(3 * 1 + 3)  # three refresh intervals and more
        produce(cluster_a.bootstrap, kept, records("more", 5))
        wait_for(lambda: total(cluster_b.bootstrap, f"A.{kept}") == 25, 60, "the flow goes on")
    on_b = list_topics(cluster_b.bootstrap)
    assert (f"A.{doomed}" in on_b) is not enabled
    assert f"A.{kept}" in on_b and f"{unique_name}-local" in on_b
