"""Issue 2: the working core, on two real KRaft clusters and real Spark."""

from __future__ import annotations

import time

import pytest

from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import Replicator, mirror_once, properties, wait_for
from tests.integration.target_checks import all_there, mirrored_in_order
from tests.kafkautil import TS0, consume_all, create_topic, end_offsets, list_topics, produce

pytestmark = pytest.mark.integration

# the standalone master (its UI on +3, the workers' UIs and RPC ports on +4..+7), moved with the
# other fixed ports by MM2PY_TEST_PORT_OFFSET (tests/lanes.py keeps each lane's ports apart)
SPARK_MASTER_PORT = 29877 + PORT_OFFSET


def records(topic: str, partition: int, count: int, start: int = 0):
    """Keyed records with two headers (one null-valued) and distinct timestamps."""
    return [
        (
            f"{topic}-{partition}-k{i}".encode(),
            f"value-{i}-".encode() * (1 + i % 7),
            [("seq", str(i).encode()), ("origin", None if i % 5 == 0 else b"A")],
            TS0 + partition * 1_000_000 + i,
        )
        for i in range(start, start + count)
    ]


def fields(rec):
    return (rec.key, rec.value, tuple(rec.headers or ()), rec.timestamp)


def assert_same_partitions(source: dict, target: dict, where: str) -> None:
    assert sorted(source) == sorted(target), f"{where}: partitions differ"
    for p in source:
        s, t = source[p], target[p]
        assert len(t) == len(s), f"{where} partition {p}: {len(s)} source records, {len(t)} on target"
        for i, (a, b) in enumerate(zip(s, t, strict=True)):
            assert fields(a) == fields(b), f"{where} partition {p} record {i}: {fields(a)} != {fields(b)}"


def test_three_topics_mirror_every_field(spark, cluster_a, cluster_b, unique_name, tmp_path):
    topics = [f"{unique_name}-t{i}" for i in range(3)]
    for i, topic in enumerate(topics):
        create_topic(cluster_a.bootstrap, topic, 4)
        for p in range(4):
            produce(cluster_a.bootstrap, topic, records(topic, p, 10_000), partition=p,
                    compression=("lz4", "gzip", None)[i])
    # default excludes: internal-looking and replica topics stay home
    create_topic(cluster_a.bootstrap, f"{unique_name}-state.internal", 1)
    create_topic(cluster_a.bootstrap, f"{unique_name}-x.replica", 1)
    produce(cluster_a.bootstrap, f"{unique_name}-state.internal", records("s", 0, 10), partition=0)

    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": f"{unique_name}.*"}})
    mirror_once(spark, text, tmp_path)

    on_b = list_topics(cluster_b.bootstrap)
    for topic in topics:
        assert f"A.{topic}" in on_b
        assert_same_partitions(consume_all(cluster_a.bootstrap, topic),
                               consume_all(cluster_b.bootstrap, f"A.{topic}"), topic)
    assert f"A.{unique_name}-state.internal" not in on_b
    assert f"A.{unique_name}-x.replica" not in on_b


