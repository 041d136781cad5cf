"""Issue 45: the remote topic deleted on B mid-flow is filled again from the source's log start,
and what the source no longer holds is named as lost: never a silent hole.

The flow creates the remote topic again, records a ``remote-deleted`` event in the ledger, and
copies every partition again from the source's log start with an offset sync ``(log start, 0)``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mm2py.checkpoint.task import load_syncs
from mm2py.config import load_text
from mm2py.stores.ledger import REMOTE_DELETED, Ledger
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.integration.target_checks import delete_records, lines_with, partitions_named
from tests.kafkautil import consume_all, create_topic, delete_topic, end_offsets, list_topics, produce

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: minutes a test

PARTITIONS = 2
BEFORE, AFTER = 500, 200  # records per partition before and after the remote topic is deleted


def write(bootstrap: str, topic: str, first: int, count: int) -> None:
    for p in range(PARTITIONS):
        produce(bootstrap, topic, [(f"k{n}".encode(), f"{p}-{n}".encode(), None, None)
                                   for n in range(first, first + count)], partition=p)


def run_deleting_the_remote_topic(cluster_a, cluster_b, topic: str, tmp_path: Path,
                                  log_start: int) -> tuple[Path, Path]:
    """Mirror, move the source's log start to ``log_start``, delete the remote topic, write more."""
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    write(cluster_a.bootstrap, topic, 0, BEFORE)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}},
                      extra="refresh.topics.interval.seconds = 2\n")
    path, log = tmp_path / "mm2.properties", tmp_path / "mm2.log"
    path.write_text(text)
    remote = f"A.{topic}"
    rep = Replicator(path, log).start()
    try:
        wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == {p: BEFORE for p in range(PARTITIONS)}, 240,
                 "the first records on B", rep)
        if log_start:
            delete_records(cluster_a.bootstrap, {(topic, p): log_start for p in range(PARTITIONS)})
        delete_topic(cluster_b.bootstrap, remote)
        deadline = time.monotonic() + 60
        while remote in list_topics(cluster_b.bootstrap) and time.monotonic() < deadline:
            time.sleep(0.2)
        write(cluster_a.bootstrap, topic, BEFORE, AFTER)
        held = BEFORE + AFTER - log_start
        wait_for(lambda: remote in list_topics(cluster_b.bootstrap)
                 and end_offsets(cluster_b.bootstrap, remote) == {p: held for p in range(PARTITIONS)}, 180,
                 "the remote topic filled again", rep)
        time.sleep(3)  # nothing more arrives
    finally:
        assert rep.stop() == 0, rep.tail()
    return path, log


def check_refilled(cluster_a, cluster_b, topic: str, path: Path, log_start: int) -> None:
    source, target = consume_all(cluster_a.bootstrap, topic), consume_all(cluster_b.bootstrap, f"A.{topic}")
    for p in range(PARTITIONS):
        assert [r.offset for r in source[p]] == list(range(log_start, BEFORE + AFTER))
        assert [(r.key, r.value) for r in target[p]] == [(r.key, r.value) for r in source[p]], f"partition {p}"
    config = load_text(path.read_text())
    entries = [e for e in Ledger(config.clusters["B"], "A", "A->B").load().entries if e.topic == topic]
    assert sorted((e.partition, e.kind, e.action, e.source_new["start"], e.target_new["start"]) for e in entries) == [
        (p, REMOTE_DELETED, "refill", log_start, 0) for p in range(PARTITIONS)]
    syncs = load_syncs(config.enabled_flows[0])
    for p in range(PARTITIONS):
        assert syncs.translate(topic, p, BEFORE + 50) == BEFORE + 50 - log_start, "offsets of the new remote topic"


def test_a_remote_topic_deleted_mid_flow_is_filled_again_from_the_source_log_start(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name
    path, log = run_deleting_the_remote_topic(cluster_a, cluster_b, topic, tmp_path, 0)
    check_refilled(cluster_a, cluster_b, topic, path, 0)
    warned = lines_with(log, "remote topic was deleted on the target")
    assert partitions_named(warned, topic) == set(range(PARTITIONS)), log.read_text()[-3000:]
    assert all("nothing is lost" in line for line in warned)


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_a_remote_topic_deleted_after_the_source_log_start_moved_names_what_is_lost(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name
    path, log = run_deleting_the_remote_topic(cluster_a, cluster_b, topic, tmp_path, 200)
    check_refilled(cluster_a, cluster_b, topic, path, 200)
    lost = lines_with(log, "below source offset 200 it held are lost on the target")
    assert partitions_named(lost, topic) == set(range(PARTITIONS)), log.read_text()[-3000:]
    assert all("error" in line for line in lost)
