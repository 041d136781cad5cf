"""Issue 22: identity active/active and identity rings, loop prevention by provenance, on real clusters.

Every cluster takes writes into the same topic name; flows use IdentityReplicationPolicy. Checked:
every committed record reaches every cluster exactly once, aborted ones nowhere, nothing comes
back (end offsets still once the writers stopped), and each mirrored batch's records section is
byte for byte one the origin cluster wrote (no header added, codec kept).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mm2py.kafka import batches as rb
from mm2py.kafka.wire import RawClient
from mm2py.source.provenance import REGISTRY_TOPIC, parse_registration
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.kafkautil import consume_all, create_topic, end_offsets

pytestmark = pytest.mark.integration

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
FAST = {"replication.policy.class": IDENTITY, "refresh.topics.interval.seconds": "1",
        "emit.checkpoints.enabled": "false", "emit.heartbeats.interval.seconds": "1", "trigger.interval.ms": "200"}
PARTITIONS = 2


class Writer(threading.Thread):
    """Writes ``tag``-keyed records into ``topic`` until stopped: plain, lz4 and transactional batches.

    Every fifth transaction is aborted; ``committed`` lists the keys that count.
    """

    def __init__(self, bootstrap: str, topic: str, tag: str):
        super().__init__(daemon=True)
        self.topic, self.tag = topic, tag
        base = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20}
        self.producers = {
            "plain": Producer(base),
            "lz4": Producer({**base, "compression.type": "lz4"}),
            "txn": Producer({**base, "transactional.id": f"{topic}-{tag}-writer", "compression.type": "lz4"}),
        }
        self.producers["txn"].init_transactions(30)
        self.stop_event = threading.Event()
        self.committed: list[bytes] = []
        self.aborted = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop_event.is_set():
                kind = ("plain", "lz4", "txn")[n % 3]
                keys = [f"{self.tag}-{n}-{i}".encode() for i in range(20)]
                producer = self.producers[kind]
                abort = kind == "txn" and n % 5 == 2
                if kind == "txn":
                    producer.begin_transaction()
                for key in keys:
                    producer.produce(self.topic, key=key, value=key * 4)
                if kind == "txn" and abort:
                    producer.flush(30)
                    producer.abort_transaction(30)
                    self.aborted += len(keys)
                elif kind == "txn":
                    producer.commit_transaction(30)
                    self.committed += keys
                else:
                    assert producer.flush(30) == 0
                    self.committed += keys
                n += 1
                time.sleep(0.03)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def raw(bootstrap: str, topic: str) -> list[tuple[int, bool, bytes, bool]]:
    """(producer id, control, records section, transactional) of every batch, read with raw Fetches."""
    from mm2py.config import load_text

    cluster = load_text(f"clusters = X\nX.bootstrap.servers = {bootstrap}\n").clusters["X"]
    client = RawClient(cluster, client_id="identity-cycles-test")
    out = []
    try:
        leaders = client.leaders({topic})
        for p in range(PARTITIONS):
            offset = 0
            while True:
                response = client.wait(client.fetch(leaders[(topic, p)], {(topic, p): offset},
                                                    partition_max_bytes=8 << 20, max_bytes=8 << 20, max_wait_ms=10))
                buf = bytes(RawClient.fetched(response)[(topic, p)].records)
                views = [v for v in rb.split_batches(buf) if v.next_offset > offset]
                if not views:
                    break
                for v in views:
                    out.append((v.producer_id, v.is_control, buf[v.start + rb.HEADER_SIZE:v.start + v.size],
                                v.is_transactional))
                    offset = v.next_offset
    finally:
        client.close()
    return out


def registry(bootstrap: str) -> dict[int, str]:
    found = {}
    for recs in consume_all(bootstrap, REGISTRY_TOPIC).values():
        for r in recs:
            got = parse_registration(r.key, r.value)
            if got is not None:
                found[got[0]] = got[1]
    return found


def committed_keys(bootstrap: str, topic: str) -> Counter:
    recs = consume_all(bootstrap, topic, isolation="read_committed")
    return Counter(r.key for p in recs.values() for r in p)


def total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def run_cycle(clusters: dict[str, str], flows: list[str], topic: str, tmp_path: Path, seconds: float,
              extra: dict[str, str] | None = None) -> dict[str, Writer]:
    """Writers on every cluster for ``seconds`` while mm2py runs ``flows``; returns the writers when all landed."""
    for bootstrap in clusters.values():
        create_topic(bootstrap, topic, PARTITIONS)
    config = tmp_path / "identity.properties"
    config.write_text(properties(clusters, {f: {"topics": topic, "groups": "none"} for f in flows},
                                 "".join(f"{k} = {v}\n" for k, v in {**FAST, **(extra or {})}.items())))
    rep = Replicator(config, tmp_path / "mm2.log").start()
    writers = {alias: Writer(bootstrap, topic, alias) for alias, bootstrap in clusters.items()}
    try:
        for w in writers.values():
            w.start()
        time.sleep(seconds)
        for w in writers.values():
            w.stop_event.set()
        for w in writers.values():
            w.join(60)
            assert w.error is None, f"writer {w.tag}: {w.error!r}"
        expected = Counter(k for w in writers.values() for k in w.committed)

        def landed() -> bool:
            return all(committed_keys(b, topic) == expected for b in clusters.values())

        wait_for(landed, 180, f"every committed record of {topic} on every cluster once", rep)
        # nothing loops: end offsets stay where they are for three refresh intervals and more
        ends = {alias: total(b, topic) for alias, b in clusters.items()}
        time.sleep(8)
        assert {alias: total(b, topic) for alias, b in clusters.items()} == ends, rep.tail()
        for alias, b in clusters.items():
            keys = committed_keys(b, topic)
            assert keys == expected, f"{alias}: {sum((keys - expected).values())} extra (duplicates or loops), " \
                                     f"{sum((expected - keys).values())} missing"
    finally:
        rep.stop()
    return writers


def check_batches_byte_identical(clusters: dict[str, str], topic: str, transactional: bool = False) -> int:
    """Every mirrored batch's records section is one its origin wrote; returns how many were checked.

    ``transactional``: every mirrored batch was written in a transaction (exactly-once mode).
    """
    written: dict[str, set[bytes]] = {}
    batches = {alias: raw(b, topic) for alias, b in clusters.items()}
    registries = {alias: registry(b) for alias, b in clusters.items()}
    for alias, found in batches.items():
        written[alias] = {body for pid, control, body, _ in found if not control and pid not in registries[alias]}
    checked = 0
    for alias, found in batches.items():
        for pid, control, body, in_txn in found:
            origin = registries[alias].get(pid)
            if origin is None or control:
                continue
            assert in_txn or not transactional, f"a batch mirrored into {alias} outside a transaction"
            assert origin != alias, f"{alias} holds a batch registered as its own origin"
            assert body in written[origin], f"a batch on {alias} from {origin} differs from every batch {origin} wrote"
            checked += 1
    return checked


def test_identity_active_active_every_record_once_nothing_loops(cluster_a, cluster_b, unique_name, tmp_path):
    clusters = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}
    topic = f"{unique_name}-orders"
    writers = run_cycle(clusters, ["A->B", "B->A"], topic, tmp_path, seconds=60)
    assert all(w.committed and w.aborted for w in writers.values())
    checked = check_batches_byte_identical(clusters, topic)
    assert checked > 100, checked
    for alias, bootstrap in clusters.items():
        origins = set(registry(bootstrap).values())
        assert origins == set(clusters) - {alias}, (alias, origins)  # each cluster's ids stand for the other


def test_identity_ring_of_three_every_record_reaches_every_cluster_once(cluster_a, cluster_b, cluster_c,
                                                                        unique_name, tmp_path):
    clusters = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap, "C": cluster_c.bootstrap}
    topic = f"{unique_name}-orders"
    run_cycle(clusters, ["A->B", "B->C", "C->A"], topic, tmp_path, seconds=30)
    assert check_batches_byte_identical(clusters, topic) > 100
    # C holds A's records relayed by B: registered on C for origin A, not for B
    assert set(registry(cluster_c.bootstrap).values()) == {"A", "B"}


def test_identity_active_active_exactly_once(cluster_a, cluster_b, unique_name, tmp_path):
    """Both flows exactly-once: each transaction's producer id is registered for the flow's source."""
    clusters = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}
    topic = f"{unique_name}-orders"
    run_cycle(clusters, ["A->B", "B->A"], topic, tmp_path, seconds=20,
              extra={"A.exactly.once.source.support": "required", "B.exactly.once.source.support": "required"})
    assert check_batches_byte_identical(clusters, topic, transactional=True) > 20
    for alias, bootstrap in clusters.items():
        assert set(registry(bootstrap).values()) == set(clusters) - {alias}
