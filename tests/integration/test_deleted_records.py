"""Issue 45: a start inside a record batch. DeleteRecords (Kafka Streams purges its repartition
topics this way) leaves a log start inside a batch, and MM2 records positions inside batches; a
flow that starts there copies the rest of that batch, record for record, with exact offset syncs.

Batches here hold hundreds of records: each chunk is produced with a long linger and flushed, so
it becomes one batch (checked before each test relies on it)."""

from __future__ import annotations

import json
import threading
import time

import pytest
import structlog

from mm2py.checkpoint.task import load_syncs
from mm2py.config import load_text
from mm2py.config.model import ClusterConfig
from mm2py.engine.driver import Engine
from mm2py.kafka import batches as rb
from mm2py.kafka.admin import Admin
from mm2py.kafka.wire import RawClient
from mm2py.stores.ledger import Ledger
from mm2py.stores.positions import PositionStore
from tests.integration.mirror_helpers import Replicator, mirror_once, properties, wait_for
from tests.integration.target_checks import assert_mirrored, delete_records
from tests.kafkautil import TS0, Record, consume_all, create_topic, end_offsets, produce

pytestmark = pytest.mark.integration

# one batch per chunk: everything of a chunk is sent in one request after the linger
BATCHED = {"linger.ms": 2000, "batch.size": 4 << 20, "batch.num.messages": 100_000}
CHUNKS = (700, 700, 600)  # batches [0, 700), [700, 1400), [1400, 2000)
LOST_EVENT = "deleted before they were mirrored"


def produce_batches(bootstrap: str, topic: str, partition: int, codec: str | None, chunks=CHUNKS,
                    first: int = 0) -> None:
    """``sum(chunks)`` keyed records with headers and distinct timestamps, one batch per chunk."""
    i = first
    for size in chunks:
        produce(bootstrap, topic, [(f"{topic}-{partition}-k{n}".encode(), f"value-{n}-".encode() * (1 + n % 5),
                                    [("seq", str(n).encode()), ("null", None if n % 3 else b"x")],
                                    TS0 + partition * 1_000_000 + n) for n in range(i, i + size)],
                partition=partition, compression=codec, extra=BATCHED)
        i += size


def batch_bounds(cluster: ClusterConfig, topic: str, partition: int) -> list[tuple[int, int]]:
    """(base offset, next offset) of every batch from the log start, read with a raw Fetch."""
    client = RawClient(cluster, client_id="deleted-records-test")
    try:
        node = client.leaders({topic})[(topic, partition)]
        offset = client.log_start_offset(node, (topic, partition))
        out: list[tuple[int, int]] = []
        while True:
            response = client.wait(client.fetch(node, {(topic, partition): offset}, partition_max_bytes=8 << 20,
                                                max_bytes=8 << 20, max_wait_ms=10))
            views = [v for v in rb.split_batches(bytes(client.fetched(response)[(topic, partition)].records))
                     if v.next_offset > offset]
            if not views:
                return out
            out += [(v.base_offset, v.next_offset) for v in views]
            offset = views[-1].next_offset
    finally:
        client.close()


def assert_inside_a_batch(cluster: ClusterConfig, topic: str, partition: int, offset: int) -> None:
    bounds = batch_bounds(cluster, topic, partition)
    assert any(base < offset < end for base, end in bounds), f"{offset} is no batch's inside: {bounds}"


def assert_syncs_exact(text: str, topic: str, partition: int, expected: list[Record], got: list[Record]) -> None:
    """Every mirrored source offset translates to the target offset its record landed at."""
    syncs = load_syncs(load_text(text).enabled_flows[0])
    wrong = [(a.offset, b.offset, syncs.translate(topic, partition, a.offset)) for a, b in zip(expected, got,
                                                                                              strict=True)
             if syncs.translate(topic, partition, a.offset) != b.offset]
    assert not wrong, f"partition {partition}: (source, target, translated) {wrong[:5]}"


