"""Issue 22: identity active/active and identity rings, loop prevention by provenance, on real clusters.

Every cluster takes writes into the same topic name; flows use IdentityReplicationPolicy. Checked:
every committed record reaches every cluster exactly once, aborted ones nowhere, nothing comes
back (end offsets still once the writers stopped), and each mirrored batch's records section is
byte for byte one the origin cluster wrote (no header added, codec kept).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from mm2py.client import MirrorClient
from mm2py.config import load_text
from mm2py.kafka import batches as rb
from mm2py.kafka.wire import RawClient
from mm2py.ops.failover import apply_plan, plan_failover
from mm2py.source.provenance import REGISTRY_TOPIC, parse_registration
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.kafkautil import consume_all, create_topic, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py: writers for minutes

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
        except BaseException as e:  # reported by the test
            self.error = e


def raw(bootstrap: str, topic: str) -> list[tuple[int, bool, bytes, bool]]:
    """(producer id, control, records section, transactional) of every batch, read with raw Fetches."""
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
                buf = bytes(client.fetched(response)[(topic, p)].records)
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


def origins_in(bootstrap: str, topic: str) -> set[str]:
    """The origins registered for the producer ids of ``topic``'s batches (the registry serves every test)."""
    registered = registry(bootstrap)
    return {registered[pid] for pid, _, _, _ in raw(bootstrap, topic) if pid in registered}


def committed_keys(bootstrap: str, topic: str) -> Counter:
    recs = consume_all(bootstrap, topic, isolation="read_committed")
    return Counter(r.key for p in recs.values() for r in p)


def total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def write_for(clusters: dict[str, str], topic: str, seconds: float, phase: str = "") -> Counter:
    """Writers on every cluster for ``seconds``; the keys they committed (each once)."""
    writers = {alias: Writer(bootstrap, topic, alias + phase) for alias, bootstrap in clusters.items()}
    for w in writers.values():
        w.start()
    time.sleep(seconds)
    for w in writers.values():
        w.stop_event.set()
    for w in writers.values():
        w.join(60)
        assert w.error is None, f"writer {w.tag}: {w.error!r}"
        assert w.committed and w.aborted, f"writer {w.tag} wrote {len(w.committed)}, aborted {w.aborted}"
    return Counter(k for w in writers.values() for k in w.committed)


def converge(clusters: dict[str, str], topic: str, expected: Counter, rep: Replicator) -> None:
    """Wait until every cluster holds ``expected`` once; then check that nothing more comes (no loop)."""

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


def start_cycle(clusters: dict[str, str], flows: list[str], topic: str, tmp_path: Path,
                extra: dict[str, str] | None = None, groups: str = "none") -> Replicator:
    for bootstrap in clusters.values():
        create_topic(bootstrap, topic, PARTITIONS)
    config = tmp_path / "identity.properties"
    config.write_text(properties(clusters, {f: {"topics": topic, "groups": groups} for f in flows},
                                 "".join(f"{k} = {v}\n" for k, v in {**FAST, **(extra or {})}.items())))
    return Replicator(config, tmp_path / "mm2.log").start()


