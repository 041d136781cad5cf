"""A copy task rescheduled to another executor on a standalone Spark cluster (issue 50).

A standalone master with two one-core workers runs one flow A->B with continuous copy (its
backlog micro-batches are copy intervals, exactly-once ones committing a transaction per commit
period) and two copy tasks, one per executor, over a backlog that a writer keeps growing. While
a copy task runs, its worker JVM and its executor (one process group) are SIGKILLed; Spark runs
the lost task again on the other executor. At-least-once: every source record is on B in source
order per partition, duplicates only as whole stretches copied again; the same with resident
copiers (``resident``: tails' copiers outlive their tasks, handed over between executors through
the host's folder). Exactly-once:
read_committed on B holds exactly the source's committed records, in order, none twice, none
missing, none aborted. Both: the flow commits on after the kill, and the driver's event log
shows the lost attempt succeeded on the other executor.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mm2py.config import load_text
from mm2py.dev.spark import StandaloneSpark, start_standalone
from mm2py.source.copy import handover
from mm2py.stores.positions import PositionStore
from tests.conftest import PORT_OFFSET
from tests.integration.eos_helpers import Writers, assert_exactly_once
from tests.integration.mirror_helpers import Replicator, copy_intervals, properties, wait_for
from tests.integration.spark_tasks import (
    event_spark_conf,
    executors_of,
    query_stages,
    rescheduled,
    running_tasks,
    task_ends,
)
from tests.kafkautil import Stream, consume_all, create_topic, end_offsets, list_topics

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

PARTITIONS = 4
SPARK_PORT = 29777 + PORT_OFFSET  # workers take port + 3 to + 7 (mm2py.dev.spark)
QUERY = "source A->B"  # the copy query's name (mm2py.engine.driver), in each job's description
BACKLOG = 60_000
# exactly-once's copy interval is the backlog's first micro-batch, an interval only while its plan
# is not caught up: a backlog (about 1.7 MB) past the first plan's max.batch.bytes
EXACTLY_ONCE_BACKLOG = 240_000
INTERVAL_MS = 6000


def preload(bootstrap: str, topic: str, count: int) -> None:
    """``count`` plain records over the partitions, numbered: a backlog before the flow starts."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4",
                         "enable.idempotence": True, "log_level": 0})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=b"b-%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def recopied_stretches(got: list[bytes], want: list[bytes]) -> int:
    """How many stretches of ``want`` were copied again in ``got``; asserts ``got`` is ``want`` in
    order, each duplicate part of a stretch copied again from an earlier point, nothing missing."""
    index = {v: i for i, v in enumerate(want)}
    assert len(index) == len(want), "source values repeat: the check needs them unique"
    at, restarts = 0, 0
    for value in got:
        i = index.get(value)
        assert i is not None, f"{value!r} on B is not on A"
        if i != at:
            assert i < at, f"record {at} ({want[at]!r}) missing: B goes on with record {i}"
            restarts += 1
        at = i + 1
    assert at == len(want), f"B ends at record {at} of {len(want)}"
    assert list(dict.fromkeys(got)) == want
    return restarts


def mirror_events(log: Path, since: int = 0) -> list[dict]:
    events = [json.loads(line) for line in log.read_text(errors="replace")[since:].splitlines()
              if line.startswith("{")]
    return [e for e in events if e.get("event") == "micro-batch mirrored" and e.get("flow") == "A->B"]


def kill_a_copy_worker(spark: StandaloneSpark, events: Path, rep: Replicator, hold: float) -> tuple[int, set[int]]:
    """SIGKILL the worker (and its executor) that runs a copy task, ``hold`` s into the task;
    (worker index, the task ids it ran)."""
    deadline = time.monotonic() + 360  # a loaded machine starts Spark slowly
    while time.monotonic() < deadline:
        stages = query_stages(events, QUERY)
        for i in range(spark.workers):
            worker = spark.logdir / f"worker-{i}"
            tasks = running_tasks(worker, stages)
            if tasks:
                time.sleep(hold)
                still = tasks & running_tasks(worker, stages)
                if still:
                    os.killpg(spark.procs[1 + i].pid, signal.SIGKILL)
                    return i, still
        assert rep.alive(), rep.tail()
        time.sleep(0.2)
    raise AssertionError(f"no copy task seen running for {hold} s in 360 s; {rep.tail()}")


def flow_config(a: str, b: str, topic: str, exactly_once: bool, events: Path, resident: bool = False) -> str:
    keys = {"topics": topic, "tasks.max": "2", "trigger.interval.ms": "500", "batch.duration.ms": str(INTERVAL_MS),
            "max.batch.bytes": "1000000",  # the first plan, before a rate is measured: seconds, not minutes
            "copy.continuous.enabled": "true", "emit.checkpoints.interval.seconds": "5",
            "emit.heartbeats.interval.seconds": "2", "admin.timeout.ms": "15000"}
    # a standalone master on loopback counts as one host, where resident copiers are on unless set:
    # the other cases keep the tails alone
    keys["copy.resident.enabled"] = "true" if resident else "false"
    extra = "".join(f"{k} = {v}\n" for k, v in event_spark_conf(events).items())
    if exactly_once:
        extra += "B.exactly.once.source.support = required\n"
    return properties({"A": a, "B": b}, {"A->B": keys}, extra)