def test_a_flow_started_where_delete_records_left_the_log_start_inside_a_batch_copies_all_after_it(
        cluster_a, cluster_b, unique_name, tmp_path):
    """The issue's case, with connect-mirror-maker: 3 partitions of 2,000 records, DeleteRecords
    inside a batch, then a first run. Every record from the log start on lands on B."""
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 3)
    starts = {0: 500, 1: 500, 2: 1000}  # inside the first batch (none, lz4) and the second (gzip)
    for p, codec in enumerate((None, "lz4", "gzip")):
        produce_batches(cluster_a.bootstrap, topic, p, codec)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    clusters = load_text(text).clusters
    for p, start in starts.items():
        assert_inside_a_batch(clusters["A"], topic, p, start)
    delete_records(cluster_a.bootstrap, {(topic, p): start for p, start in starts.items()})

    config = tmp_path / "mm2.properties"
    config.write_text(text)
    rep = Replicator(config, tmp_path / "mm2.log", "--once").start()
    assert rep.proc is not None
    rep.proc.wait(300)
    assert rep.proc.returncode == 0, rep.tail()

    source, target = consume_all(cluster_a.bootstrap, topic), consume_all(cluster_b.bootstrap, f"A.{topic}")
    for p, start in starts.items():
        assert [r.offset for r in source[p]] == list(range(start, 2000))
        assert_mirrored(source[p], target[p], f"partition {p}")
        assert_syncs_exact(text, topic, p, source[p], target[p])
    positions = PositionStore(clusters["B"], "A").load()
    assert {p: positions.get((topic, p)) for p in starts} == {p: 1999 for p in starts}
    events = [json.loads(line) for line in (tmp_path / "mm2.log").read_text().splitlines() if line.startswith("{")]
    assert not [e for e in events if LOST_EVENT in e["event"]], "deleted before the flow began: not the flow's loss"
    copied = sum(e["records"] for e in events if e["event"] == "micro-batch mirrored")
    assert copied == sum(2000 - start for start in starts.values())


