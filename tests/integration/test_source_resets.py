"""Issue 45: no record lost when a source partition goes back.

A source topic deleted and created again while mirrored: under ``source.reset.policy = continue``
(the default) every record of both generations lands on B in order, the ledger on B names the
case and the log says so; under ``stop`` the topic stops with a named error while another topic
keeps flowing; a flow restarted after the topic came back with fewer records than its position
finds it in its first plan."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mm2py.checkpoint.task import load_syncs
from mm2py.config import load_text
from mm2py.kafka.admin import Admin
from mm2py.ops.failover import plan_failover
from mm2py.stores.ledger import RECREATED, Ledger
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.integration.target_checks import lines_with, partitions_named
from tests.kafkautil import commit_offsets, consume_all, create_topic, delete_topic, end_offsets, list_topics, produce

pytestmark = pytest.mark.integration

PARTITIONS = 2
OLD, NEW = 1000, 600  # records per partition before and after the topic is re-created


def write(bootstrap: str, topic: str, generation: str, count: int, first: int = 0) -> None:
    """``count`` records per partition, values unique per record: ``{generation}-{partition}-{n}``."""
    for p in range(PARTITIONS):
        produce(bootstrap, topic, [(f"k{n}".encode(), f"{generation}-{p}-{n}".encode(), None, None)
                                   for n in range(first, first + count)], partition=p)


def values(bootstrap: str, topic: str) -> dict[int, list[str]]:
    if topic not in list_topics(bootstrap):
        return {}
    return {p: [r.value.decode() for r in recs] for p, recs in consume_all(bootstrap, topic).items()}


def counts(bootstrap: str, topic: str) -> dict[int, int]:
    return end_offsets(bootstrap, topic)


def recreate(bootstrap: str, topic: str) -> None:
    delete_topic(bootstrap, topic)
    deadline = time.monotonic() + 60
    while topic in list_topics(bootstrap) and time.monotonic() < deadline:
        time.sleep(0.5)
    create_topic(bootstrap, topic, PARTITIONS)


def commit_all(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """Commit ``offset`` for every partition of ``topic`` in ``group``, as a consumer of the new topic would."""
    commit_offsets(bootstrap, group, {(topic, p): offset for p in range(PARTITIONS)})


def expected(generation: str, count: int) -> list[str]:
    return [f"{generation}-{{p}}-{n}" for n in range(count)]


def both_generations(p: int) -> list[str]:
    return [v.format(p=p) for v in expected("old", OLD) + expected("new", NEW)]


def config_for(tmp_path: Path, cluster_a, cluster_b, topics: str, extra: dict | None = None) -> Path:
    keys = {"topics": topics, **(extra or {})}
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys},
                      extra="refresh.topics.interval.seconds = 2\n")
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return path


def test_a_topic_recreated_while_mirrored_loses_nothing_under_continue(cluster_a, cluster_b, unique_name, tmp_path):
    topic, other = f"{unique_name}-t", f"{unique_name}-o"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    create_topic(cluster_a.bootstrap, other, 1)
    write(cluster_a.bootstrap, topic, "old", OLD)
    path = config_for(tmp_path, cluster_a, cluster_b, f"{topic},{other}")
    log = tmp_path / "mm2.log"
    rep = Replicator(path, log).start()
    try:
        wait_for(lambda: counts(cluster_b.bootstrap, f"A.{topic}") == {0: OLD, 1: OLD}, 240,
                 "the first generation on B", rep)
        recreate(cluster_a.bootstrap, topic)
        write(cluster_a.bootstrap, topic, "new", NEW)  # fewer than the position: the log ends below it
        produce(cluster_a.bootstrap, other, [(b"k", f"o{n}".encode(), None, None) for n in range(50)], partition=0)
        wait_for(lambda: counts(cluster_b.bootstrap, f"A.{topic}") == {0: OLD + NEW, 1: OLD + NEW}, 180,
                 "the second generation on B", rep)
        wait_for(lambda: counts(cluster_b.bootstrap, f"A.{other}") == {0: 50}, 60, "the other topic on B", rep)
    finally:
        assert rep.stop() == 0, rep.tail()
    got = values(cluster_b.bootstrap, f"A.{topic}")
    for p in range(PARTITIONS):
        assert got[p] == both_generations(p), f"partition {p}: both generations, in order, each record once"
    config = load_text(path.read_text())
    ledger = Ledger(config.clusters["B"], "A", "A->B").load()
    cases = [e for e in ledger.entries if e.topic == topic]
    assert {e.partition for e in cases} == set(range(PARTITIONS)), cases
    for e in cases:
        assert e.kind == RECREATED and e.action == "continue"
        assert e.source_old["end"] == OLD and e.source_new["start"] == 0
        assert e.target_new["start"] == OLD, "the new records land after what B held"
    warned = lines_with(log, "deleted and created again")
    assert partitions_named(warned, topic) == set(range(PARTITIONS)), log.read_text()[-3000:]
    assert all("warning" in line and "action=continue" in line for line in warned)
    # a group of the new topic translates through the new syncs only
    syncs = load_syncs(config.enabled_flows[0])
    for p in range(PARTITIONS):
        assert syncs.translate(topic, p, 300) == OLD + 300
        assert syncs.translate(topic, p, NEW) == OLD + NEW


def test_stop_stops_the_recreated_topic_with_a_named_error_while_another_topic_flows(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic, other = f"{unique_name}-t", f"{unique_name}-o"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    create_topic(cluster_a.bootstrap, other, 1)
    write(cluster_a.bootstrap, topic, "old", OLD)
    path = config_for(tmp_path, cluster_a, cluster_b, f"{topic},{other}", {"source.reset.policy": "stop"})
    log = tmp_path / "mm2.log"
    rep = Replicator(path, log).start()
    try:
        wait_for(lambda: counts(cluster_b.bootstrap, f"A.{topic}") == {0: OLD, 1: OLD}, 240,
                 "the first generation on B", rep)
        recreate(cluster_a.bootstrap, topic)
        write(cluster_a.bootstrap, topic, "new", OLD + 200)  # past the old position: only the id tells
        wait_for(lambda: bool(lines_with(log, "partition stopped")), 120, "the stop's error", rep)
        produce(cluster_a.bootstrap, other, [(b"k", f"o{n}".encode(), None, None) for n in range(50)], partition=0)
        wait_for(lambda: counts(cluster_b.bootstrap, f"A.{other}") == {0: 50}, 120, "the other topic on B", rep)
        time.sleep(5)
    finally:
        assert rep.stop() == 0, rep.tail()
    assert counts(cluster_b.bootstrap, f"A.{topic}") == {0: OLD, 1: OLD}, "nothing of the new topic copied"
    stopped = lines_with(log, "partition stopped")
    assert partitions_named(stopped, topic) == set(range(PARTITIONS)), log.read_text()[-3000:]
    assert all("error" in line and "source.reset.policy = stop" in line for line in stopped)
    ledger = Ledger(load_text(path.read_text()).clusters["B"], "A", "A->B").load()
    assert sorted((e.partition, e.action) for e in ledger.entries if e.topic == topic) == [
        (p, "stop") for p in range(PARTITIONS)]


def test_a_restarted_flow_finds_a_topic_recreated_meanwhile_in_its_first_plan(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    write(cluster_a.bootstrap, topic, "old", OLD)
    path = config_for(tmp_path, cluster_a, cluster_b, topic)
    log = tmp_path / "mm2.log"
    config = load_text(path.read_text())
    group = f"{unique_name}-g"
    for run in range(2):
        if run:  # while mm2py is down: re-created with fewer records than the recorded positions
            recreate(cluster_a.bootstrap, topic)
            write(cluster_a.bootstrap, topic, "new", NEW)
            commit_all(cluster_a.bootstrap, group, topic, 300)
            # not taken up yet: only the old topic's syncs exist, so a failover is refused with the reason
            refused = plan_failover(config, group, "A", "B").partitions
            assert {(r.partition, r.target_offset) for r in refused} == {(p, None) for p in range(PARTITIONS)}
            assert all("re-created" in r.how for r in refused), refused
        rep = Replicator(path, log, "--once").start()
        assert rep.proc is not None
        rep.proc.wait(300)
        assert rep.proc.returncode == 0, rep.tail()
    got = values(cluster_b.bootstrap, f"A.{topic}")
    for p in range(PARTITIONS):
        assert got[p] == both_generations(p), f"partition {p}"
    ledger = Ledger(config.clusters["B"], "A", "A->B").load()
    assert sorted((e.partition, e.kind) for e in ledger.entries if e.topic == topic) == [
        (p, RECREATED) for p in range(PARTITIONS)]
    # the ledger's id (from the planner's Metadata) and the admin's (DescribeTopics) are spelled alike
    assert Admin(config.clusters["A"]).topic_ids([topic]) == {topic: ledger.topic_ids[topic]}
    placed = plan_failover(config, group, "A", "B").offsets
    assert placed == {(f"A.{topic}", p): OLD + 300 for p in range(PARTITIONS)}, "exact once taken up"


def test_recreate_mirrors_the_new_topic_offset_for_offset_from_zero(cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    write(cluster_a.bootstrap, topic, "old", OLD)
    path = config_for(tmp_path, cluster_a, cluster_b, topic, {"source.reset.policy": "recreate"})
    log = tmp_path / "mm2.log"
    for run in range(2):
        if run:
            recreate(cluster_a.bootstrap, topic)
            write(cluster_a.bootstrap, topic, "new", NEW)
        rep = Replicator(path, log, "--once").start()
        assert rep.proc is not None
        rep.proc.wait(300)
        assert rep.proc.returncode == 0, rep.tail()
    got = values(cluster_b.bootstrap, f"A.{topic}")
    for p in range(PARTITIONS):
        assert got[p] == [v.format(p=p) for v in expected("new", NEW)], f"partition {p}: the new topic alone"
    assert counts(cluster_b.bootstrap, f"A.{topic}") == {p: NEW for p in range(PARTITIONS)}
    config = load_text(path.read_text())
    ledger = Ledger(config.clusters["B"], "A", "A->B").load()
    assert sorted((e.partition, e.action, e.target_new.get("start")) for e in ledger.entries if e.topic == topic) == [
        (p, "recreate", 0) for p in range(PARTITIONS)]
    syncs = load_syncs(config.enabled_flows[0])
    for p in range(PARTITIONS):
        assert syncs.translate(topic, p, 300) == 300, "offset for offset"
