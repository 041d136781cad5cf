"""Issue 45: an unclean leader election on a three-broker source loses no record on the target.

The source partition has two replicas (unclean.leader.election.enable, min.insync.replicas 1).
The flow mirrors while both are in sync, and again after the follower was stopped and the leader
took more records alone (acks=1). Then the leader stops, the stale follower is elected uncleanly
and takes new records at the offsets the flow mirrored from the old leader, until its log end
passes the flow's position: the log-end check sees nothing wrong there, only the leader epoch
of the last batch the flow copied tells (KIP-320, mm2py.source.plan.divergence). The old leader comes
back and truncates its log to the new leader's. B must hold, in order, everything the source
held at each mirror, and every record of the new log from the divergence point after that; the
ledger names the mirrored records the source lost. Before the flow takes the divergence up,
``failover`` refuses a group at or past the divergence point (naming it) and translates one
below it; after, the group past it lands on the copy of the new log's record it reads next.

Kafka 4.x with eligible leader replicas (KIP-966, on by default for new clusters since 4.1): the
stale follower is in neither the ISR nor the ELR, so the controller elects it only when asked
for an UNCLEAN election (KIP-460, ``kafka-leader-election --election-type UNCLEAN``), which
``elect_uncleanly`` does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2py.cli import main
from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.ops.failover import plan_failover
from mm2py.stores.ledger import TRUNCATED, Ledger
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import mirror_once, properties, three_brokers
from tests.kafkautil import commit_offsets, consume_all, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # three brokers, two stopped and started again

NAME = "unclean"
PORT = 28692 + PORT_OFFSET  # brokers on PORT, +2, +4; their controllers on PORT+1, +3, +5
LEADER, FOLLOWER = 1, 2  # node ids (= indexes) of the partition's replicas; node 0 stays up throughout
IN_SYNC, ALONE, NEW, AFTER = 300, 200, 400, 100  # records: both replicas, the old leader alone, new leader, both


@pytest.fixture
def trio(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    with three_brokers(NAME, PORT, cluster_workdir) as cluster:  # a stopped broker is fenced within 6 s
        yield cluster


def records(tag: str, first: int, count: int) -> list[tuple[bytes, bytes, None, None]]:
    return [(f"k{n}".encode(), f"{tag}-{n}".encode(), None, None) for n in range(first, first + count)]


def isr(admin: AdminClient, topic: str) -> tuple[int, list[int]]:
    part = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return part.leader, sorted(part.isrs)


def elect_uncleanly(admin: AdminClient, topic: str, node: int, timeout: float = 90) -> None:
    """Make ``node`` the partition's leader uncleanly (kafka-leader-election.sh --election-type unclean)."""
    deadline, last = time.monotonic() + timeout, "no answer yet"
    while time.monotonic() < deadline:
        try:
            leader, _ = isr(admin, topic)
            if leader == node:
                return  # the controller elected it itself (unclean.leader.election.enable)
            futures = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)])
            errors = futures.result(timeout=30)
            last = str(errors)
        except Exception as e:  # the old leader not fenced yet, the controller busy: asked again
            last = f"{type(e).__name__}: {e}"
        time.sleep(1)
    raise AssertionError(f"broker {node} was not elected leader of {topic}-0 within {timeout} s: {last}")


def values(recs: list) -> list[tuple[bytes, bytes]]:
    return [(r.key, r.value) for r in recs]


