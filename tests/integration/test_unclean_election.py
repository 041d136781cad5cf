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
Under ``source.reset.policy = stop`` the same divergence stops that partition alone: an ERROR
names it with both offsets, nothing of the new log is copied, the flow's other topic goes on,
and the ledger holds one ``stop`` entry (across a restart) that ``status --json`` shows.

Kafka 4.x with eligible leader replicas (KIP-966, on by default for new clusters since 4.1): the
stale follower is in neither the ISR nor the ELR, so the controller elects it only when asked
for an UNCLEAN election (KIP-460, ``kafka-leader-election --election-type UNCLEAN``), which
``elect_uncleanly`` does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2py.cli import main
from mm2py.config import load_text
from mm2py.config.model import MirrorMakerConfig
from mm2py.dev import cluster as devcluster
from mm2py.ops.failover import plan_failover
from mm2py.stores.ledger import TRUNCATED, Ledger
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import Replicator, mirror_once, properties, three_brokers
from tests.kafkautil import commit_offsets, consume_all, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # three brokers, two stopped and started again

NAME = "unclean"
PORT = 29692 + PORT_OFFSET  # brokers on PORT, +2, +4; their controllers on PORT+1, +3, +5
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


@dataclass(frozen=True)
class Diverged:
    """A source partition whose log diverged under a flow that mirrored it: what each side held."""

    text: str  # the flow's properties
    config: MirrorMakerConfig
    remote: str  # the remote topic of the diverged topic on B
    held_first: list[tuple[bytes, bytes]]  # the source at the first mirror (both replicas in sync)
    held_second: list[tuple[bytes, bytes]]  # at the second (the old leader alone): all of it on B
    new_log: list[tuple[bytes, bytes]]  # the new leader's log after its new records

    @property
    def position(self) -> int:
        return len(self.held_second)


def diverge(trio: devcluster.DevCluster, cluster_b, cluster_workdir: Path, spark, tmp_path: Path, topic: str,
            flow_keys: dict[str, str] | None = None, also: str | None = None) -> Diverged:
    """Mirror ``topic`` twice (in sync, then the old leader alone), then elect the stale follower
    uncleanly and write NEW records at the offsets mirrored, past the flow's position. The old
    leader (LEADER) is left stopped. ``also``: another topic of the flow (on node 0, which stays up)."""
    bootstrap = trio.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[LEADER, FOLLOWER]], config={
        "unclean.leader.election.enable": "true", "min.insync.replicas": "1"})])[topic].result(30)
    if also is not None:
        admin.create_topics([NewTopic(also, num_partitions=1, replica_assignment=[[0]])])[also].result(30)
    devcluster.wait_in_sync(bootstrap, topic, 60)
    # the offset syncs live on A: with one replica (the suite's single-broker default) on a broker this
    # test stops, every commit would wait for that broker to come back
    topics = topic if also is None else f"{topic},{also}"
    text = properties({"A": bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topics, "offset-syncs.topic.replication.factor": "3", **(flow_keys or {})}})
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
    return Diverged(text, config, remote, held_first, held_second, new_log)


