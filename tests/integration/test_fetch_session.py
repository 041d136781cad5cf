"""KIP-227 fetch sessions against a real broker: requests and answers carry only what moved."""

from __future__ import annotations

import pytest

from mm2py.config.model import ClusterConfig
from mm2py.kafka.wire import RawClient
from tests.kafkautil import TS0, create_topic, end_offsets, produce, wait_until

pytestmark = pytest.mark.integration


def test_a_session_answers_only_partitions_with_news_and_recovers_from_a_lost_epoch(cluster_a, unique_name):
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 3)
    for p in range(3):
        produce(cluster_a.bootstrap, topic, [(b"k", b"v%d" % i, [], TS0 + i) for i in range(5)], partition=p)
    ends = end_offsets(cluster_a.bootstrap, topic)
    client = RawClient(ClusterConfig("A", cluster_a.bootstrap), client_id=f"{unique_name}-fs")
    try:
        node = client.leaders({topic})[(topic, 0)]

        def fetch(positions: dict, *, wait_ms: int = 300) -> tuple[object, dict]:
            response = client.wait(client.fetch(node, positions, partition_max_bytes=1 << 20, max_bytes=1 << 24,
                                                max_wait_ms=wait_ms, session=True))
            return response, client.fetched(response)

        at_end = {(topic, p): ends[p] for p in range(3)}
        response, parts = fetch(at_end)
        assert response.session_id != 0, "the broker opened a session"
        assert set(parts) == set(at_end), "an opening request is answered for every partition"

        response, parts = fetch(at_end, wait_ms=100)
        assert parts == {}, "nothing moved: an incremental answer holds no partition"

        produce(cluster_a.bootstrap, topic, [(b"k", b"late", [], TS0)], partition=1)
        response, parts = fetch(at_end)
        assert set(parts) == {(topic, 1)} and bytes(parts[(topic, 1)].records), "only the partition with news"

        moved = {(topic, 0): ends[0], (topic, 1): ends[1] + 1}  # partition 2 forgotten
        produce(cluster_a.bootstrap, topic, [(b"k", b"gone", [], TS0)], partition=2)
        response, parts = fetch(moved, wait_ms=100)
        assert (topic, 2) not in parts, "a forgotten partition is no longer read"

        # the broker no longer knows the epoch we send: it answers with an error and no partition,
        # and the next request opens a new session answered for every partition
        client._sessions[node].epoch = 1000
        response, parts = fetch(moved, wait_ms=100)
        assert response.error_code == 71 and parts == {}  # INVALID_FETCH_SESSION_EPOCH
        response, parts = fetch(moved)
        assert response.session_id != 0 and set(parts) == set(moved)
    finally:
        client.close()


def test_a_tailing_copy_fetches_in_a_session_and_copies_every_record(cluster_a, cluster_b, unique_name):
    """A real copier tailing 20 partitions: its fetches go incremental, and what arrived landed in order."""
    import threading
    import time

    from mm2py.source.copy.copier import Copier
    from mm2py.source.copy.copy_mode import CopyMode
    from mm2py.source.copy.copy_settings import CopySettings
    from mm2py.source.copy.tail import TailWindow
    from mm2py.source.ranges import PartitionRange
    from tests.kafkautil import consume_all

    topic, partitions = unique_name, 20
    create_topic(cluster_a.bootstrap, topic, partitions)
    create_topic(cluster_b.bootstrap, f"A.{topic}", partitions)
    for p in range(partitions):
        produce(cluster_a.bootstrap, topic, [(b"k", b"early-%d" % i, [], TS0 + i) for i in range(10)], partition=p)
    ranges = [PartitionRange(topic, p, 0, 10, f"A.{topic}") for p in range(partitions)]

    def arrive() -> None:  # a record every 50 ms on partition 3 while the copy tails
        for i in range(30):
            produce(cluster_a.bootstrap, topic, [(b"k", b"late-%d" % i, [], TS0 + 100 + i)], partition=3)
            time.sleep(0.05)

    src = RawClient(ClusterConfig("A", cluster_a.bootstrap), client_id=f"{unique_name}-src")
    dst = RawClient(ClusterConfig("B", cluster_b.bootstrap), client_id=f"{unique_name}-dst", role="producer")
    producer = threading.Thread(target=arrive)
    try:
        producer.start()
        results = Copier(src, dst, ranges, CopySettings(), CopyMode(tail=TailWindow(time.monotonic() + 4))).run()
        producer.join()
        (session,) = src._sessions.values()
        assert session.session_id != 0 and session.epoch > 2, "the tail fetched incrementally"
    finally:
        src.close()
        dst.close()
    by_partition = {r.partition: r for r in results}
    assert all(by_partition[p].next_offset == 10 for p in range(partitions) if p != 3)
    copied = [r.value for r in consume_all(cluster_b.bootstrap, f"A.{topic}")[3]]
    assert copied[:10] == [b"early-%d" % i for i in range(10)]
    late = copied[10:]
    assert late == [b"late-%d" % i for i in range(len(late))] and len(late) >= 20, len(late)
    assert by_partition[3].next_offset == 10 + len(late)


def test_list_offsets_reads_the_stable_offset_and_agrees_with_the_admin_client(cluster_a, unique_name):
    from confluent_kafka import Producer

    from mm2py.errors import KafkaError
    from mm2py.kafka.admin import Admin

    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 4)
    for p in range(3):
        produce(cluster_a.bootstrap, topic, [(b"k", b"v%d" % i, [], TS0 + i) for i in range(p + 1)], partition=p)
    open_tx = Producer({"bootstrap.servers": cluster_a.bootstrap, "transactional.id": f"{unique_name}-tx"})
    open_tx.init_transactions()
    open_tx.begin_transaction()
    open_tx.produce(topic, b"pending", partition=3)
    open_tx.flush()
    cluster = ClusterConfig("A", cluster_a.bootstrap)
    client = RawClient(cluster, client_id=f"{unique_name}-lo", role="admin")
    admin = Admin(cluster)
    tps = [(topic, p) for p in range(4)]
    try:
        latest = client.list_offsets(tps, "latest")
        assert latest == {(topic, 0): 1, (topic, 1): 2, (topic, 2): 3, (topic, 3): 0}, \
            "latest is the last stable offset: an open transaction holds partition 3 at its start"
        assert latest == admin.list_offsets(tps, "latest")
        assert client.list_offsets(tps, "earliest") == admin.list_offsets(tps, "earliest") == dict.fromkeys(tps, 0)
        open_tx.commit_transaction()
        # the coordinator writes the commit marker after answering: the stable offset then moves past it
        wait_until(lambda: client.list_offsets([(topic, 3)], "latest") == {(topic, 3): 2}, timeout=30,
                   message="the stable offset past the commit marker")
        assert client.list_offsets([], "latest") == {}
        with pytest.raises(KafkaError) as missing:
            client.list_offsets([(f"{topic}-gone", 0)], "latest")
        assert missing.value.topic == f"{topic}-gone"
    finally:
        client.close()
