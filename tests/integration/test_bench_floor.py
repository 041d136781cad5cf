"""Issue 23: the bench's floor (Kafka's consumer perf tool) reads a backlog with no replicator."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from bench.floor import read_backlog
from tests.kafkautil import TS0, create_topic, produce

pytestmark = pytest.mark.integration


def test_the_floor_reads_every_record_below_the_ends(cluster_a, unique_name):
    plain, txn = f"{unique_name}-plain", f"{unique_name}-txn"
    create_topic(cluster_a.bootstrap, plain, 3)
    for p in range(3):
        produce(cluster_a.bootstrap, plain, [(b"k%d" % i, b"v" * 100, [], TS0 + i) for i in range(200 + p)],
                partition=p)
    # a committed transaction: the partition's last offset is its commit marker, not a record
    create_topic(cluster_a.bootstrap, txn, 1)
    producer = Producer({"bootstrap.servers": cluster_a.bootstrap, "transactional.id": f"{unique_name}-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(50):
        producer.produce(txn, value=b"t%d" % i, partition=0)
    producer.commit_transaction(30)

    read = read_backlog(cluster_a.bootstrap, [plain, txn], 603 + 50, timeout_s=180)
    assert read["records"] == 603 + 50, read  # records only: the commit marker is not one
    assert 0 < read["fetch_s"] < read["wall_s"]
