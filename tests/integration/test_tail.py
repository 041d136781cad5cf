"""Tailing copy tasks (mm2py.source.copy.tail) on real clusters: a stream copied as it arrives, across restarts.

A producer streams into A throughout; ``connect-mirror-maker`` (a real child process) mirrors it
to B with a trigger interval far longer than a fetch round trip, so records reach B between
plans only because the copy tasks tail. The replicator is stopped with SIGTERM to its own
process (its running micro-batch commits first) and started again, then SIGKILLed mid-tail
and started again. A backlog copied in copy intervals (``copy.continuous.enabled``) is SIGKILLed
at the handover between two intervals, and its Python workers are SIGKILLed at three handovers.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mm2py.config.model import ClusterConfig
from mm2py.stores.positions import PositionStore
from tests.integration.mirror_helpers import (
    Replicator,
    batch_lines,
    copy_intervals,
    kill_python_workers,
    next_commit,
    properties,
    records_behind,
    stop_at_the_ends,
    wait_for,
)
from tests.kafkautil import Stream, compare, create_topic, end_offsets, producer_ids

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

RATE = 400  # records/s over both partitions


def test_tailing_tasks_copy_a_stream_as_it_arrives_and_lose_nothing_across_restarts(cluster_a, cluster_b,
                                                                                    unique_name, tmp_path):
    topic, remote = f"{unique_name}-events", f"A.{unique_name}-events"
    create_topic(cluster_a.bootstrap, topic, 2)
    config = tmp_path / "mm2.properties"
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                                 {"A->B": {"topics": topic, "trigger.interval.ms": "3000", "copy.tail.ms": "6000",
                                           "emit.checkpoints.enabled": "false"}}))
    log = tmp_path / "replicator.log"
    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    replicator = Replicator(config, log).start()
    try:
        def landed() -> int:
            return sum(end_offsets(cluster_b.bootstrap, remote).values()) if remote_exists() else 0

        def remote_exists() -> bool:
            try:
                return bool(end_offsets(cluster_b.bootstrap, remote))
            except Exception:  # not created yet
                return False

        wait_for(lambda: sum(b["tailed"] for b in batch_lines(log)) >= 2 * RATE
                 and sum(1 for b in batch_lines(log) if b["records"]) >= 5, 180,
                 "two seconds of the stream copied by tailing tasks, five micro-batches that copied", replicator)
        # a worker's copy tasks share one idempotent producer id (mm2py.source.copy.producer_slot): the
        # target keeps a producer state per Spark Python worker (two slots, and one more should a
        # worker be replaced), not one per micro-batch
        writers = producer_ids(cluster_b.bootstrap, remote, 2)
        copying = sum(1 for b in batch_lines(log) if b["records"])
        assert len(set().union(*writers.values())) <= 3 < copying, (writers, copying)
        # graceful restart (SIGTERM to mm2py's process, Spark's JVM left running): the running
        # micro-batch commits before the query stops
        assert replicator.stop(driver_only=True) == 0, replicator.tail()
        replicator = Replicator(config, log).start()
        beyond = sum(map(len, stream.snapshot().values())) + RATE
        wait_for(lambda: landed() >= beyond, 180, "the restarted replicator copying the stream", replicator)
        restarted = compare(cluster_b.bootstrap, remote, stream.snapshot())
        # a crash mid-tail: what the killed task copied is copied again (at-least-once), nothing is lost
        replicator.kill()
        tailing_before = copy_intervals(log)
        replicator = Replicator(config, log).start()
        wait_for(lambda: copy_intervals(log) >= tailing_before + 2, 180,
                 "two tailing micro-batches after the crash", replicator)
        store = PositionStore(ClusterConfig("B", cluster_b.bootstrap), "A")
        sent = stop_at_the_ends(stream, cluster_a.bootstrap, topic, store, replicator, 120)
    finally:
        stream.stop()
        if replicator.alive():
            replicator.kill()
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    batches = batch_lines(log)
    copied, tailed = sum(b["records"] for b in batches), sum(b["tailed"] for b in batches)
    print(f"tail: producer ids on B {sorted(set().union(*writers.values()))} after {copying} micro-batches that copied")
    print(f"tail: {sent} records sent, {tailed} of {copied} copied by tails over {len(batches)} micro-batches; "
          f"duplicates after the SIGTERM restart {restarted.duplicates}, "
          f"at the end {final.duplicates}")
    assert final.missing == 0 and not final.out_of_order and final.on_target >= sent
    assert restarted.duplicates == 0, "a graceful stop waited for the tailing micro-batch to commit"


BACKLOG_S = 20  # the stream's seconds before a start: 40,000 records waiting


def interval_config(bootstrap_a: str, bootstrap_b: str, topic: str) -> str:
    """Copy intervals of 1 s on a backlog cut into plans of 50,000 bytes, fetched a batch at a time."""
    return properties({"A": bootstrap_a, "B": bootstrap_b},
                      {"A->B": {"topics": topic, "copy.continuous.enabled": "true", "copy.tail.ms": "0",
                                "batch.duration.ms": "1000", "max.batch.bytes": "50000",
                                "emit.checkpoints.enabled": "false"}},
                      "A.consumer.fetch.max.bytes = 1\n")


def start_on_a_backlog(bootstrap_a: str, bootstrap_b: str, topic: str,
                       tmp_path: Path) -> tuple[Path, Path, Stream, Replicator, PositionStore]:
    """``topic`` (2 partitions) on A, a stream of 2,000 records/s into it for ``BACKLOG_S``, then a
    replicator on ``interval_config``: its config, log, the stream, the replicator and B's positions."""
    create_topic(bootstrap_a, topic, 2)
    config = tmp_path / "mm2.properties"
    config.write_text(interval_config(bootstrap_a, bootstrap_b, topic))
    log = tmp_path / "replicator.log"
    stream = Stream(bootstrap_a, topic, 2, 2000).start()
    time.sleep(BACKLOG_S)
    return config, log, stream, Replicator(config, log).start(), PositionStore(ClusterConfig("B", bootstrap_b), "A")


