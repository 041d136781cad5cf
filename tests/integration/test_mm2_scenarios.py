"""Apache Kafka's MM2 integration-test scenarios (MM2-REFERENCE.md section 6), black-box on real clusters.

Each test ports one scenario of ``MirrorConnectorsIntegrationBaseTest`` (or the issue's compaction
requirement). Flows use per-test cluster aliases, so every internal topic a flow creates
(``mm2-offset-syncs.<alias>.internal``, ``<alias>.checkpoints.internal``) is the test's own, even
though the session's two clusters are shared. Checkpoint passes are run directly with
``run_checkpoints`` after an in-process ``mirror_once``: deterministic, and much faster than waiting
for the continuous connector.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mm2py.checkpoint.state import CheckpointLog, SyncLog, checkpoint_log_for, sync_log_for
from mm2py.checkpoint.task import load_checkpoints, run_checkpoints
from mm2py.client import translate_offsets
from mm2py.config import load_text
from mm2py.config.model import MirrorMakerConfig
from mm2py.formats import Checkpoint, OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.ops.failover import apply_plan, plan_failover
from mm2py.types import TP
from tests.integration.mirror_helpers import mirror_once, properties
from tests.kafkautil import Record, commit_offsets, consume_all, end_offsets, list_topics, produce, wait_until
from tests.kafkautil import create_topic as _create_topic

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: a long lane, for balance



# --------------------------------------------------------------------------- helpers


@dataclass
class Flow:
    """One flow SRC->DST between the shared clusters, under aliases no other test uses."""

    src: str
    dst: str
    a: str  # source bootstrap
    b: str  # target bootstrap
    text: str
    tmp: Path
    runs: int = 0

    @property
    def config(self) -> MirrorMakerConfig:
        return load_text(self.text)

    @property
    def flow(self):
        return self.config.enabled_flows[0]

    def remote(self, topic: str) -> str:
        return f"{self.src}.{topic}"

    def mirror(self, spark) -> None:
        """One in-process run until caught up, each with a fresh Spark checkpoint (a restart)."""
        self.runs += 1
        mirror_once(spark, self.text, self.tmp / f"run{self.runs}")

    def checkpoint_pass(self):
        return run_checkpoints(self.flow)

    def checkpoints(self, group: str) -> dict[TP, Checkpoint]:
        return {(t, p): cp for (g, t, p), cp in load_checkpoints(self.flow).items() if g == group}

    def target_group_offsets(self, group: str) -> dict[TP, int]:
        return Admin(self.config.clusters[self.dst]).group_offsets(group)


def make_flow(cluster_a, cluster_b, tmp_path: Path, keys: dict[str, str], extra: str = "") -> Flow:
    suffix = uuid.uuid4().hex[:6]
    src, dst = f"P{suffix}", f"Q{suffix}"
    text = properties({src: cluster_a.bootstrap, dst: cluster_b.bootstrap}, {f"{src}->{dst}": keys}, extra=extra)
    return Flow(src, dst, cluster_a.bootstrap, cluster_b.bootstrap, text, tmp_path)


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """kafkautil's create_topic, tolerating a partition leader that is not elected yet (fresh cluster)."""
    def visible() -> bool:
        try:
            return len(end_offsets(bootstrap, name)) == partitions
        except KafkaException:
            return False

    try:
        _create_topic(bootstrap, name, partitions, config)
    except KafkaException as e:
        if "NOT_LEADER" not in str(e) and "LEADER_NOT_AVAILABLE" not in str(e):
            raise
    wait_until(visible, 30, message=f"topic {name} with {partitions} partitions and leaders")


def values(prefix: str, start: int, count: int) -> list[tuple[bytes, bytes, None, None]]:
    return [(f"k{i}".encode(), f"{prefix}-{i}".encode(), None, None) for i in range(start, start + count)]


def produce_batches(bootstrap: str, topic: str, partition: int, batches: int, per_batch: int,
                    prefix: str) -> None:
    """``batches`` separate flushes, so the log holds at least that many record batches."""
    for b in range(batches):
        produce(bootstrap, topic, values(f"{prefix}-p{partition}", b * per_batch, per_batch), partition=partition)



