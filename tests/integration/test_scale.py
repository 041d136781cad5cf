"""One flow over 2,000 partitions (200 topics x 10) on single-node clusters of the module's own,
every record verified in per-partition order.

The clusters are the module's own so that 4,000 partitions never weigh on the shared clusters
the other tests use.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2py.dev import cluster as devcluster
from tests.conftest import PORT_OFFSET, own_clusters
from tests.integration.mirror_helpers import mirror_once, properties

pytestmark = pytest.mark.integration

TOPICS, PARTITIONS, PER_PARTITION = 200, 10, 50
PORTS = {"scale-a": 29492 + PORT_OFFSET, "scale-b": 29592 + PORT_OFFSET}


@pytest.fixture(scope="module")
def scale_clusters(cluster_workdir: Path) -> Iterator[tuple[devcluster.DevCluster, devcluster.DevCluster]]:
    with own_clusters(cluster_workdir, PORTS) as started:
        yield started["scale-a"], started["scale-b"]


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names], operation_timeout=120)
    for future in futures.values():
        future.result(180)


def read_everything(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], list[bytes]]:
    """Every record of every partition of ``topics``, in offset order, with one consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2py-tests-scale", "log_level": 0,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    try:
        ends = {}
        for t in topics:
            for p in range(PARTITIONS):
                ends[(t, p)] = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
        out: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in ends}
        left = {tp for tp, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(t, p, 0) for t, p in left])
        deadline = time.monotonic() + 300
        while left:
            assert time.monotonic() < deadline, f"{len(left)} partitions not read to their end"
            for msg in consumer.consume(10000, timeout=0.5):
                assert not msg.error(), msg.error()
                tp = (msg.topic(), msg.partition())
                out[tp].append(msg.value())
                if msg.offset() + 1 >= ends[tp]:
                    left.discard(tp)
        return out
    finally:
        consumer.close()


def test_one_flow_over_2000_partitions_mirrors_every_record_in_order(spark, scale_clusters, unique_name,
                                                                      tmp_path):
    a, b = scale_clusters
    prefix = unique_name[:40]
    topics = [f"{prefix}-{i:03d}" for i in range(TOPICS)]
    started = time.monotonic()
    create_topics(a.bootstrap, topics)
    producer = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 20,
                         "compression.type": "lz4", "log_level": 0})
    for t in topics:
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(t, value=f"{t}/{p}/{i}".encode(), partition=p)
        producer.poll(0)
    assert producer.flush(120) == 0
    produced = time.monotonic()
    text = properties({"A": a.bootstrap, "B": b.bootstrap}, {"A->B": {
        "topics": f"{prefix}-.*", "emit.checkpoints.enabled": "false", "sync.topic.acls.enabled": "false"}})
    mirror_once(spark, text, tmp_path, timeout=600)
    mirrored = time.monotonic()
    source = read_everything(a.bootstrap, topics)
    target = read_everything(b.bootstrap, [f"A.{t}" for t in topics])
    assert len(source) == TOPICS * PARTITIONS
    wrong = [(t, p) for (t, p), values in source.items() if target[(f"A.{t}", p)] != values]
    print(f"\n2,000 partitions: {sum(map(len, source.values()))} records; topics made and filled in "
          f"{produced - started:.0f} s, mirrored in {mirrored - produced:.0f} s, verified in "
          f"{time.monotonic() - mirrored:.0f} s")
    assert not wrong, f"{len(wrong)} partitions differ, e.g. {wrong[:3]}"
