"""A three-broker dev cluster rides through a crash, a restart and a frozen broker without losing or
duplicating an acknowledged record (real brokers; RF 3, min.insync.replicas 2, acks=all, idempotence)."""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mm2py.dev import cluster as devcluster
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import three_brokers
from tests.kafkautil import consume_all, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py: a crash, a restart and a freeze

NAME = "multi"
PORT = 30992 + PORT_OFFSET  # brokers on PORT, +2, +4; their controllers on PORT+1, +3, +5
TOPIC = "week"


@pytest.fixture
def trio(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    with three_brokers(NAME, PORT, cluster_workdir) as cluster:  # fenced within the 10 s freeze below
        yield cluster


class Producing:
    """An idempotent acks=all producer that remembers, per partition, the offset of every acknowledged record.

    Values are a sequence number in send order, so order and duplicates can be checked downstream.
    """

    def __init__(self, bootstrap: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "log_level": 0})
        self.sent = 0
        self.acked: dict[int, list[tuple[int, int]]] = defaultdict(list)  # partition -> [(offset, seq)]
        self.failed: list[tuple[int, str]] = []

    def send(self, count: int, partition: int | None = None) -> None:
        for _ in range(count):
            seq = self.sent
            self.sent += 1
            kwargs: dict[str, object] = {"key": f"k{seq % 97}".encode(), "value": str(seq).encode(),
                                         "on_delivery": functools.partial(self._report, seq)}
            if partition is not None:
                kwargs["partition"] = partition
            self.producer.produce(TOPIC, **kwargs)
            self.producer.poll(0)

    def _report(self, seq: int, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked[msg.partition()].append((msg.offset(), seq))
        else:
            self.failed.append((seq, str(err)))

    def flush(self, timeout: float = 60) -> None:
        assert self.producer.flush(timeout) == 0, f"records still unacknowledged after {timeout} s"

    def acked_count(self) -> int:
        return sum(map(len, self.acked.values()))


def index_of(cluster: devcluster.DevCluster, node_id: int | None) -> int:
    return next(node.index for node in cluster.nodes if node.node_id == node_id)


def test_three_brokers_ride_through_a_crash_a_restart_and_a_pause(trio, cluster_workdir):
    t0 = time.monotonic()
    bootstrap = trio.bootstrap
    assert bootstrap == f"127.0.0.1:{PORT},127.0.0.1:{PORT + 2},127.0.0.1:{PORT + 4}"
    assert [(n.node_id, n.port, n.controller_port) for n in trio.nodes] == [
        (i, PORT + 2 * i, PORT + 2 * i + 1) for i in range(3)]
    assert trio.state == "running" and len({n.pid for n in trio.nodes}) == 3
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    assert {b.id for b in admin.describe_cluster().result(30).nodes} == {0, 1, 2}
    admin.create_topics([NewTopic(TOPIC, 6, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    devcluster.wait_in_sync(bootstrap, TOPIC, 30)

    out = Producing(bootstrap)
    out.send(1000)
    out.flush()
    assert out.acked_count() == 1000 and not out.failed

    # a crash: SIGKILL the leader of partition 0; the controllers fence it when its session expires
    victim = devcluster.partition_leaders(bootstrap, TOPIC)[0]
    assert victim is not None
    victim_index = index_of(trio, victim)
    assert devcluster.kill_broker(NAME, victim_index, cluster_workdir)
    assert devcluster.cluster_status(NAME, cluster_workdir).state == "degraded"
    wait_until(lambda: devcluster.partition_leaders(bootstrap, TOPIC)[0] not in (None, victim), 30,
               message=f"a new leader for partition 0 in place of broker {victim}")
    out.send(100, partition=0)  # two replicas left: still min.insync.replicas
    out.send(100)
    out.flush()
    assert out.acked_count() == 1200 and not out.failed, out.failed[:3]

    # the crashed broker comes back on its data and catches up
    restarted = devcluster.start_broker(NAME, victim_index, cluster_workdir)
    assert restarted.state == "running" and restarted.nodes[victim_index].pid != trio.nodes[victim_index].pid
    devcluster.wait_in_sync(bootstrap, TOPIC, 60)

    # a frozen JVM (a long GC pause): SIGSTOP partition 0's leader, producing all along, until the
    # controllers fenced it (6 s session, longer on a loaded machine) and records were acknowledged
    # for 2 s more without it, at most 60 s
    frozen = devcluster.partition_leaders(bootstrap, TOPIC)[0]
    frozen_index = index_of(restarted, frozen)
    before = out.acked_count()
    devcluster.pause_broker(NAME, frozen_index, cluster_workdir)
    try:
        deadline, first_ack = time.monotonic() + 60, None
        while time.monotonic() < deadline and (first_ack is None or time.monotonic() < first_ack + 2):
            out.send(5)
            out.producer.poll(0.05)
            if first_ack is None and out.acked_count() > before:
                first_ack = time.monotonic()
        acked_while_frozen = out.acked_count() - before
    finally:
        devcluster.resume_broker(NAME, frozen_index, cluster_workdir)
    out.send(100)
    out.flush(120)
    assert acked_while_frozen > 0, "nothing was acknowledged while one broker was frozen"
    assert not out.failed, out.failed[:3]
    devcluster.wait_in_sync(bootstrap, TOPIC, 60)

    # every acknowledged record exactly once, at its acknowledged offset, in send order per partition
    got = consume_all(bootstrap, TOPIC, isolation="read_committed")
    seen: set[int] = set()
    for partition, records in got.items():
        seqs = [int(r.value) for r in records]
        assert seqs == sorted(set(seqs)), f"partition {partition} out of order or duplicated"
        assert not seen & set(seqs), f"partition {partition} holds records of another partition"
        seen |= set(seqs)
        at = {r.offset: int(r.value) for r in records}
        missing = [(offset, seq) for offset, seq in out.acked[partition] if at.get(offset) != seq]
        assert not missing, f"partition {partition}: acknowledged records missing: {missing[:5]}"
    assert seen <= set(range(out.sent))
    assert out.acked_count() == out.sent
    print(f"\n{out.sent} records, {acked_while_frozen} acknowledged while broker {frozen} was frozen; "
          f"{time.monotonic() - t0:.0f} s after start-up")
