"""Issue 45: a source topic deleted and re-created with a different partition count while mirrored.

- more partitions, ``continue``: the remote topic grows to the new count; every partition holds
  the old records (if it had any) and then the new ones, in order;
- fewer partitions, ``continue``: refused, since the remote topic would keep partitions no source
  partition feeds: an ERROR names the topic and both counts, the ledger records the stop with the
  counts, B keeps exactly the old records, another topic goes on;
- fewer partitions, ``recreate``: the remote topic is created again with the new count and holds
  the new topic offset for offset.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mm2py.config import load_text
from mm2py.stores.ledger import RECREATED, Ledger
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.integration.target_checks import lines_with
from tests.kafkautil import consume_all, create_topic, delete_topic, end_offsets, list_topics, produce

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: minutes a test

OLD, NEW = 500, 300  # records per partition before and after the re-creation


def write(bootstrap: str, topic: str, generation: str, partitions: int, count: int) -> None:
    for p in range(partitions):
        produce(bootstrap, topic, [(f"k{n}".encode(), f"{generation}-{p}-{n}".encode(), None, None)
                                   for n in range(count)], partition=p)


def generation(name: str, p: int, count: int) -> list[str]:
    return [f"{name}-{p}-{n}" for n in range(count)]


def values(bootstrap: str, topic: str) -> dict[int, list[str]]:
    return {p: [r.value.decode() for r in recs] for p, recs in consume_all(bootstrap, topic).items()}


def recreate(bootstrap: str, topic: str, partitions: int) -> None:
    delete_topic(bootstrap, topic)
    deadline = time.monotonic() + 60
    while topic in list_topics(bootstrap) and time.monotonic() < deadline:
        time.sleep(0.5)
    create_topic(bootstrap, topic, partitions)


def start(tmp_path: Path, cluster_a, cluster_b, topics: str, policy: str) -> tuple[Path, Path, Replicator]:
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topics, "source.reset.policy": policy}},
                      extra="refresh.topics.interval.seconds = 2\n")
    path, log = tmp_path / "mm2.properties", tmp_path / "mm2.log"
    path.write_text(text)
    return path, log, Replicator(path, log).start()


def ledger_of(path: Path, topic: str) -> list:
    config = load_text(path.read_text())
    return [e for e in Ledger(config.clusters["B"], "A", "A->B").load().entries if e.topic == topic]


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_a_topic_recreated_with_more_partitions_grows_its_remote_topic_and_loses_nothing(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 2)
    write(cluster_a.bootstrap, topic, "old", 2, OLD)
    path, log, rep = start(tmp_path, cluster_a, cluster_b, topic, "continue")
    remote = f"A.{topic}"
    try:
        wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == {0: OLD, 1: OLD}, 240, "the old topic on B", rep)
        recreate(cluster_a.bootstrap, topic, 3)
        write(cluster_a.bootstrap, topic, "new", 3, NEW)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == {0: OLD + NEW, 1: OLD + NEW, 2: NEW}, 180,
                 "the new topic on B", rep)
    finally:
        assert rep.stop() == 0, rep.tail()
    got = values(cluster_b.bootstrap, remote)
    for p in (0, 1):
        assert got[p] == generation("old", p, OLD) + generation("new", p, NEW), f"partition {p}"
    assert got[2] == generation("new", 2, NEW), "the new partition: the new records alone"
    # every partition of the new topic id is in the ledger; the new one lands at its remote start
    assert sorted((e.partition, e.kind, e.action, e.target_new["start"]) for e in ledger_of(path, topic)) == [
        (0, RECREATED, "continue", OLD), (1, RECREATED, "continue", OLD), (2, RECREATED, "continue", 0)]


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_a_topic_recreated_with_fewer_partitions_is_refused_under_continue_naming_the_counts(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic, other = f"{unique_name}-t", f"{unique_name}-o"
    create_topic(cluster_a.bootstrap, topic, 3)
    create_topic(cluster_a.bootstrap, other, 1)
    write(cluster_a.bootstrap, topic, "old", 3, OLD)
    path, log, rep = start(tmp_path, cluster_a, cluster_b, f"{topic},{other}", "continue")
    remote = f"A.{topic}"
    try:
        wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == {p: OLD for p in range(3)}, 240,
                 "the old topic on B", rep)
        recreate(cluster_a.bootstrap, topic, 2)
        write(cluster_a.bootstrap, topic, "new", 2, NEW)
        wait_for(lambda: len(lines_with(log, "re-created with 2 partitions")) >= 2, 120, "the refusal", rep)
        produce(cluster_a.bootstrap, other, [(b"k", f"o{n}".encode(), None, None) for n in range(50)], partition=0)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, f"A.{other}") == {0: 50}, 120, "the other topic", rep)
        time.sleep(5)
    finally:
        assert rep.stop() == 0, rep.tail()
    got = values(cluster_b.bootstrap, remote)
    assert got == {p: generation("old", p, OLD) for p in range(3)}, "B keeps the old topic, nothing mixed in"
    refused = lines_with(log, "re-created with 2 partitions")
    assert all(f"remote topic {remote} has 3" in line and "error" in line for line in refused), refused
    entries = ledger_of(path, topic)
    assert sorted((e.partition, e.kind, e.action) for e in entries) == [(0, RECREATED, "stop"), (1, RECREATED, "stop")]
    assert all(e.source_new["partitions"] == 2 and e.target_old["partitions"] == 3 for e in entries)


def test_recreate_gives_the_remote_topic_the_new_smaller_partition_count(cluster_a, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 3)
    write(cluster_a.bootstrap, topic, "old", 3, OLD)
    path, log, rep = start(tmp_path, cluster_a, cluster_b, topic, "recreate")
    remote = f"A.{topic}"
    try:
        wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == {p: OLD for p in range(3)}, 240,
                 "the old topic on B", rep)
        recreate(cluster_a.bootstrap, topic, 2)
        write(cluster_a.bootstrap, topic, "new", 2, NEW)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == {0: NEW, 1: NEW}, 180,
                 "the new topic on B, with 2 partitions", rep)
    finally:
        assert rep.stop() == 0, rep.tail()
    assert values(cluster_b.bootstrap, remote) == {p: generation("new", p, NEW) for p in range(2)}
    assert sorted((e.partition, e.action, e.target_new.get("start")) for e in ledger_of(path, topic)) == [
        (0, "recreate", 0), (1, "recreate", 0)]