def consume(bootstrap: str, group: str, topics: list[str], limits: dict[int, int] | None = None,
            idle: float = 5.0, timeout: float = 90) -> list[Record]:
    """Consume as an application does: subscribe in a group, read committed, commit what was read.

    With ``limits``, read at most that many records of each partition number (0 for unlisted).
    Returns once every assigned partition reached its limit or the high watermark, or after
    ``idle`` seconds without a record.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed", "log_level": 0})
    consumer.subscribe(topics)
    seen: list[Record] = []
    counts: dict[TP, int] = {}
    next_offsets: dict[TP, int] = {}
    last = time.monotonic()
    deadline = last + timeout
    try:
        while time.monotonic() - last < idle:
            assert time.monotonic() < deadline, f"consuming {topics} in {group} timed out"
            for msg in consumer.consume(1000, timeout=0.5):
                assert not msg.error(), msg.error()
                tp = (msg.topic(), msg.partition())
                if limits is not None and counts.get(tp, 0) >= limits.get(msg.partition(), 0):
                    continue
                last = time.monotonic()
                counts[tp] = counts.get(tp, 0) + 1
                next_offsets[tp] = msg.offset() + 1
                seen.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                   tuple(msg.headers() or ()), msg.timestamp()[1]))
            assignment = consumer.assignment()
            if assignment and all(_done(consumer, tp, counts, limits) for tp in assignment):
                break
        if next_offsets:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in next_offsets.items()],
                            asynchronous=False)
    finally:
        consumer.close()
    return seen


def _done(consumer: Consumer, tp: TopicPartition, counts: dict[TP, int], limits: dict[int, int] | None) -> bool:
    if limits is not None and counts.get((tp.topic, tp.partition), 0) >= limits.get(tp.partition, 0):
        return True
    position = consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset
    _low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
    return position >= 0 and position >= high


def record_at_or_after(records: list[Record], offset: int) -> Record | None:
    """The first record of a partition at or after ``offset`` (None: past the end)."""
    return next((r for r in records if r.offset >= offset), None)


def assert_exact(flow: Flow, topic: str, translated: dict[TP, int], source_offsets: dict[TP, int]) -> None:
    """The record a consumer resumes with on the target is the one it would have read next on the source."""
    src = consume_all(flow.a, topic)
    dst = consume_all(flow.b, flow.remote(topic))
    for (t, p), up in source_offsets.items():
        assert t == topic
        down = translated[(flow.remote(topic), p)]
        want = record_at_or_after(src[p], up)
        got = record_at_or_after(dst[p], down)
        if want is None:
            assert got is None, f"partition {p}: source offset {up} is at the end, target {down} is not"
        else:
            assert got is not None and (got.key, got.value) == (want.key, want.value), (
                f"partition {p}: source offset {up} -> target {down}: {want} on the source, {got} on the target")


# --------------------------------------------------------------------------- scenarios


def test_replication_with_empty_partition(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Port of ``testReplicationWithEmptyPartition``: an empty partition's group offset 0 syncs as 0."""
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path, {"topics": topic, "groups": f"{unique_name}.*"},
                     extra="sync.group.offsets.enabled = true\n")
    create_topic(cluster_a.bootstrap, topic, 2)
    produce(cluster_a.bootstrap, topic, values("v", 0, 100), partition=0)
    commit_offsets(cluster_a.bootstrap, group, {(topic, 0): 37, (topic, 1): 0})

    flow.mirror(spark)
    assert end_offsets(cluster_b.bootstrap, flow.remote(topic)) == {0: 100, 1: 0}
    report = flow.checkpoint_pass()
    assert group in report.synced_groups, report
    remote = flow.remote(topic)
    assert {k: cp.downstream_offset for k, cp in flow.checkpoints(group).items()} == {(remote, 0): 37, (remote, 1): 0}
    assert flow.target_group_offsets(group) == {(remote, 0): 37, (remote, 1): 0}


