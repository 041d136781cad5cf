"""Live lag on real clusters (mm2py.ops.live_positions): while a copy task tails or copies an
interval, its positions stay where its last progress record put them, yet ``mm2py status --json``
and ``mm2py_lag_records`` show where the copy is now; with the replicator killed, they show the truth.

A stream of ``RATE`` records/s into A; ``connect-mirror-maker`` (a real child process) mirrors it to
B with continuous copy on, 40 s tails and intervals, and ``copy.tail.commit.ms`` longer than both,
so a task's positions move only at its first progress record and when its micro-batch commits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mm2py.config.model import ClusterConfig
from mm2py.stores.positions import PositionStore
from tests.integration.metrics_helpers import free_port, scrape, total
from tests.integration.mirror_helpers import REPO, Replicator, properties, wait_for
from tests.kafkautil import Stream, create_topic, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py

RATE = 100  # records/s over both partitions: under BUSY_RECORDS unrecorded per task in an interval
BOUND = 3 * RATE  # live lag: what arrives in the time status takes to read, plus a boundary's gap


def status_lag(config, topic: str) -> int:
    """``topic``'s lag in records, as ``mm2py status --json`` prints it."""
    out = subprocess.run([sys.executable, "-m", "mm2py", "status", str(config), "--json"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    [flow] = json.loads(out.stdout)
    return sum(t["lag_records"] for t in flow["topics"] if t["topic"] == topic)


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_status_and_lag_metrics_show_a_running_copy_where_it_is_now(cluster_a, cluster_b, unique_name, tmp_path):
    topic, remote = f"{unique_name}-live", f"A.{unique_name}-live"
    create_topic(cluster_a.bootstrap, topic, 2)
    port = free_port()
    config = tmp_path / "mm2.properties"
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                                 {"A->B": {"topics": topic, "copy.continuous.enabled": "true",
                                           "copy.tail.ms": "40000", "batch.duration.ms": "40000",
                                           "copy.tail.commit.ms": "120000", "emit.checkpoints.enabled": "false"}},
                                 f"metrics.port = {port}\n"))
    store = PositionStore(ClusterConfig("B", cluster_b.bootstrap), "A")

    def recorded_lag() -> int:
        """The lag the positions alone give (what status showed before live positions)."""
        positions, ends = store.load(), end_offsets(cluster_a.bootstrap, topic)
        return sum(end - positions.get((topic, p), -1) - 1 for p, end in ends.items())

    stream = Stream(cluster_a.bootstrap, topic, 2, RATE).start()
    replicator = Replicator(config, tmp_path / "replicator.log").start()
    samples: list[tuple[int, int, int]] = []  # (recorded lag, status lag, metrics lag)
    try:
        def caught_up() -> bool:
            landed = sum(end_offsets(cluster_b.bootstrap, remote).values()) if landed_any() else 0
            lags = [m for (name, labels), m in scrape(port).items()
                    if name == "mm2py_lag_records" and ("topic", remote) in labels]
            return landed >= 5 * RATE and len(lags) == 2 and sum(lags) <= BOUND and status_lag(config, topic) <= BOUND

        def landed_any() -> bool:
            try:
                return bool(end_offsets(cluster_b.bootstrap, remote))
            except Exception:  # not created yet
                return False

        wait_for(caught_up, 180, "the flow caught up, its lag metrics served", replicator)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and sum(1 for s in samples if s[0] >= 10 * RATE) < 3:
            served = int(total(scrape(port), "mm2py_lag_records", remote))
            samples.append((recorded_lag(), status_lag(config, topic), served))
            time.sleep(2)
        assert replicator.alive(), replicator.tail()
        # the replicator dies with acknowledged records its positions do not cover; the stream goes on
        replicator.kill()
        time.sleep(3)
    finally:
        sent = stream.stop()
        if replicator.alive():
            replicator.kill()
    source, target = end_offsets(cluster_a.bootstrap, topic), end_offsets(cluster_b.bootstrap, remote)
    truth = sum(source[p] - target.get(p, 0) for p in source)
    stopped = status_lag(config, topic)
    print(f"live lag: {sent} records sent; (positions' lag, status lag, metrics lag) every 2 s: {samples}; "
          f"after the kill: status {stopped}, truth {truth}, positions' {recorded_lag()}")
    assert sum(1 for s in samples if s[0] >= 10 * RATE) >= 3, "positions unmoved for 10 s of the stream, three times"
    assert all(0 <= s[1] <= BOUND and 0 <= s[2] <= BOUND for s in samples), samples
    assert stopped == truth > 0, (stopped, truth)