def positions(store: PositionStore, topic: str) -> dict[int, int]:
    return {p: at for (t, p), at in store.load().items() if t == topic}


# the gate reschedules a resident copier's task; without resident copiers (a multi-host cluster's
# default), at-least-once and exactly-once, in make test-soak
@pytest.mark.parametrize("delivery", [pytest.param("at-least-once", marks=pytest.mark.soak),
                                      pytest.param("exactly-once", marks=pytest.mark.soak), "resident"])
def test_copy_task_rescheduled_to_the_other_executor(cluster_a, cluster_b, unique_name, tmp_path, delivery):
    a, b, topic = cluster_a.bootstrap, cluster_b.bootstrap, unique_name
    exactly_once = delivery == "exactly-once"
    create_topic(a, topic, PARTITIONS)
    preload(a, topic, EXACTLY_ONCE_BACKLOG if exactly_once else BACKLOG)
    events = tmp_path / "events"
    config = tmp_path / "mm2.properties"
    config.write_text(flow_config(a, b, topic, exactly_once, events, resident=delivery == "resident"))
    log = tmp_path / "replicator.log"
    spark = start_standalone(tmp_path / "spark", port=SPARK_PORT, timeout=240)  # a loaded machine starts slowly
    assert spark.port == SPARK_PORT and spark.webui_port == SPARK_PORT + 3
    writer: Writers | Stream = (Writers(a, topic, f"{unique_name}-txn", PARTITIONS) if exactly_once
                                else Stream(a, topic, PARTITIONS, 2000)).start()
    rep = Replicator(config, log, "--spark-master", spark.master_url).start()
    store = PositionStore(load_text(config.read_text()).clusters["B"], "A")
    try:
        if not exactly_once:  # at-least-once tails too: intervals and tails recur, aim at one a few commits in
            wait_for(lambda: f"A.{topic}" in list_topics(b) and len(mirror_events(log)) >= 3, 360,
                     "the flow commits micro-batches", rep)
            wait_for(lambda: copy_intervals(log) > 0, 120, "a continuous copy interval", rep)
        if delivery == "resident":  # a copier of an executor's Python worker listens in the flow's folder
            held = handover.folder(handover.flow_key("A->B", a, b))
            wait_for(lambda: any(held.glob("*.sock")), 120, "a resident copier on an executor", rep)
        # exactly-once has no tails: its copy interval is the backlog's first micro-batch, aimed at there
        killed_at = len(log.read_text(errors="replace"))
        at_kill = positions(store, topic)
        worker, tids = kill_a_copy_worker(spark, events, rep, hold=1.0)
        lost = executors_of(spark.logdir / f"worker-{worker}")
        time.sleep(15)  # the backlog grows on, one executor left
        writer.stop()
        assert not writer.failed, writer.failed[:3]
        ends = end_offsets(a, topic)
        if isinstance(writer, Writers):
            assert_exactly_once(a, b, topic, writer, rep, "a copy task rescheduled to the other executor")
        wait_for(lambda: positions(store, topic) == {p: end - 1 for p, end in ends.items()}, 240,
                 "positions on B at A's ends", rep)
        assert rep.alive(), rep.tail()
    finally:
        writer.stop()
        rc = rep.stop()
        spark.stop()
    assert rc == 0, rep.tail()
    positions_now = positions(store, topic)
    after = mirror_events(log, killed_at)  # the micro-batch a stop commits too

    want = consume_all(a, topic, isolation="read_committed")
    got = consume_all(b, f"A.{topic}", isolation="read_committed")
    records = sum(map(len, want.values()))
    copied = sum(map(len, got.values()))
    restarts = sum(recopied_stretches([r.value for r in got.get(p, [])], [r.value for r in want[p]])
                   for p in range(PARTITIONS))
    if exactly_once:
        assert copied == records and restarts == 0
    assert copy_intervals(log) > 0, "the flow ran no continuous copy interval"
    moved = [e for e in after if e.get("records", 0) > 0]
    # resident copiers copy between micro-batches, so the backlog's rest may come in one (positions at
    # A's ends, checked above, say the flow went on)
    least = 1 if delivery == "resident" else 2
    assert len(moved) >= least, f"the flow committed {len(moved)} micro-batches with records after the kill"
    assert all(at > at_kill.get(p, -1) for p, at in positions_now.items()), f"positions at the kill {at_kill}"

    stages = query_stages(events, QUERY)
    pairs = rescheduled(task_ends(events, stages), lost)
    assert pairs, f"no copy task lost with worker {worker} (executors {lost}) succeeded on another executor"
    print(f"\n{delivery}: {records} records on A, {copied} on B, {copied - records} duplicates in {restarts} "
          f"re-copied stretches; killed worker-{worker} (executors {sorted(lost)}) running copy tasks {sorted(tids)}; "
          f"{len(moved)} micro-batches with records committed after the kill; positions then {at_kill}, "
          f"now {positions_now}")
    for dead, retry in pairs:
        print(f"  stage {dead.stage} task {dead.index}: attempt {dead.attempt} on executor {dead.executor} "
              f"{dead.reason}, attempt {retry.attempt} on executor {retry.executor} {retry.reason}")