@pytest.mark.parametrize("lag_max", [10, 0], ids=["AutoOffsetSync-lag10", "FrequentOffsetSyncs-lag0"])
def test_one_way_replication_with_offset_sync(spark, cluster_a, cluster_b, unique_name, tmp_path, lag_max):
    """Port of ``testOneWayReplicationWithAutoOffsetSync`` / ``...WithFrequentOffsetSyncs``.

    The target group gets exactly the translated offsets; resuming there re-delivers nothing
    (MM2 promises fewer than ``offset.lag.max``; mm2py translates exactly). A topic created later
    joins the group sync.
    """
    t1, t2, group = f"{unique_name}-t1", f"{unique_name}-t2", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path,
                     {"topics": f"{unique_name}-t.*", "groups": f"{unique_name}.*", "offset.lag.max": str(lag_max)},
                     extra="sync.group.offsets.enabled = true\n")
    create_topic(cluster_a.bootstrap, t1, 3)
    for p in range(3):
        produce_batches(cluster_a.bootstrap, t1, p, 10, 40, "t1")
    first = consume(cluster_a.bootstrap, group, [t1], limits={0: 123, 1: 250, 2: 399})
    assert len(first) == 123 + 250 + 399

    flow.mirror(spark)
    report = flow.checkpoint_pass()
    assert group in report.synced_groups, report
    plan = plan_failover(flow.config, group, flow.src, flow.dst)
    assert plan.offsets == {(flow.remote(t1), 0): 123, (flow.remote(t1), 1): 250, (flow.remote(t1), 2): 399}
    assert flow.target_group_offsets(group) == plan.offsets
    assert translate_offsets(flow.config, flow.dst, flow.src, group) == plan.offsets
    assert_exact(flow, t1, plan.offsets, {(t1, 0): 123, (t1, 1): 250, (t1, 2): 399})

    # a new topic joins the group sync
    create_topic(cluster_a.bootstrap, t2, 1)
    produce_batches(cluster_a.bootstrap, t2, 0, 5, 20, "t2")
    first += consume(cluster_a.bootstrap, group, [t2], limits={0: 55})
    flow.mirror(spark)
    flow.checkpoint_pass()
    synced = flow.target_group_offsets(group)
    assert synced.get((flow.remote(t2), 0)) == 55, synced
    assert synced == plan_failover(flow.config, group, flow.src, flow.dst).offsets

    rest = consume(cluster_b.bootstrap, group, [flow.remote(t1), flow.remote(t2)])
    first_values = {r.value for r in first}
    rest_values = [r.value for r in rest]
    redelivered = first_values.intersection(rest_values)
    assert not redelivered, f"{len(redelivered)} records re-delivered on the target (offset.lag.max={lag_max})"
    assert len(rest_values) == len(set(rest_values))
    assert len(first_values) + len(rest_values) == 3 * 400 + 100, "every record read exactly once across A and B"


