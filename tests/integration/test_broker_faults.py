"""Broker events a replicator must ride through, on real single-broker clusters of their own.

Records stream into the source throughout; the replicator runs as an operator runs it (a
child process). After each event every record the producer had acknowledged is on the target
in source order per partition (at-least-once: a record may appear twice, never out of order
and never missing), and the replicator never exited.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2py.dev import cluster as devcluster
from tests.conftest import PORT_OFFSET, own_clusters
from tests.integration.mirror_helpers import REPO, Replicator, properties, wait_for
from tests.integration.target_checks import all_there, mirrored_in_order
from tests.kafkautil import Stream, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

PORTS = {"fault-a": 31092 + PORT_OFFSET, "fault-b": 31192 + PORT_OFFSET}
METRICS_PORT = 31292 + PORT_OFFSET
PARTITIONS = 4


@pytest.fixture(scope="module")
def fault_clusters(cluster_workdir: Path) -> Iterator[dict[str, devcluster.DevCluster]]:
    with own_clusters(cluster_workdir, PORTS) as started:
        yield started


def first_records_there(target: str, remote: str, stream: Stream, count: int = 50) -> bool:
    """The stream acknowledged ``count`` records on every partition and those are on the target.

    Until the stream has acknowledged that many, an empty or short list would count as mirrored
    before the replicator copied anything (the remote topic exists from its start-up).
    """
    acked = {p: v[:count] for p, v in stream.acked.items()}
    return (len(acked) == PARTITIONS and all(len(v) == count for v in acked.values())
            and all_there(target, remote, acked))


def replicator_config(tmp_path: Path, clusters: dict[str, devcluster.DevCluster], topic: str) -> Path:
    path = tmp_path / "faults.properties"
    path.write_text(properties({"A": clusters["fault-a"].bootstrap, "B": clusters["fault-b"].bootstrap},
                               {"A->B": {"topics": topic, "trigger.interval.ms": "200",
                                         "emit.checkpoints.interval.seconds": "2",
                                         "refresh.topics.interval.seconds": "5", "admin.timeout.ms": "10000"}},
                               f"metrics.port = {METRICS_PORT}\n"))
    return path


def restart(name: str, workdir: Path, down_s: float) -> None:
    devcluster.kill_cluster_hard(name, workdir)
    time.sleep(down_s)
    devcluster.start_cluster(name, PORTS[name], workdir=workdir)


def test_source_then_target_broker_killed_and_restarted_while_streaming(fault_clusters, cluster_workdir,
                                                                          unique_name, tmp_path):
    topic, remote = unique_name, f"A.{unique_name}"
    a, b = fault_clusters["fault-a"].bootstrap, fault_clusters["fault-b"].bootstrap
    create_topic(a, topic, PARTITIONS)
    rep = Replicator(replicator_config(tmp_path, fault_clusters, topic), tmp_path / "mm2.log").start()
    stream = Stream(a, topic, PARTITIONS, 500).start()
    try:
        wait_for(lambda: first_records_there(b, remote, stream), 180, "the flow is mirroring", rep)
        restart("fault-a", cluster_workdir, 10)
        wait_for(lambda: all_there(b, remote, {p: list(v) for p, v in stream.acked.items()}), 240,
                 "caught up after the source broker's restart", rep)
        restart("fault-b", cluster_workdir, 10)
        wait_for(lambda: all_there(b, remote, {p: list(v) for p, v in stream.acked.items()}), 240,
                 "caught up after the target broker's restart", rep)
        total = stream.stop()
        assert stream.unflushed == 0 and not stream.failed, (stream.unflushed, stream.failed[:3])
        wait_for(lambda: all_there(b, remote, stream.acked), 240, "every acknowledged record mirrored", rep)
        assert rep.alive(), rep.tail()
    finally:
        stream._stop.set()
        rc = rep.stop()
    missing, duplicates = mirrored_in_order(b, remote, stream.acked)
    assert missing == 0 and total > 0
    print(f"source then target restarted: {total} records, {duplicates} duplicates, replicator exit {rc}")
    assert rc == 0, rep.tail()
    log = (tmp_path / "mm2.log").read_text()
    # the operator's terminal: mm2py's own lines; Spark's logs and stack traces went to spark.log
    assert "Using incubator modules" not in log and "default log4j profile" not in log, log[:2000]
    assert "MicroBatchExecution" not in log, "Spark's query failures stay in spark.log"
    # a worker's traceback (a runner that could not connect back while brokers restarted) is in
    # spark.log; the terminal names its error in one line
    assert "Traceback" not in log, log[-3000:]
    assert "flows stopped" in log.split("shutting down:")[-1], log[-2000:]


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_target_down_for_minutes_stalls_the_flow_and_it_catches_up(fault_clusters, cluster_workdir, unique_name,
                                                                    tmp_path):
    topic, remote = unique_name, f"A.{unique_name}"
    a, b = fault_clusters["fault-a"].bootstrap, fault_clusters["fault-b"].bootstrap
    create_topic(a, topic, PARTITIONS)
    config = replicator_config(tmp_path, fault_clusters, topic)
    rep = Replicator(config, tmp_path / "mm2.log").start()
    stream = Stream(a, topic, PARTITIONS, 500).start()

    def status() -> dict:
        out = subprocess.run([sys.executable, "-m", "mm2py", "status", str(config), "--json"], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)[0]

    try:
        wait_for(lambda: first_records_there(b, remote, stream), 180, "the flow is mirroring", rep)
        devcluster.kill_cluster_hard("fault-b", cluster_workdir)
        down_at = time.monotonic()
        wait_for(lambda: status().get("replicator_state") == "stalled", 120, "status shows the flow stalled", rep)
        stalled = status()
        assert stalled["error"] and "cluster=B" in stalled["error"], stalled
        assert "cluster=B" in (stalled["replicator_reason"] or ""), stalled
        time.sleep(max(0.0, 180 - (time.monotonic() - down_at)))  # three minutes down in all
        assert rep.alive(), rep.tail()
        devcluster.start_cluster("fault-b", PORTS["fault-b"], workdir=cluster_workdir)
        total = stream.stop()
        assert stream.unflushed == 0 and not stream.failed, (stream.unflushed, stream.failed[:3])
        wait_for(lambda: all_there(b, remote, stream.acked), 300, "caught up after the target came back", rep)
        wait_for(lambda: status().get("replicator_state") == "running", 120, "status shows it running again", rep)
    finally:
        stream._stop.set()
        rc = rep.stop()
    missing, duplicates = mirrored_in_order(b, remote, stream.acked)
    assert missing == 0 and total > 0
    print(f"target down 3 min: {total} records, {duplicates} duplicates, replicator exit {rc}")
    assert rc == 0, rep.tail()
    log = (tmp_path / "mm2.log").read_text()
    assert log.count("flow stalled") <= 3, "one line per change of state, not one per retry"