def test_an_unclean_election_past_the_position_loses_no_record(trio, cluster_b, cluster_workdir, spark, tmp_path,
                                                               unique_name, capsys):
    bootstrap, topic = trio.bootstrap, unique_name
    d = diverge(trio, cluster_b, cluster_workdir, spark, tmp_path, topic)
    text, config, remote, held_second, new_log = d.text, d.config, d.remote, d.held_second, d.new_log
    position = d.position
    # failover before the flow took the divergence up: a group at or past the divergence point is refused
    # with the reason (the syncs from there point at the old log's records); one below it is exact
    past, below = f"{topic}-past", f"{topic}-below"
    commit_offsets(bootstrap, past, {(topic, 0): IN_SYNC + 50})
    commit_offsets(bootstrap, below, {(topic, 0): IN_SYNC - 50})
    [refused] = plan_failover(config, past, "A", "B").partitions
    assert refused.target_offset is None
    assert refused.how.startswith(f"refused: source log diverged at offset {IN_SYNC} of {topic}-0 "), refused.how
    assert f"position {position}," in refused.how and f"committed offset {IN_SYNC + 50} " in refused.how
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


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_stop_stops_the_diverged_topic_naming_it_while_another_topic_flows(trio, cluster_b, cluster_workdir, spark,
                                                                           tmp_path, unique_name, capsys):
    """``source.reset.policy = stop``: the diverged partition is not copied on (nothing of the new log
    lands on B), an ERROR names topic, partition and offsets, the ledger holds a ``stop`` entry that
    ``status --json`` shows, the flow's other topic goes on; a restart keeps the stop and records it once."""
    bootstrap, topic, other = trio.bootstrap, unique_name, f"{unique_name}-other"
    d = diverge(trio, cluster_b, cluster_workdir, spark, tmp_path, topic, {"source.reset.policy": "stop"}, also=other)
    path = tmp_path / "mm2.properties"
    path.write_text(d.text)
    log = tmp_path / "mm2.log"  # the planner logs from Spark's Python workers: a replicator process's output
    flowing = records("o", 0, 150)
    for run, (first, last) in enumerate(((0, 100), (100, 150))):  # the second run is a restart
        produce(bootstrap, other, flowing[first:last], partition=0)
        rep = Replicator(path, log, "--once").start()
        assert rep.proc is not None
        assert rep.proc.wait(300) == 0, rep.tail()
        stopped = [line for line in log.read_text(errors="replace").splitlines()
                   if "partition stopped" in line and any(f in line + " " for f in (
                       f"topic={topic} ", f'"topic": "{topic}"'))]
        assert len(stopped) == run + 1, f"the ERROR, said again by the restart: {rep.tail()}"

    assert values(consume_all(cluster_b.bootstrap, d.remote)[0]) == d.held_second, "nothing of the new log copied"
    assert values(consume_all(cluster_b.bootstrap, f"A.{other}")[0]) == values(consume_all(bootstrap, other)[0])
    assert len(values(consume_all(cluster_b.bootstrap, f"A.{other}")[0])) == 150, "the other topic flowed"
    # the ERROR names topic (above), partition, the divergence point, the position and the policy
    for line in stopped:
        assert "error" in line.lower() and "source.reset.policy = stop" in line, line
        assert f"diverged at offset {IN_SYNC}, below the flow's position {d.position}" in line, line
        assert any(f in line for f in ("partition=0", '"partition": 0')), line
    assert not [line for line in log.read_text(errors="replace").splitlines()
                if "partition stopped" in line and other in line]
    entries = [e for e in Ledger(d.config.clusters["B"], "A", "A->B").load().entries if e.topic == topic]
    [entry] = entries  # the restart found it again and did not record it twice
    assert (entry.kind, entry.action, entry.partition) == (TRUNCATED, "stop", 0)
    assert (entry.source_old["start"], entry.source_old["end"]) == (IN_SYNC, d.position)
    assert entry.source_new["diverged_at"] == IN_SYNC
    assert entry.target_old == {"end": d.position} and entry.target_new == {}, "nothing lands while stopped"
    assert not [e for e in Ledger(d.config.clusters["B"], "A", "A->B").load().entries if e.topic == other]

    capsys.readouterr()  # the flow's output so far
    assert main(["status", str(path), "--json"]) == 0
    [flow] = json.loads(capsys.readouterr().out)
    [reported] = [e for e in flow["ledger"] if e["topic"] == topic]
    assert reported == entry.to_json() and reported["action"] == "stop"
    with capsys.disabled():
        print(f"\nstop: {topic}-0 stopped at the divergence ({IN_SYNC}..{d.position - 1} lost on the source, "
              f"nothing of the new log copied); {other} flowed 150 records; ledger entry: {entry.to_json()}")