def test_an_unclean_election_past_the_position_loses_no_record(trio, cluster_b, cluster_workdir, spark, tmp_path,
                                                               unique_name, capsys):
    bootstrap, topic = trio.bootstrap, unique_name
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[LEADER, FOLLOWER]], config={
        "unclean.leader.election.enable": "true", "min.insync.replicas": "1"})])[topic].result(30)
    devcluster.wait_in_sync(bootstrap, topic, 60)
    # the offset syncs live on A: with one replica (the suite's single-broker default) on a broker this
    # test stops, every commit would wait for that broker to come back
    text = properties({"A": bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topic, "offset-syncs.topic.replication.factor": "3"}})
    config = load_text(text)
    remote = f"A.{topic}"

    # both replicas in sync
    produce(bootstrap, topic, records("a", 0, IN_SYNC), partition=0)
    mirror_once(spark, text, tmp_path)
    held_first = values(consume_all(bootstrap, topic)[0])
    assert len(held_first) == IN_SYNC

    # the follower stops; the leader takes more records alone (acks=1), mirrored too
    devcluster.stop_broker(NAME, FOLLOWER, cluster_workdir)
    wait_until(lambda: isr(admin, topic) == (LEADER, [LEADER]), 60, message="the ISR shrunk to the leader")
    produce(bootstrap, topic, records("b", IN_SYNC, ALONE), partition=0, extra={"acks": "1"})
    mirror_once(spark, text, tmp_path)
    held_second = values(consume_all(bootstrap, topic)[0])
    position = IN_SYNC + ALONE
    assert len(held_second) == position
    assert values(consume_all(cluster_b.bootstrap, remote)[0]) == held_second

    # the leader stops, the stale follower comes back and is elected uncleanly; its log ends at IN_SYNC
    devcluster.stop_broker(NAME, LEADER, cluster_workdir)
    devcluster.start_broker(NAME, FOLLOWER, cluster_workdir)
    elect_uncleanly(admin, topic, FOLLOWER)
    # new records at the offsets the flow mirrored from the old leader, past its position
    produce(bootstrap, topic, records("c", IN_SYNC, NEW), partition=0, extra={"acks": "1"})
    new_log = values(consume_all(bootstrap, topic)[0])
    assert len(new_log) == IN_SYNC + NEW > position, "the new log end passes the position: no log-end check sees it"
    assert new_log[:IN_SYNC] == held_first and new_log[IN_SYNC:] != held_second[IN_SYNC:]
    # failover before the flow took the divergence up: a group at or past the divergence point is refused
    # with the reason (the syncs from there point at the old log's records); one below it is exact
    past, below = f"{topic}-past", f"{topic}-below"
    commit_offsets(bootstrap, past, {(topic, 0): IN_SYNC + 50})
    commit_offsets(bootstrap, below, {(topic, 0): IN_SYNC - 50})
    [refused] = plan_failover(config, past, "A", "B").partitions
    assert refused.target_offset is None
    assert refused.how.startswith(f"refused: source log diverged at offset {IN_SYNC} "), refused.how
    [exact] = plan_failover(config, below, "A", "B").partitions
    assert exact.target_offset == IN_SYNC - 50, exact
    mirror_once(spark, text, tmp_path)
    # taken up: the group past the divergence point resumes at the copy of the new log's record it reads next
    [moved] = plan_failover(config, past, "A", "B").partitions
    assert moved.target_offset == position + 50, moved

    # the old leader comes back and truncates to the new leader's log; both replicas take more records
    devcluster.start_broker(NAME, LEADER, cluster_workdir)
    devcluster.wait_in_sync(bootstrap, topic, 90)
    produce(bootstrap, topic, records("d", IN_SYNC + NEW, AFTER), partition=0)
    mirror_once(spark, text, tmp_path)

    source = values(consume_all(bootstrap, topic)[0])
    on_b = values(consume_all(cluster_b.bootstrap, remote)[0])
    assert source[:IN_SYNC + NEW] == new_log and len(source) == IN_SYNC + NEW + AFTER
    # B held what the source held at each mirror, in order; then every record of the new log from the
    # divergence point (IN_SYNC), after what B held: nothing lost, the lost head named below
    assert on_b[:position] == held_second
    assert on_b[position:] == source[IN_SYNC:], "the new log from the divergence point, after what B held"
    assert len(on_b) == position + len(source) - IN_SYNC
    assert on_b[moved.target_offset] == source[IN_SYNC + 50]

    [entry] = [e for e in Ledger(config.clusters["B"], "A", "A->B").load().entries if e.topic == topic]
    assert (entry.kind, entry.action, entry.partition) == (TRUNCATED, "continue", 0)
    assert (entry.source_old["start"], entry.source_old["end"]) == (IN_SYNC, position), "the mirrored records lost"
    assert entry.source_new["diverged_at"] == IN_SYNC and entry.source_new["start"] == IN_SYNC
    assert entry.source_new["leader_epoch"] > entry.source_old["leader_epoch"]
    assert (entry.target_old, entry.target_new) == ({"end": position}, {"start": position})

    path = tmp_path / "mm2.properties"
    path.write_text(text)
    capsys.readouterr()  # the flow's log lines so far
    assert main(["status", str(path), "--json"]) == 0
    [flow] = json.loads(capsys.readouterr().out)
    [reported] = [e for e in flow["ledger"] if e["topic"] == topic]
    assert reported == entry.to_json()
    with capsys.disabled():
        print(f"\nmirrored {len(on_b)} records to B; {position - IN_SYNC} mirrored records truncated from the source "
              f"(offsets {IN_SYNC}..{position - 1}, named in the ledger); new log from {IN_SYNC} landed at {position}; "
              f"ledger entry: {entry.to_json()}; failover before the flow took it up: {refused.how}")
