"""Issue 48: a real Structured Streaming job (Spark's Kafka source, file sink) failed over A -> B."""

from __future__ import annotations

import json
import time

import pytest

from bench.common import stop_tool
from mm2py.ops.spark_checkpoint import read_batch
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.integration.spark_job_helpers import (
    PARTITIONS,
    OrdersWriter,
    cli,
    drain_job,
    exactness,
    forget_last_commit,
    sink_batches,
    sink_rows,
    start_job,
)
from tests.kafkautil import consume_all, create_topic, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.long]  # 5-8 min each on a loaded 2-core machine

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def test_real_spark_job_fails_over_and_back_exactly(cluster_a, cluster_b, unique_name, tmp_path):
    """The job is stopped on A as if killed after its sink committed its last batch and before
    Spark's commit log did: Spark re-runs that batch on B, and the sink must skip it again (nothing
    twice). Then it fails back to A from wherever its stop on B left the checkpoint (the unit tests
    cover each of the two checkpoint states)."""
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}},
                      extra="refresh.topics.interval.seconds = 2\n")
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(text)
    sink, cp = tmp_path / "sink", tmp_path / "cp"
    rep = Replicator(config_path, tmp_path / "replicator.log").start()
    writer = OrdersWriter(cluster_a.bootstrap, topic).start()
    job = None
    try:
        # the replicator's JVM first, then the job's: two Spark starts at once starve a 2-core machine
        wait_for(lambda: sum(end_offsets(cluster_b.bootstrap, f"A.{topic}").values()) > 0, 240, "mirroring", rep)
        job = start_job(cluster_a.bootstrap, topic, sink, cp, tmp_path / "job-a.log")
        # two batches at least: a lost last commit needs a committed batch before it
        wait_for(lambda: (len(sink_rows(sink)) >= 30 and len(sink_batches(sink)) >= 2) or job.poll() is not None,
                 300, "the job's first batches on A")
        assert job.poll() is None, (tmp_path / "job-a.log").read_text()[-3000:]
        stop_tool(job)  # mid-stream: the producer keeps writing
        on_a = sink_rows(sink)
        rerun = forget_last_commit(cp, sink)
        batch = read_batch(cp)
        assert batch.rerun is not None and batch.rerun.batch_id == rerun, batch.note
        read = batch.rerun.offsets
        # the job's read offsets are mirrored (records and offset syncs) before the failover
        wait_for(lambda: all(end_offsets(cluster_b.bootstrap, f"A.{topic}").get(p, 0) >= o
                             for (_, p), o in read.items()), 120, "B holds what the job read", rep)
        # the tool refuses a checkpoint written in the last QUIET_SECONDS (120 s), its guess that the
        # query may still be running; the test stopped the job itself (the process has exited), so
        # --force says exactly that instead of waiting two minutes
        done = cli("failover", str(config_path), "--spark-checkpoint", str(cp), "--from", "A", "--to", "B",
                   "--execute", "--force")
        assert done.returncode == 0, done.stderr + done.stdout
        job = start_job(cluster_b.bootstrap, f"A.{topic}", sink, cp, tmp_path / "job-b.log")
        time.sleep(5)
        writer.stop()
        wait_for(lambda: sum(end_offsets(cluster_b.bootstrap, f"A.{topic}").values()) >= writer.total, 120,
                 "B holds every record", rep)
        drain_job(job, sink, writer.total, tmp_path / "job-b.log", "B")
        # failback: the same job goes back to A from where its stop on B left it
        stop_tool(job)
        job = None
        on_b = len(sink_rows(sink)) - len(on_a)
        done = cli("failback", str(config_path), "--spark-checkpoint", str(cp), "--from", "B", "--to", "A",
                   "--execute", "--force")
        assert done.returncode == 0, done.stderr + done.stdout
        writer.start()  # records arrive on A again
        job = start_job(cluster_a.bootstrap, topic, sink, cp, tmp_path / "job-a2.log")
        time.sleep(5)
        writer.stop()
        drain_job(job, sink, writer.total, tmp_path / "job-a2.log", "A after the failback", timeout=240)
        print(f"failback: {on_b} read on B, then {len(sink_rows(sink)) - len(on_a) - on_b} on A again")
    finally:
        writer.stop()
        if job is not None:
            stop_tool(job)
        assert rep.stop() == 0, rep.tail()
    rows = sink_rows(sink)
    by_partition, dups, missing, _ = exactness(rows, writer)
    print(f"read on A {len(on_a)}, after failover {len(rows) - len(on_a)}, total {writer.total}, "
          f"duplicates {dups}, missing {missing}, batch used {batch.note}")
    assert dups == 0 and missing == 0
    assert by_partition == writer.produced, "every partition in order"


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_identity_exactly_once_transactional_job_fails_over_exactly(cluster_a, cluster_b, unique_name, tmp_path):
    """Identity policy and exactly-once mirroring; the producer writes transactions on A (every
    third aborted) and the job reads read_committed, by ``subscribePattern`` on A and by ``assign``
    of the same-named topic on B. Control records take offsets on both clusters, at different
    places: the translated offsets must resume the job at its next committed record. Its sink must
    hold every committed record once, in order per partition, and no aborted one."""
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}},
                      extra=f"refresh.topics.interval.seconds = 2\nreplication.policy.class = {IDENTITY}\n"
                            "B.exactly.once.source.support = required\n")
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(text)
    sink, cp = tmp_path / "sink", tmp_path / "cp"
    rep = Replicator(config_path, tmp_path / "replicator.log").start()
    writer = OrdersWriter(cluster_a.bootstrap, topic, f"{unique_name}-txn", abort_every=3).start()
    pattern = f"{topic[:-2]}.s"  # a Java regex matching the topic alone
    assignment = json.dumps({topic: list(range(PARTITIONS))})  # Identity: B's remote topic has A's name

    def on_b_committed(counts: dict[int, int]) -> bool:
        got = consume_all(cluster_b.bootstrap, topic, isolation="read_committed")
        return all(len(got.get(p, [])) >= n for p, n in counts.items())

    job = None
    try:
        wait_for(lambda: sum(end_offsets(cluster_b.bootstrap, topic).values()) > 0, 240, "mirroring", rep)
        job = start_job(cluster_a.bootstrap, pattern, sink, cp, tmp_path / "job-a.log", "subscribePattern",
                        "read_committed")
        wait_for(lambda: (len(sink_rows(sink)) >= 30 and len(sink_batches(sink)) >= 2) or job.poll() is not None,
                 300, "the job's first batches on A")
        assert job.poll() is None, (tmp_path / "job-a.log").read_text()[-3000:]
        stop_tool(job)  # mid-stream: the producer keeps writing
        on_a = sink_rows(sink)
        batch = read_batch(cp)
        # whatever the job read (or planned) was committed on A before it stopped: B holding that many
        # committed records a partition holds what it read, and the syncs that translate it
        before_stop = {p: len(v) for p, v in writer.produced.items()}
        wait_for(lambda: on_b_committed(before_stop), 120, "B holds what the job read", rep)
        done = cli("failover", str(config_path), "--spark-checkpoint", str(cp), "--from", "A", "--to", "B",
                   "--execute", "--force")
        assert done.returncode == 0, done.stderr + done.stdout
        print(done.stdout)
        job = start_job(cluster_b.bootstrap, assignment, sink, cp, tmp_path / "job-b.log", "assign",
                        "read_committed")
        time.sleep(5)
        writer.stop()
        wait_for(lambda: on_b_committed({p: len(v) for p, v in writer.produced.items()}), 120,
                 "B holds every committed record", rep)
        drain_job(job, sink, writer.total, tmp_path / "job-b.log", "B")
    finally:
        writer.stop()
        if job is not None:
            stop_tool(job)
        assert rep.stop() == 0, rep.tail()
    rows = sink_rows(sink)
    by_partition, dups, missing, aborted = exactness(rows, writer)
    print(f"read on A {len(on_a)}, after failover {len(rows) - len(on_a)}, committed {writer.total}, "
          f"aborted {len(writer.aborted)} ({writer.rounds} transactions), duplicates {dups}, missing {missing}, "
          f"aborted in the sink {aborted}, batch used {batch.note}")
    assert writer.aborted and dups == 0 and missing == 0 and aborted == 0
    assert by_partition == writer.produced, "every partition in order"