def test_a_kill_at_the_handover_between_two_copy_intervals_loses_nothing_and_keeps_order(cluster_a, cluster_b,
                                                                                       unique_name, tmp_path):
    """Copy intervals on a backlog (copy.continuous.enabled, mm2py.source.copy.continuous): SIGKILL right
    after an interval committed, while the next is planned and launched; the restart goes on from the
    positions the target acknowledged.

    ``copy.tail.ms = 0``, so every record copied past a planned end was copied by an interval; the
    source consumer fetches one batch at a time (``fetch.max.bytes = 1``) and plans are cut at
    ``max.batch.bytes``. The stream runs ``BACKLOG_S`` before each start (a warm Spark starts in
    seconds, and a flow that keeps up has no interval to kill), so each start finds a backlog that
    lasts several intervals.
    """
    topic, remote = f"{unique_name}-backlog", f"A.{unique_name}-backlog"
    config, log, stream, replicator, store = start_on_a_backlog(cluster_a.bootstrap, cluster_b.bootstrap, topic,
                                                                tmp_path)
    try:
        wait_for(lambda: copy_intervals(log) >= 2, 180, "two copy intervals committed", replicator)
        # the handover: the next commit's line is written, and the process dies as the next plan starts
        next_commit(log, replicator)
        replicator.kill()
        time.sleep(BACKLOG_S / 2)
        at_kill = copy_intervals(log)
        behind = records_behind(cluster_a.bootstrap, topic, store)
        replicator = Replicator(config, log).start()
        wait_for(lambda: copy_intervals(log) >= at_kill + 1, 180, "a copy interval after the restart", replicator)
        sent = stop_at_the_ends(stream, cluster_a.bootstrap, topic, store, replicator, 180)
    finally:
        stream.stop()
        if replicator.alive():
            replicator.kill()
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    batches = batch_lines(log)
    print(f"handover: {sent} records sent, {len(batches)} micro-batches, {at_kill} intervals before the kill, "
          f"{copy_intervals(log)} in all, {behind} records behind at the kill, {final.duplicates} duplicates")
    assert behind > 0, "the kill fell while a backlog was copied, at an interval's handover"
    assert final.missing == 0 and not final.out_of_order and final.on_target >= sent, final


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_python_workers_killed_at_handovers_between_copy_intervals_lose_nothing_and_keep_order(
        cluster_a, cluster_b, unique_name, tmp_path):
    """Copy intervals on a backlog, as above; at three handovers (an interval's commit line written,
    the next interval planned and launched) every Spark Python worker is SIGKILLed: the one whose
    task just returned, or the one already running the next interval's task (and the heartbeat
    flow's). The failed task fails its query; the replicator rides through (its supervisor restarts
    the query), and the copy goes on from the positions the target acknowledged (at-least-once:
    duplicates allowed, no loss, order kept per partition).
    """
    topic, remote = f"{unique_name}-workers", f"A.{unique_name}-workers"
    _config, log, stream, replicator, store = start_on_a_backlog(cluster_a.bootstrap, cluster_b.bootstrap, topic,
                                                                 tmp_path)
    killed: list[tuple[int, int]] = []  # (workers killed, records behind) at each handover
    try:
        wait_for(lambda: copy_intervals(log) >= 2, 180, "two copy intervals committed", replicator)
        for _ in range(3):
            next_commit(log, replicator)
            hit = kill_python_workers(replicator)
            killed.append((hit, records_behind(cluster_a.bootstrap, topic, store)))
        # the copy goes on: two micro-batches committed after the kills (copy intervals while the restarted
        # flow is behind, plain ones once it caught up: which, depends on the machine's pace)
        at_kills = len(batch_lines(log))
        wait_for(lambda: len(batch_lines(log)) >= at_kills + 2, 180, "two micro-batches after the kills", replicator)
        sent = stop_at_the_ends(stream, cluster_a.bootstrap, topic, store, replicator, 180)
    finally:
        stream.stop()
        if replicator.alive():
            replicator.kill()
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    # a killed worker fails its task, and with it the query; the supervisor restarts the flow from its positions
    restarts = sum(1 for line in log.read_text(errors="replace").splitlines()
                   if "source A->B failed" in line and "flow stalled" in line)
    print(f"worker kills: {sent} records sent, (workers killed, records behind) at each handover {killed}, "
          f"{restarts} restarts of the flow's source query, {copy_intervals(log)} intervals, "
          f"{final.duplicates} duplicates")
    assert all(n > 0 for n, _ in killed) and any(behind > 0 for _, behind in killed), killed
    assert restarts >= 1, "a kill failed a copy task"
    assert final.missing == 0 and not final.out_of_order and final.on_target >= sent, final
