"""Stopping in order on real clusters: a signal mid-tail commits what was copied; a crash loop progresses.

``connect-mirror-maker`` runs as a child process in its own session, as a terminal or a service
manager starts it, while a producer streams into A. Each signal arrives while a copy task tails
(``copy.tail.ms`` 10 s, the default, and 60 s): to the whole process group (Ctrl-C, ``kill --
-PGID``), or to every process of the tree at once (systemd's ``KillMode=control-group``). Then
mm2py or Apache MirrorMaker 2 starts again on the same file, and B must hold every record of A
once, in order. A crash loop SIGKILLs the group 12-18 s after each start, or a few seconds into
its copy where the start takes longer than that: positions must advance between kills, and a
kill may cost only the seconds since the tail last recorded its progress.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.rolling_restart import Mm2
from mm2py.config.model import ClusterConfig
from mm2py.stores.positions import PositionStore
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.integration.target_checks import MM2_WORKER
from tests.kafkautil import Stream, compare, consume_all, create_topic, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

RATE = 1000  # records/s over both partitions
BACKLOG_SECONDS = 5  # streamed before the replicator starts


def tree(pid: int) -> list[int]:
    """``pid`` and every process descending from it (what a systemd unit's cgroup would hold)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def signal_as(replicator: Replicator, how: str, signum: int) -> None:
    """Send ``signum`` to the process group, or to every process of the tree ("unit")."""
    assert replicator.proc is not None
    if how == "group":
        os.killpg(replicator.proc.pid, signum)
        return
    for pid in tree(replicator.proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def wait_exit(replicator: Replicator, timeout: float = 60) -> tuple[int, float]:
    """The exit code and the seconds it took."""
    assert replicator.proc is not None
    started = time.monotonic()
    try:
        code = replicator.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        replicator.kill()
        raise AssertionError(f"no exit {timeout} s after the signal:\n{replicator.tail()}") from None
    return code, time.monotonic() - started


def landed(bootstrap: str, remote: str) -> int:
    try:
        return sum(end_offsets(bootstrap, remote).values())
    except Exception:  # not created yet
        return 0


def mirrored_flow(cluster_a, cluster_b, unique_name: str, tmp_path: Path, tail_ms: int,
                  extra: dict[str, str] | None = None) -> tuple[str, str, Path]:
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, 2)
    config = tmp_path / "mm2.properties"
    keys = {"topics": topic, "copy.tail.ms": str(tail_ms), "emit.checkpoints.enabled": "false", **(extra or {})}
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys},
                                 MM2_WORKER))
    return topic, f"A.{topic}", config


def signal_mid_tail(cluster_b, remote: str, stream: Stream, replicator: Replicator, how: str,
                    signum: int) -> float:
    """Wait until the backlog landed and a tail is running, then signal; the seconds to a clean exit."""
    backlog = sum(map(len, stream.snapshot().values()))
    wait_for(lambda: landed(cluster_b.bootstrap, remote) >= backlog, 180, "the backlog on B", replicator)
    time.sleep(3)  # the first micro-batch tails from here on (10 s or 60 s)
    signal_as(replicator, how, signum)
    code, seconds = wait_exit(replicator)
    assert code == 0, replicator.tail()
    assert '"flows stopped' in replicator.log_path.read_text(errors="replace")
    return seconds


def finish(replicator: Replicator, stream: Stream, target: str, remote: str, timeout: float = 180) -> int:
    """Stop the stream, wait until B holds as many records as were sent, stop the replicator; the count sent."""
    sent = stream.stop()
    wait_for(lambda: landed(target, remote) >= sent, timeout, "every record on B", replicator)
    assert replicator.stop(driver_only=True) == 0, replicator.tail()
    return sent


def cleanup(replicator: Replicator, stream: Stream) -> None:
    stream.stop()
    if replicator.alive():
        replicator.kill()


# the gate signals the CLI's process alone; the group (Kubernetes' way) is signalled in the gate by
# the exactly-once stop below, and here, with both tails and both signals, in make test-soak
_SOAK = pytest.mark.soak