def test_offset_syncs_topic_on_target(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Port of ``testOffsetSyncsTopicsOnTarget``: syncs live on the target, checkpoints still flow."""
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path,
                     {"topics": topic, "groups": f"{unique_name}.*", "offset-syncs.topic.location": "target"})
    create_topic(cluster_a.bootstrap, topic, 2)
    for p in range(2):
        produce_batches(cluster_a.bootstrap, topic, p, 5, 30, "v")
    consume(cluster_a.bootstrap, group, [topic], limits={0: 70, 1: 150})
    flow.mirror(spark)
    report = flow.checkpoint_pass()

    on_b, on_a = list_topics(cluster_b.bootstrap), list_topics(cluster_a.bootstrap)
    assert f"mm2-offset-syncs.{flow.src}.internal" in on_b
    assert f"mm2-offset-syncs.{flow.dst}.internal" not in on_a
    assert f"mm2-offset-syncs.{flow.src}.internal" not in on_a
    assert end_offsets(cluster_b.bootstrap, f"mm2-offset-syncs.{flow.src}.internal")[0] > 0
    assert report.emitted, "checkpoints are emitted with the syncs topic on the target"
    remote = flow.remote(topic)
    assert {k: cp.downstream_offset for k, cp in flow.checkpoints(group).items()} == {(remote, 0): 70, (remote, 1): 150}


def test_no_checkpoints_if_no_records_are_mirrored(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Port of ``testNoCheckpointsIfNoRecordsAreMirrored``: no checkpoint before data is mirrored."""
    mirrored, other, group = f"{unique_name}-in", f"{unique_name}-out", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path, {"topics": mirrored, "groups": f"{unique_name}.*"})
    for topic in (mirrored, other):
        create_topic(cluster_a.bootstrap, topic, 1)
        produce(cluster_a.bootstrap, topic, values(topic, 0, 50), partition=0)
    consume(cluster_a.bootstrap, group, [mirrored, other], limits={0: 20})
    assert Admin(flow.config.clusters[flow.src]).group_offsets(group) == {(mirrored, 0): 20, (other, 0): 20}

    # created and committed before the first mirror run: no checkpoint yet
    report = flow.checkpoint_pass()
    assert report.groups == 1
    assert report.emitted == (), report
    assert flow.checkpoints(group) == {}

    flow.mirror(spark)
    report = flow.checkpoint_pass()
    checkpoints = flow.checkpoints(group)
    assert set(checkpoints) == {(flow.remote(mirrored), 0)}, "only the mirrored topic gets a checkpoint"
    assert checkpoints[(flow.remote(mirrored), 0)].downstream_offset == 20
    assert f"{flow.src}.{other}" not in list_topics(cluster_b.bootstrap)


def test_restart_replication(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Port of ``testRestartReplication``: after a restart checkpoints resume and stay monotonic."""
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path, {"topics": topic, "groups": f"{unique_name}.*"},
                     extra="sync.group.offsets.enabled = true\n")
    create_topic(cluster_a.bootstrap, topic, 2)
    for p in range(2):
        produce_batches(cluster_a.bootstrap, topic, p, 10, 50, "v1")
    consume(cluster_a.bootstrap, group, [topic], limits={0: 100, 1: 200})
    flow.mirror(spark)
    flow.checkpoint_pass()
    before = flow.checkpoints(group)
    remote = flow.remote(topic)
    assert {k: cp.downstream_offset for k, cp in before.items()} == {(remote, 0): 100, (remote, 1): 200}

    # more data and more consumption, then a restarted replicator (fresh Spark checkpoint)
    for p in range(2):
        produce_batches(cluster_a.bootstrap, topic, p, 4, 50, "v2")
    consume(cluster_a.bootstrap, group, [topic], limits={0: 150, 1: 5})
    flow.mirror(spark)
    assert end_offsets(cluster_b.bootstrap, remote) == {0: 700, 1: 700}, "the restart resumed, not re-copied"
    report = flow.checkpoint_pass()
    after = flow.checkpoints(group)
    assert {k: cp.downstream_offset for k, cp in after.items()} == {(remote, 0): 250, (remote, 1): 205}
    for key, cp in before.items():
        assert after[key].downstream_offset >= cp.downstream_offset, f"{key} moved back: {cp} -> {after[key]}"
    assert flow.target_group_offsets(group) == {(remote, 0): 250, (remote, 1): 205}, "group sync resumed"
    assert len(report.emitted) == 2

    # a third pass, as after another restart, reads the checkpoints topic and emits nothing new
    again = flow.checkpoint_pass()
    assert again.emitted == (), again
    assert flow.checkpoints(group) == after
    assert_exact(flow, topic, {k: cp.downstream_offset for k, cp in after.items()}, {(topic, 0): 250, (topic, 1): 205})


def test_offset_translation_behind_replication_flow(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Port of ``testOffsetTranslationBehindReplicationFlow``: 100 batches; group at 90%, then 10%."""
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path, {"topics": topic, "groups": f"{unique_name}.*"})
    create_topic(cluster_a.bootstrap, topic, 1)
    produce_batches(cluster_a.bootstrap, topic, 0, 100, 10, "v")
    assert end_offsets(cluster_a.bootstrap, topic) == {0: 1000}
    flow.mirror(spark)
    remote = flow.remote(topic)

    seen: list[int] = []
    for upstream in (105, 905, 105):  # advance to ~90%, then rewind to ~10%
        commit_offsets(cluster_a.bootstrap, group, {(topic, 0): upstream})
        flow.checkpoint_pass()
        cp = flow.checkpoints(group)[(remote, 0)]
        assert cp.upstream_offset == upstream, cp
        assert_exact(flow, topic, {(remote, 0): cp.downstream_offset}, {(topic, 0): upstream})
        seen.append(cp.downstream_offset)
    assert seen[0] < seen[1], f"checkpoint advanced with the group: {seen}"
    assert seen[2] < seen[1], f"checkpoint rewound with the group: {seen}"
    assert seen == [105, 905, 105]


