"""Exactly-once mode on real clusters: crashes, a killed Python worker, a target restart, a zombie, failover.

Records stream into A throughout, plain and in source transactions (a third of them aborted).
The replicator runs as an operator runs it (a child process, its own process group) with
``B.exactly.once.source.support = required``. After every event a read_committed consumer of
the remote topic must see, per partition, exactly the source's committed records in source
order: none twice, none missing, none aborted.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.errors import KafkaError
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.exactly_once import prepare, spec_for
from mm2py.source.copy.transactional import HOLD_AFTER_COMMIT, HOLD_BEFORE_COMMIT, TaskTransaction
from mm2py.source.ranges import PartitionRange
from tests.conftest import PORT_OFFSET, own_clusters
from tests.integration.eos_helpers import Writers, assert_exactly_once
from tests.integration.mirror_helpers import REPO, Replicator, properties, python_workers, wait_for
from tests.kafkautil import consume, consume_all, create_topic, end_offsets, list_topics

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

PORTS = {"eos-a": 32292 + PORT_OFFSET, "eos-b": 32392 + PORT_OFFSET}
PARTITIONS = 4


@pytest.fixture(scope="module")
def eos_clusters(cluster_workdir: Path) -> Iterator[dict[str, devcluster.DevCluster]]:
    with own_clusters(cluster_workdir, PORTS) as started:
        yield {"A": started["eos-a"], "B": started["eos-b"]}


def config_text(clusters: dict[str, devcluster.DevCluster], topic: str, extra: str = "") -> str:
    return properties({"A": clusters["A"].bootstrap, "B": clusters["B"].bootstrap},
                      {"A->B": {"topics": topic, "trigger.interval.ms": "200",
                                "emit.checkpoints.interval.seconds": "2", "admin.timeout.ms": "15000"}},
                      "B.exactly.once.source.support = required\n" + extra)


def held_restart(rep: Replicator, variable: str, marker: Path) -> Replicator:
    """Kill ``rep``, start it again with a task hook set (``variable``), return once a task holds there."""
    rep.kill()
    os.environ[variable] = str(marker)
    try:
        rep = Replicator(rep.config_path, rep.log_path).start()
    finally:
        del os.environ[variable]
    wait_for(marker.exists, 180, f"a task holds ({variable})", rep)
    return rep


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_crash_loop_worker_kill_and_target_restart_keep_exactly_once_then_failover(
        eos_clusters, cluster_workdir, unique_name, tmp_path):
    a, b = eos_clusters["A"].bootstrap, eos_clusters["B"].bootstrap
    topic = unique_name
    create_topic(a, topic, PARTITIONS)
    config = tmp_path / "mm2.properties"
    config.write_text(config_text(eos_clusters, topic))
    log = tmp_path / "mm2.log"
    writers = Writers(a, topic, f"{unique_name}-src", PARTITIONS).start()
    rng = random.Random(7)
    rep = Replicator(config, log).start()
    try:
        wait_for(lambda: f"A.{topic}" in list_topics(b) and sum(end_offsets(b, f"A.{topic}").values()) > 0,
                 180, "the flow is mirroring", rep)
        # SIGKILL of the whole process group (driver JVM, Python workers) at random points, 5 times
        for _ in range(5):
            time.sleep(rng.uniform(2, 8))
            rep.kill()
            rep = Replicator(config, log).start()
        # once right after a task produced its batches and positions, before its commit
        hold = tmp_path / "held-before-commit"
        rep = held_restart(rep, HOLD_BEFORE_COMMIT, hold)
        time.sleep(1)
        rep.kill()
        rep = Replicator(config, log).start()
        assert_exactly_once(a, b, topic, writers, rep, "6 crashes, one between produce and commit")

        # one Python worker killed in the middle of its task (before its commit), one right after
        # its commit before Spark had its result: the retry fences the dead attempt's open
        # transaction, or finds its ranges committed, and copies nothing twice
        for variable, when in ((HOLD_BEFORE_COMMIT, "mid-task"), (HOLD_AFTER_COMMIT, "after its commit")):
            worker_hold = tmp_path / f"worker-held-{variable}"
            rep = held_restart(rep, variable, worker_hold)
            held = int(worker_hold.read_text())
            assert held in {w.pid for w in python_workers(rep.proc.pid)}, "the held task runs in a Python worker"
            os.kill(held, signal.SIGKILL)
            assert_exactly_once(a, b, topic, writers, rep, f"a Python worker killed {when}")
            assert rep.alive(), rep.tail()

        # the target broker killed and restarted mid-stream: ridden through without a process restart
        devcluster.kill_cluster_hard("eos-b", cluster_workdir)
        time.sleep(10)
        devcluster.start_cluster("eos-b", PORTS["eos-b"], workdir=cluster_workdir)
        assert_exactly_once(a, b, topic, writers, rep, "the target broker's restart")
        assert rep.alive(), rep.tail()

        writers.stop()
        assert not writers.failed, writers.failed
        assert writers.transactions > 10 and writers.aborted_values
        assert_exactly_once(a, b, topic, writers, rep, "the writers stopped")
    finally:
        writers.stop()
        if rep.alive():
            rep.stop()

    # failover after all that: a group that read part of A on A resumes on B, nothing twice, nothing missed
    group = f"{unique_name}-g"
    committed = [r.value for rs in consume_all(a, topic, isolation="read_committed").values() for r in rs]
    first = consume(a, group, topic, limits={p: 700 + 300 * p for p in range(PARTITIONS)})
    done = subprocess.run([sys.executable, "-m", "mm2py", "failover", str(config), "--group", group,
                           "--from", "A", "--to", "B", "--execute"], capture_output=True, text=True, timeout=180,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    rest = consume(b, group, f"A.{topic}")
    read = first + rest
    assert len(read) == len(set(read)), f"{len(read) - len(set(read))} records read twice after failover"
    assert set(read) == set(committed), f"{len(set(committed) - set(read))} records missed after failover"
    print(f"exactly-once: {len(committed)} committed records ({writers.transactions} source transactions, "
          f"{len(writers.aborted_values)} aborted records), 6 crashes, 2 worker kills and a target restart: "
          "0 twice, 0 missing, 0 aborted on B; failover read each once")


def test_a_zombie_task_is_fenced_by_its_successor(eos_clusters, unique_name):
    """A task whose attempt was retried comes back: its produce and its commit are refused."""
    a, b = eos_clusters["A"].bootstrap, eos_clusters["B"].bootstrap
    topic = unique_name
    create_topic(a, topic, 1)
    producer = Producer({"bootstrap.servers": a, "log_level": 0})
    for i in range(100):
        producer.produce(topic, value=b"v-%d" % i, partition=0)
    assert producer.flush(30) == 0
    create_topic(b, f"A.{topic}", 1)
    flow = load_text(config_text(eos_clusters, topic)).enabled_flows[0]
    flow = prepare(flow, 1)
    spec = spec_for(flow)
    assert spec is not None
    ranges = [PartitionRange(topic, 0, 0, 100, f"A.{topic}")]
    clients = [RawClient(flow.source, client_id="zombie-test"), RawClient(flow.target, client_id="zombie-test",
                                                                          role="producer")]
    successor_dst = RawClient(flow.target, client_id="successor", role="producer")
    try:
        src, dst = clients
        zombie = TaskTransaction(dst, spec, 0)
        zombie_state = zombie.begin()
        results = Copier(src, dst, ranges, CopySettings(), CopyMode(producer=zombie_state)).run()
        successor = TaskTransaction(successor_dst, spec, 0)
        copied = Copier(src, successor_dst, ranges, CopySettings(), CopyMode(producer=successor.begin())).run()
        successor.commit(copied)
        with pytest.raises(KafkaError) as late_produce:  # the zombie wakes up and copies again
            Copier(src, dst, ranges, CopySettings(), CopyMode(producer=zombie_state)).run()
        assert "Epoch" in str(late_produce.value) or "Fenced" in str(late_produce.value), str(late_produce.value)
        with pytest.raises(KafkaError) as late_commit:
            zombie.commit(results)
        assert "Fenced" in str(late_commit.value) or "Epoch" in str(late_commit.value), str(late_commit.value)
    finally:
        for c in (*clients, successor_dst):
            c.close()
    values = [r.value for r in consume_all(b, f"A.{topic}", isolation="read_committed")[0]]
    assert values == [b"v-%d" % i for i in range(100)], "the successor's copy, once; nothing of the zombie's"
