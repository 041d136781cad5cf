"""Issue 49, start in order: on a fresh start heartbeats are mirrored and hops are known at once.

``A->B.topics`` names one topic and every refresh interval keeps MM2's default (600 s), so the
source lists A's topics once at its start and not again for ten minutes. ``heartbeats`` on A is
written by the B->A heartbeat connector: mm2py makes its connectors' internal topics before any
source lists topics (``mm2py.engine.prepare``), so ``A.heartbeats`` is mirrored to B from the
first micro-batch. Kafka's own client library (connect-mirror-client, ``RemoteClusterUtils``)
then counts one hop from A on B, read by a small Java program compiled here.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.kafkautil import create_topic, delete_topic, end_offsets, list_topics, produce, wait_until

pytestmark = pytest.mark.integration

HOPS_JAVA = Path(__file__).parent / "java" / "Hops.java"

Hops = Callable[[str, str], tuple[int, set[str]]]


@pytest.fixture(scope="module")
def java_hops(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Hops:
    """``(bootstrap, upstream alias) -> (replicationHops, upstreamClusters)`` as Kafka's Java client computes them."""
    classes = tmp_path_factory.mktemp("hops-classes")
    compiled = subprocess.run(["javac", "-cp", f"{kafka_jars}/*", "-d", str(classes), str(HOPS_JAVA)],
                              capture_output=True, text=True, timeout=180)
    assert compiled.returncode == 0, f"javac {HOPS_JAVA.name} failed: {compiled.stderr}"

    def ask(bootstrap: str, upstream: str) -> tuple[int, set[str]]:
        run = subprocess.run(["java", "-cp", f"{classes}:{kafka_jars}/*", "Hops", bootstrap, upstream],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, f"Hops against {bootstrap} failed: {run.stderr[-2000:]}"
        answers = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
        return int(answers["hops"]), {alias for alias in answers["upstream"].split(",") if alias}
    return ask


def delete_topics(bootstrap: str, *names: str) -> None:
    """Delete those of ``names`` that exist on ``bootstrap`` and wait until none is listed."""
    for name in set(names) & list_topics(bootstrap):
        delete_topic(bootstrap, name)
    wait_until(lambda: not set(names) & list_topics(bootstrap), 30, message=f"{names} deleted at {bootstrap}")


def first_line(log: Path, *words: str) -> int | None:
    """The number of the replicator log's first line holding every one of ``words``."""
    for number, line in enumerate(log.read_text(errors="replace").splitlines()):
        if all(word in line for word in words):
            return number
    return None


def records_in(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (0 while it does not exist)."""
    if topic not in list_topics(bootstrap):
        return 0
    return sum(end_offsets(bootstrap, topic).values())


def test_a_fresh_start_mirrors_heartbeats_and_java_counts_one_hop(cluster_a, cluster_b, unique_name, tmp_path,
                                                                 java_hops):
    orders = f"{unique_name}-orders"
    # fresh for this test: no heartbeat topic on either cluster, whatever ran before in this session
    delete_topics(cluster_a.bootstrap, "heartbeats", "B.heartbeats")
    delete_topics(cluster_b.bootstrap, "heartbeats", "A.heartbeats")
    assert java_hops(cluster_b.bootstrap, "A")[0] == -1, "B must know no heartbeat from A before the run"
    create_topic(cluster_a.bootstrap, orders, 1)
    produce(cluster_a.bootstrap, orders, [(f"k{i}".encode(), b"order", [], None) for i in range(100)], partition=0)

    config = tmp_path / "mm2.properties"
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": orders}}))
    log = tmp_path / "replicator.log"
    replicator = Replicator(config, log).start()
    try:
        # Spark's start on a shared machine takes its own time: the minute counts from the flows' start
        wait_for(lambda: first_line(log, "flow started") is not None, 180, "the flows started", replicator)
        started = time.monotonic()
        wait_for(lambda: records_in(cluster_b.bootstrap, "A.heartbeats") > 0, 60,
                 "A.heartbeats on B with records, a minute after a fresh start", replicator)
        seconds = time.monotonic() - started
        wait_for(lambda: records_in(cluster_b.bootstrap, f"A.{orders}") == 100, 60, "the orders mirrored",
                 replicator)
        assert "A.checkpoints.internal" in list_topics(cluster_b.bootstrap)
        hops, upstream = java_hops(cluster_b.bootstrap, "A")
    finally:
        rc = replicator.stop()
    assert rc == 0, f"clean stop on SIGTERM expected, got {rc}: {replicator.tail()}"
    print(f"A.heartbeats had records on B {seconds:.0f} s after the flows started")
    # made by the preparation, before any source listed topics: not left to a race between the
    # source's first listing and the first beat of B->A (the next listing is 600 s later)
    made = first_line(log, "created remote topic", "A.heartbeats")
    assert made is not None and made < first_line(log, "flow started"), \
        "A.heartbeats must be created before the flows start"
    assert hops == 1, f"RemoteClusterUtils.replicationHops(B, A) = {hops}"
    assert "A" in upstream, f"RemoteClusterUtils.upstreamClusters(B) = {upstream}"