@pytest.mark.parametrize(("tail_ms", "how", "name"), [
    pytest.param(10000, "group", "SIGTERM", marks=_SOAK),
    pytest.param(60000, "group", "SIGTERM", marks=_SOAK),
    pytest.param(10000, "group", "SIGINT", marks=_SOAK),
    pytest.param(60000, "group", "SIGINT", marks=_SOAK),
    (10000, "unit", "SIGTERM"),
])
def test_a_signal_mid_tail_commits_it_and_a_restart_copies_nothing_twice(cluster_a, cluster_b, unique_name,
                                                                         tmp_path, tail_ms, how, name):
    signum = getattr(signal, name)
    topic, remote, config = mirrored_flow(cluster_a, cluster_b, unique_name, tmp_path, tail_ms)
    log = tmp_path / "replicator.log"
    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    time.sleep(BACKLOG_SECONDS)
    replicator = Replicator(config, log).start()
    try:
        seconds = signal_mid_tail(cluster_b, remote, stream, replicator, how, signum)
        after_stop = compare(cluster_b.bootstrap, remote, stream.snapshot())
        replicator = Replicator(config, log).start()
        sent = finish(replicator, stream, cluster_b.bootstrap, remote)
    finally:
        cleanup(replicator, stream)
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    print(f"stop: {signal.Signals(signum).name} to the {how}, tail {tail_ms} ms: exit 0 after {seconds:.1f} s; "
          f"{after_stop.on_target} records on B at the stop, {final.on_target} of {sent} at the end, "
          f"{final.duplicates} copied twice")
    assert not stream.failed, stream.failed[:3]
    assert final.missing == 0 and not final.out_of_order, final
    assert final.duplicates == 0, "a signalled stop committed the running tail"
    assert seconds < 30, "the stop fits Kubernetes' default grace period"


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
@pytest.mark.parametrize("tail_ms", [10000, 60000])
def test_a_group_sigterm_mid_tail_hands_over_to_apache_mm2_without_a_duplicate(cluster_a, cluster_b, unique_name,
                                                                              tmp_path, tail_ms):
    topic, remote, config = mirrored_flow(cluster_a, cluster_b, unique_name, tmp_path, tail_ms)
    log = tmp_path / "replicator.log"
    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    time.sleep(BACKLOG_SECONDS)
    replicator: Replicator = Replicator(config, log).start()
    try:
        seconds = signal_mid_tail(cluster_b, remote, stream, replicator, "group", signal.SIGTERM)
        replicator = Mm2(config, tmp_path / "mm2.log").start()
        time.sleep(5)
        sent = stream.stop()
        wait_for(lambda: landed(cluster_b.bootstrap, remote) >= sent, 240, "Apache MM2 copying the rest",
                 replicator)
    finally:
        cleanup(replicator, stream)
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    print(f"stop then MM2, tail {tail_ms} ms: mm2py exited 0 after {seconds:.1f} s; {final.on_target} of {sent} "
          f"on B, {final.duplicates} copied twice")
    assert final.missing == 0 and not final.out_of_order and final.duplicates == 0, final


def test_exactly_once_group_sigterm_leaves_no_open_transaction(cluster_a, cluster_b, unique_name, tmp_path):
    topic, remote, config = mirrored_flow(cluster_a, cluster_b, unique_name, tmp_path, 10000)
    config.write_text(config.read_text() + "B.exactly.once.source.support = enabled\n"
                      "A.consumer.isolation.level = read_committed\n")
    log = tmp_path / "replicator.log"
    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    time.sleep(BACKLOG_SECONDS)
    replicator = Replicator(config, log).start()
    try:
        seconds = signal_mid_tail(cluster_b, remote, stream, replicator, "group", signal.SIGTERM)
        # nothing left open: the last stable offset is the log end (no wait for transaction.timeout.ms)
        committed = end_offsets_committed(cluster_b.bootstrap, remote)
        assert committed == end_offsets(cluster_b.bootstrap, remote), "a transaction was left open"
        replicator = Replicator(config, log).start()
        sent = stream.stop()
        wait_for(lambda: sum(end_offsets_committed(cluster_b.bootstrap, remote).values()) >= sent, 180,
                 "every record committed on B", replicator)
        assert replicator.stop(driver_only=True) == 0, replicator.tail()
    finally:
        cleanup(replicator, stream)
    got = {p: [r.value for r in rs] for p, rs in consume_all(cluster_b.bootstrap, remote,
                                                            isolation="read_committed").items()}
    acked = stream.snapshot()
    print(f"exactly-once stop: exit 0 after {seconds:.1f} s; {sum(map(len, got.values()))} of {sent} read committed")
    assert got == acked, "a read_committed reader sees each record once, in order"