def test_topics_exclude_and_identity_policy(spark, cluster_a, cluster_b, unique_name, tmp_path):
    keep, skip = f"{unique_name}-keep", f"{unique_name}-skip"
    for topic in (keep, skip):
        create_topic(cluster_a.bootstrap, topic, 2)
        for p in range(2):
            produce(cluster_a.bootstrap, topic, records(topic, p, 500), partition=p)
    text = properties(
        {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
        {"A->B": {
            "topics": f"{unique_name}.*",
            "topics.exclude": f"{unique_name}-sk.*",
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        }},
    )
    mirror_once(spark, text, tmp_path)
    on_b = list_topics(cluster_b.bootstrap)
    assert keep in on_b, "Identity policy keeps the topic name"
    assert f"A.{keep}" not in on_b
    assert skip not in on_b and f"A.{skip}" not in on_b, "topics.exclude honoured"
    assert_same_partitions(consume_all(cluster_a.bootstrap, keep), consume_all(cluster_b.bootstrap, keep), keep)


def test_restart_resumes_from_positions_on_target(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """A second run with a fresh Spark checkpoint copies only what is new: positions live on B."""
    topic = f"{unique_name}-r"
    create_topic(cluster_a.bootstrap, topic, 2)
    for p in range(2):
        produce(cluster_a.bootstrap, topic, records(topic, p, 3000), partition=p, compression="lz4")
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    mirror_once(spark, text, tmp_path / "run1")
    for p in range(2):
        produce(cluster_a.bootstrap, topic, records(topic, p, 2000, start=3000), partition=p)
    mirror_once(spark, text, tmp_path / "run2")
    assert end_offsets(cluster_b.bootstrap, f"A.{topic}") == {0: 5000, 1: 5000}
    assert_same_partitions(consume_all(cluster_a.bootstrap, topic),
                           consume_all(cluster_b.bootstrap, f"A.{topic}"), topic)


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_continuous_new_topics_partitions_and_sigkill(cluster_a, cluster_b, unique_name, tmp_path):
    """The real CLI, running: new topics and partitions follow; SIGKILL + restart loses nothing."""
    first, later = f"{unique_name}-first", f"{unique_name}-later"
    create_topic(cluster_a.bootstrap, first, 2)
    config = tmp_path / "mm2.properties"
    config.write_text(properties(
        {"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
        {"A->B": {"topics": f"{unique_name}.*"}},
        extra="refresh.topics.interval.seconds = 2\n",
    ))
    log = tmp_path / "replicator.log"
    rep = Replicator(config, log).start()
    try:
        produce(cluster_a.bootstrap, first, records(first, 0, 1000), partition=0)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, f"A.{first}").get(0) == 1000, 120,
                 "first records mirrored", rep)

        create_topic(cluster_a.bootstrap, later, 3)
        produce(cluster_a.bootstrap, later, records(later, 2, 700), partition=2)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, f"A.{later}").get(2) == 700, 60,
                 "topic created after start mirrored within the refresh interval", rep)

        from tests.kafkautil import add_partitions
        add_partitions(cluster_a.bootstrap, first, 3)
        produce(cluster_a.bootstrap, first, records(first, 2, 300), partition=2)
        wait_for(lambda: end_offsets(cluster_b.bootstrap, f"A.{first}").get(2) == 300, 60,
                 "partition added on the source mirrored", rep)

        # SIGKILL mid-stream: keep producing while the replicator dies
        for chunk in range(5):
            produce(cluster_a.bootstrap, first, records(first, 1, 2000, start=chunk * 2000), partition=1)
        rep.kill()
        for chunk in range(5, 8):
            produce(cluster_a.bootstrap, first, records(first, 1, 2000, start=chunk * 2000), partition=1)
        # A copy task of the killed run may still be tailing for up to copy.tail.ms (its Python
        # worker outlives the JVM until PySpark's daemon sees it gone), so the target can reach
        # 16,000 before the restarted run copies anything: wait for the restart's own micro-batch.
        restarted_at = log.stat().st_size
        rep = Replicator(config, log).start()

        def restart_copied() -> bool:
            with open(log, "rb") as f:
                f.seek(restarted_at)
                return b"micro-batch mirrored" in f.read()

        wait_for(lambda: restart_copied() and end_offsets(cluster_b.bootstrap, f"A.{first}").get(1, 0) >= 16_000,
                 120, "restarted replicator copied a micro-batch and caught up after SIGKILL", rep)
    finally:
        rc = rep.stop()
    assert rc == 0, f"clean stop on SIGTERM expected, got {rc}: {rep.tail()}"

    source = consume_all(cluster_a.bootstrap, first)
    target = consume_all(cluster_b.bootstrap, f"A.{first}")
    for p in source:
        want = [fields(r) for r in source[p]]
        got = [fields(r) for r in target[p]]
        missing = set(want) - set(got)
        assert not missing, f"partition {p}: {len(missing)} records lost after SIGKILL"
        # at-least-once: duplicates only as whole re-copied stretches, order kept
        deduped = list(dict.fromkeys(got))
        assert deduped == want, f"partition {p}: order differs"


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_two_flows_on_standalone_spark_lose_nothing_when_a_worker_is_killed(cluster_a, cluster_b, unique_name,
                                                                            tmp_path):
    """Every connector of A->B and B->A runs continuously on a standalone master with two one-core
    workers; one worker (and its executor) is SIGKILLed mid-stream. Spark runs the failed tasks
    again on the other; the flows go on, and every acknowledged record is on the other side in
    source order per partition."""
    import json
    import os
    import signal

    from mm2py.dev.spark import start_standalone
    from mm2py.formats import Checkpoint, Heartbeat
    from tests.kafkautil import Stream, commit_offsets

    ab, ba = f"{unique_name}-ab", f"{unique_name}-ba"
    create_topic(cluster_a.bootstrap, ab, 4)
    create_topic(cluster_b.bootstrap, ba, 4)
    keys = {"trigger.interval.ms": "500", "emit.checkpoints.interval.seconds": "5",
            "emit.heartbeats.interval.seconds": "2", "tasks.max": "2"}
    config = tmp_path / "mm2.properties"
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                                 {"A->B": {"topics": ab, **keys}, "B->A": {"topics": ba, **keys}}))
    spark = start_standalone(tmp_path / "spark", port=SPARK_MASTER_PORT)
    streams = [Stream(cluster_a.bootstrap, ab, 4, 1000).start(), Stream(cluster_b.bootstrap, ba, 4, 1000).start()]
    group = f"{unique_name}-g"
    commit_offsets(cluster_a.bootstrap, group, {(ab, p): 0 for p in range(4)})
    rep = Replicator(config, tmp_path / "replicator.log", "--spark-master", spark.master_url).start()
    try:
        wait_for(lambda: sum(end_offsets(cluster_b.bootstrap, f"A.{ab}").values()) > 5000
                 if f"A.{ab}" in list_topics(cluster_b.bootstrap) else False, 240, "A->B mirroring", rep)
        wait_for(lambda: rep.tail(400).count("micro-batch mirrored") >= 10, 120, "both flows committing", rep)
        executor_logs = list((tmp_path / "spark").glob("worker-1/app-*/*/stderr"))
        assert executor_logs, "worker 1 ran no executor: killing it would prove nothing"
        os.killpg(spark.procs[2].pid, signal.SIGKILL)  # worker 1 and its executor
        killed_at, killed_wall = len((tmp_path / "replicator.log").read_text()), time.time()
        time.sleep(20)  # streaming on, with one executor
        for stream in streams:
            stream.stop()
        acked = [stream.snapshot() for stream in streams]
        wait_for(lambda: all_there(cluster_b.bootstrap, f"A.{ab}", acked[0])
                 and all_there(cluster_a.bootstrap, f"B.{ba}", acked[1]), 300, "both flows caught up", rep)
        after = (tmp_path / "replicator.log").read_text()[killed_at:]
        assert "Telling app of lost worker" in (tmp_path / "spark" / "master.log").read_text()
        assert rep.proc is not None and rep.proc.poll() is None, rep.tail()
    finally:
        for stream in streams:
            stream.stop()
        rc = rep.stop()
        spark.stop()
    assert rc == 0, rep.tail()
    for bootstrap, remote, sent in ((cluster_b.bootstrap, f"A.{ab}", acked[0]), (cluster_a.bootstrap, f"B.{ba}",
                                                                               acked[1])):
        missing, duplicates = mirrored_in_order(bootstrap, remote, sent)
        assert missing == 0 and sum(map(len, sent.values())) > 20_000
        print(f"{remote}: {sum(map(len, sent.values()))} records, {duplicates} duplicates after the worker kill")
    events = [json.loads(line) for line in after.splitlines() if line.startswith("{")]
    for flow in ("A->B", "B->A"):
        assert any(e.get("event") == "micro-batch mirrored" and e.get("flow") == flow and e.get("records", 0) > 0
                   for e in events), f"{flow} made no progress after the kill"
    # the checkpoint and heartbeat connectors kept going too
    checkpoints = [Checkpoint.from_record(r.key, r.value)
                   for r in consume_all(cluster_b.bootstrap, "A.checkpoints.internal")[0]]
    assert {(c.topic, c.partition) for c in checkpoints if c.consumer_group_id == group} == {
        (f"A.{ab}", p) for p in range(4)}
    for cluster, src, dst in ((cluster_b, "A", "B"), (cluster_a, "B", "A")):
        beats = [Heartbeat.from_record(r.key, r.value) for r in consume_all(cluster.bootstrap, "heartbeats")[0]]
        newest = max(h.timestamp for h in beats if (h.source_cluster_alias, h.target_cluster_alias) == (src, dst))
        assert newest / 1000 > killed_wall + 10, f"no heartbeat {src}->{dst} after the kill"