def test_replication_without_offset_sync_creates_no_offset_syncs_topic(spark, cluster_a, cluster_b, unique_name,
                                                                       tmp_path):
    """Port of ``testReplicationWithoutOffsetSyncWillNotCreateOffsetSyncsTopic``."""
    topic = f"{unique_name}-t"
    flow = make_flow(cluster_a, cluster_b, tmp_path, {"topics": topic, "emit.offset-syncs.enabled": "false"})
    create_topic(cluster_a.bootstrap, topic, 2)
    for p in range(2):
        produce_batches(cluster_a.bootstrap, topic, p, 3, 100, "v")
    flow.mirror(spark)
    src, dst = consume_all(cluster_a.bootstrap, topic), consume_all(cluster_b.bootstrap, flow.remote(topic))
    for p in range(2):
        assert [(r.key, r.value) for r in dst[p]] == [(r.key, r.value) for r in src[p]]
    for cluster in (cluster_a, cluster_b):
        ours = {t for t in list_topics(cluster.bootstrap)
                if t.startswith("mm2-offset-syncs.") and (flow.src in t or flow.dst in t)}
        assert not ours, f"offset-syncs topics created on {cluster.bootstrap}: {ours}"


COMPACTED = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "100", "min.compaction.lag.ms": "0"}


def test_failover_exact_on_compacted_source_topic(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Issue requirement: a compacted source (offset gaps) fails over with nothing missed and nothing re-read."""
    topic, group = f"{unique_name}-c", f"{unique_name}-g"
    # the target topic must not compact while the test reads it: keep its segment settings default
    flow = make_flow(cluster_a, cluster_b, tmp_path, {
        "topics": topic, "groups": f"{unique_name}.*",
        "config.properties.exclude": r"segment\..*, min\.cleanable\.dirty\.ratio, delete\.retention\.ms, "
                                     r"min\.compaction\.lag\.ms"})
    create_topic(cluster_a.bootstrap, topic, 2, COMPACTED)
    seq = 0
    started = time.monotonic()
    while time.monotonic() - started < 4:  # keep writing so segments roll
        for p in range(2):
            produce(cluster_a.bootstrap, topic,
                    [(f"key-{i % 25}".encode(), f"p{p}-seq-{seq + i}".encode(), None, None) for i in range(50)],
                    partition=p)
        seq += 50
        time.sleep(0.15)
    ends = end_offsets(cluster_a.bootstrap, topic)

    def snapshot() -> dict[int, list[Record]]:
        return consume_all(cluster_a.bootstrap, topic)

    deadline = time.monotonic() + 60
    previous = None
    while True:
        current = snapshot()
        compacted = all(len(current[p]) < ends[p] for p in range(2))
        if compacted and previous == current:
            break  # compacted, and the cleaner has nothing left to do (the active segment stays)
        if time.monotonic() > deadline:
            pytest.fail(f"source topic {topic} not compacted within 60 s: high watermarks {ends}, "
                        f"records left {({p: len(current[p]) for p in current})}")
        previous = current if compacted else None
        time.sleep(2)
    source = current
    expected = {r.value for p in source for r in source[p]}
    assert len(expected) < sum(ends.values()), "offset gaps present"

    flow.mirror(spark)
    mirrored = consume_all(cluster_b.bootstrap, flow.remote(topic))
    assert {r.value for p in mirrored for r in mirrored[p]} == expected, "every surviving record mirrored"

    limits = {p: len(source[p]) // 3 + p * len(source[p]) // 3 for p in range(2)}
    first = consume(cluster_a.bootstrap, group, [topic], limits=limits)
    assert len(first) == sum(limits.values())
    config = flow.config
    plan = plan_failover(config, group, flow.src, flow.dst)
    assert all(p.how == "syncs" for p in plan.partitions), plan
    committed = {(p.source_topic, p.partition): p.source_offset for p in plan.partitions}
    assert any(plan.offsets[(flow.remote(topic), p)] != committed[(topic, p)] for p in range(2)), (
        "gaps make source and target offsets differ (else this test proves nothing)")
    apply_plan(config, plan)
    rest = consume(cluster_b.bootstrap, group, [flow.remote(topic)])

    read = [r.value for r in first] + [r.value for r in rest]
    missed = expected - set(read)
    rereads = len(read) - len(set(read))
    print(f"compacted failover: {len(expected)} records, {len(first)} on A, {len(rest)} on B, "
          f"{len(missed)} missed, {rereads} re-read")
    assert not missed, f"{len(missed)} records missed after failover, e.g. {sorted(missed)[:5]}"
    assert rereads == 0, f"{rereads} records re-read after failover"


def produce_transactions(bootstrap: str, topic: str, transactions: int, per_transaction: int, start: int,
                         txn_id: str) -> None:
    """``transactions`` committed source transactions: each commit marker takes an offset, so every
    transaction after the first starts a new linear run (a new offset sync)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                         "compression.type": "lz4", "log_level": 0})
    producer.init_transactions(30)
    for t in range(transactions):
        producer.begin_transaction()
        for i in range(start + t * per_transaction, start + (t + 1) * per_transaction):
            producer.produce(topic, value=f"h-{i}".encode(), partition=0)
        producer.commit_transaction(30)


