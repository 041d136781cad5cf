"""Issue 48: a real Structured Streaming job (Spark's Kafka source, file sink) failed over A -> B."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from confluent_kafka import Producer

from bench.common import stop_tool
from mm2py.ops.spark_checkpoint import read_batch
from tests.integration.mirror_helpers import REPO, Replicator, properties, wait_for
from tests.kafkautil import create_topic, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.long]  # 5-8 min each on a loaded 2-core machine

JOB = Path(__file__).with_name("spark_kafka_job.py")


def start_job(bootstrap: str, topic: str, sink: Path, cp: Path, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.Popen([sys.executable, str(JOB), bootstrap, topic, str(sink), str(cp)], cwd=REPO, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def sink_rows(sink: Path) -> list[dict]:
    """The rows of the files the sink committed (its _spark_metadata log), not of aborted batches'
    files, in the order of their batches (a partition's rows in one batch are in one file)."""
    meta = sink / "_spark_metadata"
    entries = [e for e in (os.listdir(meta) if meta.is_dir() else []) if e.split(".")[0].isdigit()]
    files: list[str] = []
    for entry in sorted(entries, key=lambda e: int(e.split(".")[0])):
        for line in (meta / entry).read_text().splitlines()[1:]:
            path = urlparse(json.loads(line)["path"]).path
            if path not in files:
                files.append(path)
    return [json.loads(line) for f in files for line in Path(f).read_text().splitlines() if line]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mm2py", *args], capture_output=True, text=True, timeout=120)


def sink_batches(sink: Path) -> list[int]:
    """The batches the sink committed (its _spark_metadata log)."""
    meta = sink / "_spark_metadata"
    names = (n.split(".")[0] for n in (os.listdir(meta) if meta.is_dir() else []))
    return sorted(int(n) for n in names if n.isdigit())


def forget_last_commit(cp: Path, sink: Path) -> int:
    """The state of a query killed after its sink committed batch L and before Spark wrote commits/L
    (what Spark re-runs as L on restart); returns L."""
    last = sink_batches(sink)[-1]
    assert (cp / "commits" / str(last)).exists(), "the job stopped with its sink's last batch committed"
    for path in (cp / "commits" / str(last), cp / "commits" / f".{last}.crc"):
        path.unlink(missing_ok=True)
    for sub in ("offsets", "commits"):  # planned after L: not there when L's commit is missing
        for n in os.listdir(cp / sub):
            if n.lstrip(".").split(".")[0].isdigit() and int(n.lstrip(".").split(".")[0]) > last:
                (cp / sub / n).unlink()
    return last


def test_real_spark_job_fails_over_and_back_exactly(cluster_a, cluster_b, unique_name, tmp_path):
    """The job is stopped on A as if killed after its sink committed its last batch and before
    Spark's commit log did: Spark re-runs that batch on B, and the sink must skip it again (nothing
    twice). Then it fails back to A from wherever its stop on B left the checkpoint (the unit tests
    cover each of the two checkpoint states)."""
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, 3)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}},
                      extra="refresh.topics.interval.seconds = 2\n")
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(text)
    sink, cp = tmp_path / "sink", tmp_path / "cp"
    produced: dict[int, list[str]] = {0: [], 1: [], 2: []}
    sent = [0]  # rounds written so far: values stay unique across the writer's runs

    def keep_producing(stop: threading.Event) -> None:
        producer = Producer({"bootstrap.servers": cluster_a.bootstrap, "linger.ms": 5, "log_level": 0})
        while not stop.is_set():
            i = sent[0]
            for p in range(3):
                value = f"p{p}-{i}"
                producer.produce(topic, key=f"k{i}", value=value, partition=p)
                produced[p].append(value)
            sent[0] += 1
            producer.poll(0)
            time.sleep(0.2)  # ~5 records/s a partition: small counts on a busy machine
        assert producer.flush(30) == 0

    def start_writer() -> tuple[threading.Event, threading.Thread]:
        stop = threading.Event()
        thread = threading.Thread(target=keep_producing, args=(stop,), daemon=True)
        thread.start()
        return stop, thread

    rep = Replicator(config_path, tmp_path / "replicator.log").start()
    stop, writer = start_writer()
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
        stop.set()
        writer.join(60)
        total = sum(len(v) for v in produced.values())
        wait_for(lambda: sum(end_offsets(cluster_b.bootstrap, f"A.{topic}").values()) >= total, 120,
                 "B holds every record", rep)
        wait_for(lambda: len(sink_rows(sink)) >= total or job.poll() is not None, 180, "the job drained on B")
        time.sleep(3)  # a duplicate would come after the count is reached
        assert job.poll() is None, (tmp_path / "job-b.log").read_text()[-3000:]
        # failback: the same job goes back to A from where its stop on B left it
        stop_tool(job)
        job = None
        on_b = len(sink_rows(sink)) - len(on_a)
        done = cli("failback", str(config_path), "--spark-checkpoint", str(cp), "--from", "B", "--to", "A",
                   "--execute", "--force")
        assert done.returncode == 0, done.stderr + done.stdout
        stop, writer = start_writer()  # records arrive on A again
        job = start_job(cluster_a.bootstrap, topic, sink, cp, tmp_path / "job-a2.log")
        time.sleep(5)
        stop.set()
        writer.join(60)
        total = sum(len(v) for v in produced.values())
        wait_for(lambda: len(sink_rows(sink)) >= total or job.poll() is not None, 240,
                 "the job drained on A after the failback")
        time.sleep(3)
        assert job.poll() is None, (tmp_path / "job-a2.log").read_text()[-3000:]
        print(f"failback: {on_b} read on B, then {len(sink_rows(sink)) - len(on_a) - on_b} on A again")
    finally:
        stop.set()
        if job is not None:
            stop_tool(job)
        assert rep.stop() == 0, rep.tail()
    rows = sink_rows(sink)
    by_partition: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for row in rows:  # in the order the sink committed them
        by_partition[row["partition"]].append(row["value"])
    values = [v for vs in by_partition.values() for v in vs]
    dups = len(values) - len(set(values))
    missing = sum(len(set(produced[p]) - set(by_partition[p])) for p in range(3))
    print(f"read on A {len(on_a)}, after failover {len(rows) - len(on_a)}, total {total}, "
          f"duplicates {dups}, missing {missing}, batch used {batch.note}")
    assert dups == 0 and missing == 0
    assert by_partition == produced, "every partition in order"