def end_offsets_committed(bootstrap: str, topic: str) -> dict[int, int]:
    """Per partition, the offset a read_committed consumer reads up to (the last stable offset)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso-probe", "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta}
    finally:
        consumer.close()


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
@pytest.mark.parametrize("tail_ms", [10000, 60000])
def test_a_crash_loop_advances_positions_and_copies_little_twice(cluster_a, cluster_b, unique_name, tmp_path,
                                                                 tail_ms):
    rate = 4000
    topic, remote, config = mirrored_flow(cluster_a, cluster_b, unique_name, tmp_path, tail_ms)
    log = tmp_path / "replicator.log"
    store = PositionStore(ClusterConfig("B", cluster_b.bootstrap), "A")

    def positions() -> int:
        return sum(at + 1 for (t, _p), at in store.load().items() if t == topic)

    def caught_up() -> bool:  # within 3 s of data of the source's ends: tailing (positions every 2 s)
        return positions() >= sum(end_offsets(cluster_a.bootstrap, topic).values()) - 3 * rate

    stream = Stream(cluster_a.bootstrap, topic, 2, rate).start()
    replicator = Replicator(config, log).start()
    moved: list[int] = []  # records the positions moved by between two kills
    startups: list[float] = []  # seconds from a start to its first record on B
    last = 0
    kills = 0
    rng = random.Random(7)
    started = time.monotonic()
    try:
        while time.monotonic() - started < 60:
            # 12-18 s after the start; where a start takes longer than that to copy (Spark's
            # start-up), a few seconds into the copy instead, so each run copies before its kill
            began, before = time.monotonic(), landed(cluster_b.bootstrap, remote)
            wait_for(lambda b=before: landed(cluster_b.bootstrap, remote) > b, 120, "the run copying", replicator)
            startups.append(round(time.monotonic() - began, 1))
            time.sleep(max(began + rng.uniform(12, 18) - time.monotonic(), rng.uniform(2, 5)))
            # the kill is to come mid-tail: on a loaded machine the backlog a run's start left can
            # take longer than that to copy, and a kill mid-backlog re-copies a whole backlog batch;
            # then the kill comes a few seconds after the run's positions caught up
            if not caught_up():
                wait_for(caught_up, 240, "the run's positions caught up with the source", replicator)
                time.sleep(rng.uniform(2, 5))
            replicator.kill()
            kills += 1
            now = positions()
            moved.append(now - last)
            last = now
            replicator = Replicator(config, tmp_path / f"replicator-{kills}.log").start()  # one log a run
        sent = stream.stop()
        ends = sum(end_offsets(cluster_a.bootstrap, topic).values())
        # B's count includes what kills made it copy twice: wait for the positions instead
        wait_for(lambda: positions() >= ends, 240, "positions at the source's ends", replicator)
        assert replicator.stop(driver_only=True) == 0, replicator.tail()
    finally:
        cleanup(replicator, stream)
    final = compare(cluster_b.bootstrap, remote, stream.snapshot())
    per_kill = final.duplicates / max(kills, 1)
    print(f"crash loop, tail {tail_ms} ms: {kills} SIGKILLs to the group over {sent} records at {rate}/s; "
          f"seconds from start to first record on B {startups}; positions moved by {moved} records between kills; "
          f"{final.duplicates} copied twice ({per_kill:.0f} a kill, {per_kill / rate:.1f} s of data)")
    assert final.missing == 0 and not final.out_of_order, final
    assert all(m > 0 for m in moved), f"positions advanced between kills: {moved}"
    assert per_kill <= 4 * rate, "a kill costs a few seconds of data copied again, not the whole tail"