def test_a_restart_from_positions_inside_a_batch_copies_the_rest_of_it_and_reports_only_what_was_lost(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Positions as MM2 records them, one record at a time, inside batches; on partition 1
    DeleteRecords also moved the log start past the position, inside a later batch."""
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 2)
    for p, codec in enumerate(("zstd", None)):
        produce_batches(cluster_a.bootstrap, topic, p, codec)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    clusters = load_text(text).clusters
    assert_inside_a_batch(clusters["A"], topic, 0, 300)
    assert_inside_a_batch(clusters["A"], topic, 1, 1000)
    before = consume_all(cluster_a.bootstrap, topic)
    store = PositionStore(clusters["B"], "A")
    store.ensure_topic(Admin(clusters["B"]), replication_factor=1)
    store.save({(topic, 0): 299, (topic, 1): 299})
    store.close()
    # the remote topic the run that recorded those positions made (without it, positions with no
    # remote topic mean it was deleted on B, and the flow refills it from the log start)
    create_topic(cluster_b.bootstrap, f"A.{topic}", 2)
    delete_records(cluster_a.bootstrap, {(topic, 1): 1000})

    with structlog.testing.capture_logs() as logs:
        mirror_once(spark, text, tmp_path)

    target = consume_all(cluster_b.bootstrap, f"A.{topic}")
    expected = {0: [r for r in before[0] if r.offset >= 300], 1: [r for r in before[1] if r.offset >= 1000]}
    for p in (0, 1):
        assert_mirrored(expected[p], target[p], f"partition {p}")
        assert_syncs_exact(text, topic, p, expected[p], target[p])
    lost = [(e["partition"], e["lost_from"], e["lost_to"]) for e in logs
            if LOST_EVENT in e["event"] and e["topic"] == topic]
    assert lost == [(1, 300, 1000)], "only what was deleted after the position and before the copy"
    gaps = [(e.partition, e.kind, e.action, e.source_old) for e in Ledger(clusters["B"], "A", "A->B").load().entries
            if e.topic == topic]
    assert gaps == [(1, "gap", "skipped", {"start": 300, "end": 1000})], "the ledger keeps the gap"


TRIGGER_S = 30


def test_delete_records_mid_flow_past_the_position_copies_the_rest_of_the_batch_holding_the_log_start(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    """A running flow between micro-batches: new batches arrive and DeleteRecords moves the log
    start inside one of them before the flow reads them. The flow reports the records it never
    saw as lost and copies everything from the log start on."""
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 2)
    for p, codec in enumerate((None, "snappy")):
        produce_batches(cluster_a.bootstrap, topic, p, codec, chunks=(700, 700))
    # a micro-batch at most every TRIGGER_S and no tail: the second round waits for the next
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topic, "trigger.interval.ms": str(TRIGGER_S * 1000), "copy.tail.ms": "0"}})
    config = load_text(text)
    engine = Engine(config, spark, str(tmp_path / "ckpt"))
    stop = threading.Event()
    runner = threading.Thread(target=engine.wait, args=(stop,), daemon=True)
    remote = f"A.{topic}"
    starts = {0: 2400, 1: 3000}  # inside [2100, 2800) and [2800, 3500)

    def committed() -> list[dict]:
        return [e for e in logs if e["event"] == "micro-batch mirrored" and e.get("records")]

    with structlog.testing.capture_logs() as logs:
        engine.start(config.enabled_flows)
        try:
            runner.start()
            wait_for(lambda: len(committed()) >= 1 and end_offsets(cluster_b.bootstrap, remote) == {0: 1400, 1: 1400},
                     180, "the first round mirrored and committed")
            rounds = len(committed())
            # Spark's processing-time trigger looks for new data at multiples of its interval since
            # the epoch (and once at once when a batch overran one): let the next multiple after
            # the commit pass, then produce and delete well before the one after it
            boundary = (time.time() // TRIGGER_S + 1) * TRIGGER_S
            time.sleep(boundary + 5 - time.time())
            round_two_at = time.time()
            for p, codec in enumerate((None, "snappy")):
                produce_batches(cluster_a.bootstrap, topic, p, codec, chunks=(700, 700, 700), first=1400)
            before = consume_all(cluster_a.bootstrap, topic)
            delete_records(cluster_a.bootstrap, {(topic, p): start for p, start in starts.items()})
            took = time.time() - round_two_at
            print(f"second round produced and deleted in {took:.1f} s")
            assert round_two_at // TRIGGER_S == time.time() // TRIGGER_S, \
                f"producing and deleting took {took:.1f} s, past a trigger: no micro-batch may plan between them"
            assert len(committed()) == rounds
            everything = {p: 1400 + 3500 - start for p, start in starts.items()}
            wait_for(lambda: end_offsets(cluster_b.bootstrap, remote) == everything, 180,
                     "everything from the log start mirrored")
        finally:
            stop.set()
            engine.stop()

    clusters = load_text(text).clusters
    for p, start in starts.items():
        assert_inside_a_batch(clusters["A"], topic, p, start)
    target = consume_all(cluster_b.bootstrap, remote)
    for p, start in starts.items():
        expected = [r for r in before[p] if r.offset < 1400 or r.offset >= start]
        assert_mirrored(expected, target[p], f"partition {p}")
        assert_syncs_exact(text, topic, p, expected, target[p])
    lost = sorted((e["partition"], e["lost_from"], e["lost_to"]) for e in logs
                  if LOST_EVENT in e["event"] and e["topic"] == topic)
    assert lost == [(0, 1400, 2400), (1, 1400, 3000)]


def test_a_topic_first_seen_by_a_running_flow_starts_inside_a_batch_without_loss(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    """A repartition topic a Kafka Streams app creates and purges while the flow runs: its
    partitions are first seen by a micro-batch that plans them at once, from a log start inside
    a batch. (The second run resumes the first one's Spark checkpoint, so the new topic's
    partitions are new to a running flow's offsets, as when a refresh finds them.)"""
    first, later = f"{unique_name}-first", f"{unique_name}-repartition"
    create_topic(cluster_a.bootstrap, first, 1)
    produce_batches(cluster_a.bootstrap, first, 0, None, chunks=(100,))
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": f"{unique_name}.*"}})
    mirror_once(spark, text, tmp_path)

    create_topic(cluster_a.bootstrap, later, 2)
    for p, codec in enumerate(("lz4", None)):
        produce_batches(cluster_a.bootstrap, later, p, codec)
    clusters = load_text(text).clusters
    for p in (0, 1):
        assert_inside_a_batch(clusters["A"], later, p, 500)
    delete_records(cluster_a.bootstrap, {(later, p): 500 for p in (0, 1)})
    with structlog.testing.capture_logs() as logs:
        mirror_once(spark, text, tmp_path)  # the same Spark checkpoint

    source, target = consume_all(cluster_a.bootstrap, later), consume_all(cluster_b.bootstrap, f"A.{later}")
    for p in (0, 1):
        assert_mirrored(source[p], target[p], f"partition {p}")
        assert_syncs_exact(text, later, p, source[p], target[p])
    assert not [e for e in logs if LOST_EVENT in e["event"]]
    assert len(consume_all(cluster_b.bootstrap, f"A.{first}")[0]) == 100, "the first topic copied once"