def history_reads(flow: Flow) -> tuple[SyncLog, CheckpointLog]:
    return sync_log_for(flow.flow), checkpoint_log_for(flow.flow)


def test_a_group_100000_behind_translates_exactly_after_the_syncs_topic_is_compacted(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Issue requirement: MM2's syncs topic compacted down to the newest sync per partition, a group
    100,000 records behind still gets an exact checkpoint and fails over with nothing missed or
    re-read (the history keeps every sync); a checkpoint pass then reads only what is new."""
    topic, group = f"{unique_name}-h", f"{unique_name}-g"
    flow = make_flow(cluster_a, cluster_b, tmp_path, {"topics": topic, "groups": f"{unique_name}.*"})
    syncs_topic, history_topic = (f"mm2-offset-syncs.{flow.dst}.internal",
                                  f"mm2-offset-syncs-history.{flow.dst}.internal")
    create_topic(cluster_a.bootstrap, syncs_topic, 1, COMPACTED)  # MM2's syncs topic, cleaned fast
    create_topic(cluster_a.bootstrap, topic, 1)
    for run in range(4):  # 4 restarts of 5 transactions of 10,000 records: segments roll in between
        produce_transactions(cluster_a.bootstrap, topic, 5, 10_000, run * 50_000, f"{unique_name}-tx")
        flow.mirror(spark)
    history = consume_all(cluster_a.bootstrap, history_topic)[0]
    mine = [r for r in history if OffsetSync.from_record(r.key, r.value).topic == topic]
    assert len(mine) >= 20, f"expected a sync per linear run in the history, got {len(mine)}"

    def survivors() -> int:
        records = consume_all(cluster_a.bootstrap, syncs_topic)[0]
        return sum(OffsetSync.from_record(r.key, r.value).topic == topic for r in records)
    time.sleep(0.2)  # past segment.ms: a record of another partition rolls the segment holding ours
    other = OffsetSync(f"{topic}-other", 0, 0, 0)
    produce(cluster_a.bootstrap, syncs_topic, [(other.key_bytes(), other.value_bytes(), None, None)])
    wait_until(lambda: survivors() == 1, 120, interval=2,
               message=f"log cleaner compacting {syncs_topic} to the newest sync of the partition")

    source = consume_all(cluster_a.bootstrap, topic, isolation="read_committed")[0]
    assert len(source) == 200_000
    behind = source[-100_001]  # the group's next record: 100,000 records after it
    commit_offsets(cluster_a.bootstrap, group, {(topic, 0): behind.offset})
    target = consume_all(cluster_b.bootstrap, flow.remote(topic), isolation="read_committed")[0]
    where = next(r.offset for r in target if r.value == behind.value)
    assert where != behind.offset, "markers make source and target offsets differ (else this proves nothing)"

    syncs, checkpoints = history_reads(flow)
    first = run_checkpoints(flow.flow, [group], False, syncs, checkpoints)
    assert [(c.upstream_offset, c.downstream_offset) for c in first.emitted] == [(behind.offset, where)]

    plan = plan_failover(flow.config, group, flow.src, flow.dst)
    assert plan.offsets[(flow.remote(topic), 0)] == where
    apply_plan(flow.config, plan)
    # 100,000 records: a loaded machine may pause the consumer longer than the helper's 5 s idle
    rest = consume(cluster_b.bootstrap, group, [flow.remote(topic)], idle=60, timeout=300)
    read = [r.value for r in source if r.offset < behind.offset] + [r.value for r in rest]
    assert len(read) == len(set(read)), f"{len(read) - len(set(read))} records re-read"
    assert set(read) == {r.value for r in source}, f"{len(source) - len(set(read))} records missed"

    # the history grows; a pass kept from the last reads only what was appended since
    ends = {t: end_offsets(cluster, t)[0] for cluster, t in ((cluster_a.bootstrap, history_topic),
                                                            (cluster_a.bootstrap, syncs_topic))}
    produce_transactions(cluster_a.bootstrap, topic, 5, 10_000, 200_000, f"{unique_name}-tx")
    flow.mirror(spark)
    grown = sum(end_offsets(cluster_a.bootstrap, t)[0] - ends[t] for t in ends)
    second = run_checkpoints(flow.flow, [group], False, syncs, checkpoints)
    third = run_checkpoints(flow.flow, [group], False, syncs, checkpoints)
    whole = run_checkpoints(flow.flow, [group], False)  # what a pass without kept state reads
    print(f"compacted syncs: {len(mine)} syncs in the history, {survivors()} left in {syncs_topic}; "
          f"checkpoint pass reads: first {first.records_read}, after {grown} new syncs {second.records_read}, "
          f"then {third.records_read}; a fresh pass {whole.records_read}")
    assert 0 < second.records_read <= grown + 1  # new syncs (both topics), and at most the pass's checkpoint
    assert third.records_read == 0
    # a pass without kept state reads the whole history, more than the first pass read (the history
    # grew since). Not compared with the second pass: what it read of the compacted syncs topic the
    # log cleaner may have removed before the fresh pass reads it.
    assert whole.records_read > first.records_read

    # retention takes the oldest 150,000 records: the kept index forgets the syncs that mapped only
    # them, and a group among the records still there translates exactly as before
    later = source[-40_001]  # 10,000 records past the new log start
    commit_offsets(cluster_a.bootstrap, group, {(topic, 0): later.offset})
    later_at = next(r.offset for r in target if r.value == later.value)
    held = syncs.index.count(topic, 0)
    admin = AdminClient({"bootstrap.servers": cluster_a.bootstrap})  # kept: its futures die with it
    for future in admin.delete_records([TopicPartition(topic, 0, source[150_000].offset)]).values():
        future.result(30)
    trimmed = run_checkpoints(flow.flow, [group], False, syncs, checkpoints)
    print(f"retention: {trimmed.syncs_evicted} of {held} indexed syncs of the partition evicted")
    assert trimmed.syncs_evicted > 0 and syncs.index.count(topic, 0) == held - trimmed.syncs_evicted
    assert [(c.upstream_offset, c.downstream_offset) for c in trimmed.emitted] == [(later.offset, later_at)]