def run_cycle(clusters: dict[str, str], flows: list[str], topic: str, tmp_path: Path, seconds: float,
              extra: dict[str, str] | None = None) -> None:
    """Writers on every cluster for ``seconds`` while mm2py runs ``flows``; then every record landed once."""
    rep = start_cycle(clusters, flows, topic, tmp_path, extra)
    try:
        converge(clusters, topic, write_for(clusters, topic, seconds), rep)
    finally:
        rep.stop()


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
    run_cycle(clusters, ["A->B", "B->A"], topic, tmp_path, seconds=60)
    checked = check_batches_byte_identical(clusters, topic)
    assert checked > 100, checked
    for alias, bootstrap in clusters.items():
        origins = origins_in(bootstrap, topic)
        assert origins == set(clusters) - {alias}, (alias, origins)  # each cluster's ids stand for the other


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_identity_ring_of_three_every_record_reaches_every_cluster_once(cluster_a, cluster_b, cluster_c,
                                                                        unique_name, tmp_path):
    clusters = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap, "C": cluster_c.bootstrap}
    topic = f"{unique_name}-orders"
    run_cycle(clusters, ["A->B", "B->C", "C->A"], topic, tmp_path, seconds=30)
    assert check_batches_byte_identical(clusters, topic) > 100
    # C holds A's records relayed by B: registered on C for origin A, not for B
    assert origins_in(cluster_c.bootstrap, topic) == {"A", "B"}


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_identity_active_active_exactly_once(cluster_a, cluster_b, unique_name, tmp_path):
    """Both flows exactly-once: each transaction's producer id is registered for the flow's source."""
    clusters = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}
    topic = f"{unique_name}-orders"
    run_cycle(clusters, ["A->B", "B->A"], topic, tmp_path, seconds=20,
              extra={"A.exactly.once.source.support": "required", "B.exactly.once.source.support": "required"})
    assert check_batches_byte_identical(clusters, topic, transactional=True) > 20
    for alias, bootstrap in clusters.items():
        assert origins_in(bootstrap, topic) == set(clusters) - {alias}


def consume_group(bootstrap: str, group: str, topic: str) -> list[bytes]:
    """Everything ``group`` reads of ``topic`` from its committed offsets (read_committed), then committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    keys: list[bytes] = []
    idle = time.monotonic()
    try:
        while time.monotonic() - idle < 8:
            for msg in consumer.consume(500, timeout=0.5):
                assert not msg.error(), msg.error()
                keys.append(msg.key())
                idle = time.monotonic()
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return keys


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_identity_active_active_failover_reads_nothing_twice_and_misses_nothing(cluster_a, cluster_b, unique_name,
                                                                               tmp_path):
    clusters = {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}
    topic, group, back = f"{unique_name}-orders", f"{unique_name}-g", f"{unique_name}-back"
    checkpoints_on = {"emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": "2",
                      "refresh.groups.interval.seconds": "1"}
    rep = start_cycle(clusters, ["A->B", "B->A"], topic, tmp_path, checkpoints_on, groups=f"{group}, {back}")
    try:
        first = write_for(clusters, topic, 15, "-1")
        converge(clusters, topic, first, rep)
        read_on_a = consume_group(cluster_a.bootstrap, group, topic)
        assert Counter(read_on_a) == first
        read_back_on_b = consume_group(cluster_b.bootstrap, back, topic)  # the other way round: B -> A
        config = load_text((tmp_path / "identity.properties").read_text())
        caught_up = plan_failover(config, group, "A", "B")
        assert {(p.target_topic, p.partition): p.target_offset for p in caught_up.partitions} == \
            {(topic, p): end for p, end in end_offsets(cluster_b.bootstrap, topic).items()}, caught_up
        second = write_for(clusters, topic, 15, "-2")  # both clusters keep taking writes
        converge(clusters, topic, first + second, rep)
        done = subprocess.run([sys.executable, "-m", "mm2py", "failover", str(tmp_path / "identity.properties"),
                               "--group", group, "--from", "A", "--to", "B", "--execute"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "syncs both ways" in done.stdout, done.stdout + done.stderr
        read_on_b = consume_group(cluster_b.bootstrap, group, topic)
        twice = set(read_on_a) & set(read_on_b)
        assert not twice, f"{len(twice)} records read twice"
        assert Counter(read_on_a + read_on_b) == first + second, "records missed"
        plan = plan_failover(config, back, "B", "A")
        assert {p.how for p in plan.partitions} == {"syncs both ways"}, plan
        apply_plan(config, plan)
        read_back_on_a = consume_group(cluster_a.bootstrap, back, topic)
        assert not set(read_back_on_b) & set(read_back_on_a), "records read twice, B -> A"
        assert Counter(read_back_on_b + read_back_on_a) == first + second, "records missed, B -> A"
        # the checkpoint connector translates the same way: B's checkpoints of the group match
        checkpoints = MirrorClient.for_cluster(config, "B").remote_consumer_offsets(group, "A")
        assert checkpoints == {(topic, p.partition): p.target_offset for p in caught_up.partitions}, checkpoints
    finally:
        rep.stop()
