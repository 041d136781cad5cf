"""Exactly-once copy intervals (mm2py.source.copy.interval_commits) on real clusters: kills and a zombie.

Plain records and source transactions (every third aborted) stream into A; the replicator (a real
child process) starts on a backlog of them with ``copy.continuous.enabled`` and
``B.exactly.once.source.support = required``, so its backlog micro-batches are copy intervals
whose tasks commit a transaction every ``copy.tail.commit.ms``. After a SIGKILL at a handover
between two intervals, or every Spark Python worker SIGKILLed mid-interval, a read_committed
consumer of B must see per partition exactly A's committed records in order: none twice, none
missing, none aborted. A zombie interval task, fenced by its successor's InitProducerId, commits
nothing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mm2py.config import load_text
from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.formats import SourceOffset
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.exactly_once import prepare, spec_for
from mm2py.source.copy.interval_commits import TransactionPeriods
from mm2py.source.copy.tail import TailWindow
from mm2py.source.copy.transactional import TaskTransaction
from mm2py.source.ranges import PartitionRange
from mm2py.stores.positions import PositionStore, offsets_topic
from tests.integration.eos_helpers import Writers, assert_exactly_once
from tests.integration.mirror_helpers import (
    Replicator,
    batch_lines,
    copy_intervals,
    kill_python_workers,
    next_commit,
    properties,
    records_behind,
    wait_for,
)
from tests.kafkautil import consume_all, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

PARTITIONS = 2
BACKLOG_S = 15  # the writers' seconds before a start: a backlog that lasts more than one interval
COMMIT_MS = 400  # copy.tail.commit.ms: several transactions per interval of batch.duration.ms
BACKLOG_PAUSE_S = 0.1  # the writers' pause between rounds while a backlog builds: about 1,200 records/s
STREAM_PAUSE_S = 0.5  # about 240 records/s: a stream the copy (a batch per fetch) keeps up with when busy


def interval_config(a: str, b: str, topic: str) -> str:
    """Exactly-once copy intervals of 2 s committing every ``COMMIT_MS``, on plans of 5,000 bytes (about
    450 records, so that a backlog of a second or more is copied in intervals however fast the copy)
    fetched a batch at a time (``copy.tail.ms = 0``: every record past a planned end is an interval's)."""
    return properties({"A": a, "B": b},
                      {"A->B": {"topics": topic, "copy.continuous.enabled": "true", "copy.tail.ms": "0",
                                "batch.duration.ms": "2000", "copy.tail.commit.ms": str(COMMIT_MS),
                                "max.batch.bytes": "5000", "emit.checkpoints.enabled": "false",
                                "admin.timeout.ms": "15000"}},
                      "A.consumer.fetch.max.bytes = 1\nB.exactly.once.source.support = required\n")


def start_on_a_backlog(a: str, b: str, topic: str, tmp_path: Path) -> tuple[Path, Path, Writers, Replicator]:
    """``topic`` on A, the writers for ``BACKLOG_S``, then the replicator: its config, log, writers, replicator."""
    create_topic(a, topic, PARTITIONS)
    config = tmp_path / "mm2.properties"
    config.write_text(interval_config(a, b, topic))
    log = tmp_path / "replicator.log"
    writers = Writers(a, topic, f"{topic}-src", PARTITIONS, pause_s=BACKLOG_PAUSE_S).start()
    time.sleep(BACKLOG_S)
    rep = Replicator(config, log).start()
    writers.pause_s = STREAM_PAUSE_S
    return config, log, writers, rep


def position_records(b: str, topic: str) -> int:
    """Committed position records of ``topic``'s partition 0 on B: one per transaction that moved it."""
    rows = consume_all(b, offsets_topic("A"), isolation="read_committed")
    found = (SourceOffset.from_record(r.key, r.value) for rs in rows.values() for r in rs if r.key)
    return sum(1 for p in found if p is not None and p.cluster == "A" and (p.topic, p.partition) == (topic, 0))


def finish(a: str, b: str, topic: str, writers: Writers, rep: Replicator, what: str) -> None:
    """Stop the writers, then B must hold A's committed records exactly once, in order."""
    writers.stop()
    assert not writers.failed, writers.failed
    assert writers.transactions > 10 and writers.aborted_values
    assert_exactly_once(a, b, topic, writers, rep, what)


def test_a_kill_at_the_handover_between_exactly_once_intervals_copies_nothing_twice(
        cluster_a, cluster_b, unique_name, tmp_path):
    a, b, topic = cluster_a.bootstrap, cluster_b.bootstrap, unique_name
    config, log, writers, rep = start_on_a_backlog(a, b, topic, tmp_path)
    store = PositionStore(ClusterConfig("B", b), "A")
    try:
        # the handover: the first interval's commit line is written, and the process dies as the next is
        # planned, with most of the backlog still to copy (an interval copies a few seconds of it)
        while copy_intervals(log) < 1:
            next_commit(log, rep, timeout=400)
        rep.kill()
        at_kill, behind = copy_intervals(log), records_behind(a, topic, store)
        # the backlog's rate while the replicator is down: what it finds at the restart spans more than
        # one plan of max.batch.bytes however fast it restarts, so the restart copies in intervals too
        writers.pause_s = BACKLOG_PAUSE_S
        rep = Replicator(config, log).start()
        wait_for(lambda: copy_intervals(log) >= at_kill + 1, 400, "a copy interval after the restart", rep)
        writers.pause_s = STREAM_PAUSE_S
        finish(a, b, topic, writers, rep, "a SIGKILL at the handover between two intervals")
        batches = len(batch_lines(log))
        commits = position_records(b, topic)
    finally:
        writers.stop()
        if rep.alive():
            rep.stop()
    print(f"eos handover: {at_kill} intervals before the kill, {copy_intervals(log)} in all, {behind} records "
          f"behind at the kill, {commits} committed positions of partition 0 over {batches} micro-batches")
    assert behind > 0, "the kill fell while a backlog was copied, at an interval's handover"
    assert commits > batches, "an interval commits a transaction every copy.tail.commit.ms, not once"


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_python_workers_killed_mid_interval_leave_nothing_twice_and_nothing_missing(
        cluster_a, cluster_b, unique_name, tmp_path):
    """Twice, a moment into an interval (its tasks committed a period, the next transaction open), every
    Spark Python worker is SIGKILLed: the task fails its query, the supervisor restarts it, the restart
    fences the slice ids (aborting the open transactions) and copies on after the committed positions."""
    a, b, topic = cluster_a.bootstrap, cluster_b.bootstrap, unique_name
    _config, log, writers, rep = start_on_a_backlog(a, b, topic, tmp_path)
    killed: list[int] = []
    try:
        wait_for(lambda: copy_intervals(log) >= 2, 400, "two exactly-once copy intervals committed", rep)
        for _ in range(2):
            next_commit(log, rep)
            time.sleep(1.2)  # the next interval launched and copying: more than two commit periods in
            hit = kill_python_workers(rep)
            killed.append(hit)
        at_kills = len(batch_lines(log))
        wait_for(lambda: len(batch_lines(log)) >= at_kills + 2, 400, "two micro-batches after the kills", rep)
        finish(a, b, topic, writers, rep, "Python workers killed mid-interval")
        assert rep.alive(), rep.tail()
    finally:
        writers.stop()
        if rep.alive():
            rep.stop()
    restarts = sum(1 for line in log.read_text(errors="replace").splitlines()
                   if "source A->B failed" in line and "flow stalled" in line)
    print(f"eos worker kills: workers killed {killed}, {restarts} restarts of the source query, "
          f"{copy_intervals(log)} intervals")
    assert all(n > 0 for n in killed), killed
    assert restarts >= 1, "a kill failed a copy task"


def test_a_zombie_interval_task_is_fenced_by_its_successor(cluster_a, cluster_b, unique_name):
    """An interval's task commits a period, copies more into its next transaction, and is then fenced by
    its slice's successor (InitProducerId): its commit fails, and B shows only the successor's copy."""
    a, b, topic = cluster_a.bootstrap, cluster_b.bootstrap, unique_name
    create_topic(a, topic, 1)
    create_topic(b, f"A.{topic}", 1)
    producer = Producer({"bootstrap.servers": a, "log_level": 0})

    def write(values: range) -> None:
        for i in values:
            producer.produce(topic, value=b"v-%d" % i, partition=0)
        assert producer.flush(30) == 0

    write(range(100))
    flow = prepare(load_text(interval_config(a, b, topic)).enabled_flows[0], 1)
    spec = spec_for(flow)
    assert spec is not None
    src, dst = RawClient(flow.source, client_id="zombie"), RawClient(flow.target, client_id="zombie", role="producer")
    successor_src = RawClient(flow.source, client_id="successor")
    successor_dst = RawClient(flow.target, client_id="successor", role="producer")
    zombie = TaskTransaction(dst, spec, 0)
    periods = TransactionPeriods(zombie, 0.2)
    failed: list[BaseException] = []

    def run_zombie() -> None:
        window = TailWindow(time.monotonic() + 120, progress=periods)
        try:
            Copier(src, dst, [PartitionRange(topic, 0, 0, 100, f"A.{topic}")], CopySettings(),
                   CopyMode(producer=zombie.begin(), tail=window)).run()
        except BaseException as e:  # the test looks at it
            failed.append(e)

    thread = threading.Thread(target=run_zombie, daemon=True)
    try:
        thread.start()
        wait_for(lambda: periods.positions.get((topic, 0)) == 99, 60, "the zombie committed its first 100")
        periods.interval_s = 3600  # no commit until the successor started
        write(range(100, 150))
        wait_for(lambda: len(consume_all(b, f"A.{topic}")[0]) == 150, 60, "the zombie copied 50 more, uncommitted")
        successor = TaskTransaction(successor_dst, spec, 0)
        state = successor.begin()  # fences the zombie: its open transaction is aborted
        periods.interval_s = 0  # the zombie tries to commit what it holds
        thread.join(60)
        assert not thread.is_alive() and failed, "the zombie's commit was refused"
        assert "Fenced" in str(failed[0]) or "Epoch" in str(failed[0]), repr(failed[0])
        assert isinstance(failed[0], KafkaError), repr(failed[0])
        committed = PositionStore(flow.target, "A").load()[(topic, 0)]
        assert committed == 99, "the zombie's last commit is the one before the fence"
        successor_periods = TransactionPeriods(successor, 0.2)
        Copier(successor_src, successor_dst, [PartitionRange(topic, 0, committed + 1, 150, f"A.{topic}", exact=True)],
               CopySettings(), CopyMode(producer=state, tail=TailWindow(time.monotonic() + 1,
                                                                          progress=successor_periods))).run()
        successor_periods.finish()
    finally:
        for c in (src, dst, successor_src, successor_dst):
            c.close()
    values = [r.value for r in consume_all(b, f"A.{topic}", isolation="read_committed")[0]]
    assert values == [b"v-%d" % i for i in range(150)], "the zombie's first commit, the successor's copy, once each"
    uncommitted = [r.value for r in consume_all(b, f"A.{topic}")[0]]
    assert len(uncommitted) == 200, "the zombie's fenced 50 are on B's log, aborted: invisible to read_committed"
    assert PositionStore(flow.target, "A").load()[(topic, 0)] == 149
