"""Resident copiers (mm2py.source.copy.resident) on real clusters: a stream copied with no gap
between micro-batches, handed over from task to task, across a clean stop, a kill and Python
workers SIGKILLed.

A producer streams into A throughout; ``connect-mirror-maker`` (a real child process) mirrors it
to B with short tails, so a run sees a handover every few seconds. Every record must land, once
per partition in order while nothing fails (each handover starts where the last copier's
acknowledged writes ended), and in order with nothing lost after a crash.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from mm2py.config.model import ClusterConfig
from mm2py.formats import OffsetSync
from mm2py.source.copy import handover
from mm2py.stores.positions import PositionStore
from tests.integration.mirror_helpers import (
    Replicator,
    batch_lines,
    kill_python_workers,
    properties,
    python_workers,
    stop_at_the_ends,
    wait_for,
)
from tests.kafkautil import Stream, compare, consume_all, create_topic, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

RATE = 1000  # records/s over both partitions


def resident_config(bootstrap_a: str, bootstrap_b: str, topic: str) -> str:
    return properties({"A": bootstrap_a, "B": bootstrap_b},
                      {"A->B": {"topics": topic, "copy.tail.ms": "2000", "copy.resident.enabled": "true",
                                "copy.resident.grace.ms": "5000", "emit.checkpoints.enabled": "false"}})


def test_resident_copiers_hand_over_without_a_gap_or_a_duplicate(cluster_a, cluster_b, unique_name, tmp_path):
    topic, remote = f"{unique_name}-events", f"A.{unique_name}-events"
    create_topic(cluster_a.bootstrap, topic, 2)
    config = tmp_path / "mm2.properties"
    config.write_text(resident_config(cluster_a.bootstrap, cluster_b.bootstrap, topic))
    log = tmp_path / "replicator.log"
    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    replicator = Replicator(config, log).start()
    store = PositionStore(ClusterConfig("B", cluster_b.bootstrap), "A")
    try:
        wait_for(lambda: sum(1 for b in batch_lines(log) if b["records"]) >= 8, 240,
                 "eight micro-batches that copied (seven handovers)", replicator)
        steady = compare(cluster_b.bootstrap, remote, stream.snapshot())
        copying = sum(1 for b in batch_lines(log) if b["records"])
        syncs, runs = syncs_of(cluster_a.bootstrap, "mm2-offset-syncs.B.internal", topic), syncs_of(
            cluster_a.bootstrap, "mm2-offset-syncs-history.B.internal", topic)
        assert replicator.stop(driver_only=True) == 0, replicator.tail()
        after_stop = compare(cluster_b.bootstrap, remote, stream.snapshot())
        replicator = Replicator(config, log).start()
        beyond = sum(map(len, stream.snapshot().values())) + 2 * RATE
        wait_for(lambda: sum(end_offsets(cluster_b.bootstrap, remote).values()) >= beyond, 180,
                 "the restarted replicator copying the stream", replicator)
        restarted = compare(cluster_b.bootstrap, remote, stream.snapshot())
        # Python workers SIGKILLed while a resident copier runs: their tasks fail and run again
        for _ in range(2):
            time.sleep(3)
            kill_python_workers(replicator)
        replicator.kill()  # and the whole replicator: the copiers' lease ends them with the workers
        replicator = Replicator(config, log).start()
        sent = stop_at_the_ends(stream, cluster_a.bootstrap, topic, store, replicator, 180)
    finally:
        stream.stop()
        if replicator.alive():
            replicator.kill()
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    print(f"resident: steady {steady}; "
          f"after a clean stop {after_stop}; after the restart {restarted}; at the end {final}, {sent} sent")
    assert steady.missing == 0 and steady.duplicates == 0 and not steady.out_of_order
    # each handover's syncs go on from the last: none below one written before it (read later, it would
    # supersede the newer ones), and a steady run adds no run start to the history
    back = [(p, a, b) for p, pairs in syncs.items() for a, b in zip(pairs, pairs[1:], strict=False) if b[0] < a[0]]
    assert not back, f"syncs below one written before them (partition, before, after): {back[:5]}"
    # (one at the first micro-batch that tails, one before it when the first copied a backlog; each
    # task that started fresh at every handover would add one per micro-batch)
    assert set(runs) == {0, 1} and 2 * max(map(len, runs.values())) < copying, (
        f"history run starts {runs} over {copying} micro-batches that copied")
    assert after_stop.duplicates == 0 and restarted.duplicates == 0, "a clean stop copies nothing twice"
    assert final.missing == 0 and not final.out_of_order and final.on_target >= sent



def copied(log) -> int:
    """Micro-batches that copied records, in the replicator's log."""
    return sum(1 for b in batch_lines(log) if b["records"])


def syncs_of(bootstrap: str, syncs_topic: str, topic: str) -> dict[int, list[tuple[int, int]]]:
    """``topic``'s offset syncs in ``syncs_topic`` (MM2's topic or mm2py's history), per partition in log order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for record in consume_all(bootstrap, syncs_topic).get(0, []):
        sync = OffsetSync.from_record(record.key or b"", record.value or b"")
        if sync.topic == topic:
            out.setdefault(sync.partition, []).append((sync.upstream_offset, sync.downstream_offset))
    return out


def test_python_workers_sigkilled_during_a_handover_lose_nothing_and_keep_order(cluster_a, cluster_b, unique_name,
                                                                                  tmp_path):
    """Twice: every Python worker holding a resident copier (a socket in the flow's handover folder) is
    frozen with SIGSTOP after a micro-batch, so the next task's release waits on it mid-handover; then
    every Python worker, holders and releasers, is SIGKILLed. The failed tasks run again, their
    releases find the dead sockets, and the copy goes on from the recorded positions."""
    topic, remote = f"{unique_name}-events", f"A.{unique_name}-events"
    create_topic(cluster_a.bootstrap, topic, 2)
    config = tmp_path / "mm2.properties"
    config.write_text(resident_config(cluster_a.bootstrap, cluster_b.bootstrap, topic))
    log = tmp_path / "replicator.log"
    sockets = handover.folder(handover.flow_key("A->B", cluster_a.bootstrap, cluster_b.bootstrap))
    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    replicator = Replicator(config, log).start()
    store = PositionStore(ClusterConfig("B", cluster_b.bootstrap), "A")
    frozen: list[int] = []
    try:
        for _ in range(2):
            want = copied(log) + 4
            wait_for(lambda w=want: copied(log) >= w, 240, "micro-batches that copied, handing over", replicator)
            workers = {w.pid for w in (python_workers(replicator.proc.pid) if replicator.proc else [])}
            holders = [int(p.stem) for p in sockets.glob("*.sock") if int(p.stem) in workers]
            assert holders, f"no worker of this run holds a resident copier ({sorted(sockets.iterdir())})"
            for pid in holders:
                os.kill(pid, signal.SIGSTOP)
            batches = len(batch_lines(log))
            time.sleep(4)  # two tails' worth: the next micro-batch's task waits in its release
            frozen.append(len(batch_lines(log)) - batches)
            kill_python_workers(replicator)  # holders and releasers
        sent = stop_at_the_ends(stream, cluster_a.bootstrap, topic, store, replicator, 240)
    finally:
        stream.stop()
        if replicator.alive():
            replicator.kill()
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    print(f"resident, SIGKILL during a handover: micro-batches committed while the holders were frozen "
          f"{frozen}; at the end {final}, {sent} sent")
    assert frozen == [0, 0], "a micro-batch committed while its release waited on a frozen copier"
    assert final.missing == 0 and not final.out_of_order and final.on_target >= sent
