"""mm2py rides through rolling restarts, crashed leaders and a frozen broker of three-broker clusters.

The scenario is bench/rolling_restart.py's (the same one the bench runs against Apache MirrorMaker
2): A and B have three brokers each, the source topic 6 partitions, RF 3, min.insync.replicas 2,
and an idempotent acks=all producer streams into it throughout. One event at a time: a rolling
restart (controlled shutdown) of every source broker, then of every target broker; the leader
of partition 0 SIGKILLed and restarted on the source, then on the target; the target's leader of
the remote partition 0 frozen (SIGSTOP) for 60 s. After each event every record acknowledged so
far is on the target and the replicator (a real ``connect-mirror-maker`` child process) still runs.
At the end nothing acknowledged is missing, each partition is in source order, and the
replicator exits 0 on SIGTERM.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import rolling_restart as rolling
from tests.conftest import PORT_OFFSET
from tests.integration.target_checks import mirrored_in_order
from tests.kafkautil import TIMEOUT_SCALE

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lanes.py


@pytest.fixture(scope="module")
def roll_clusters(cluster_workdir: Path) -> Iterator[rolling.Clusters]:
    try:
        yield rolling.start_clusters(cluster_workdir, PORT_OFFSET)
    finally:
        rolling.stop_clusters(cluster_workdir)


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_rolling_restarts_crashed_leaders_and_a_frozen_broker_lose_nothing(roll_clusters, unique_name, tmp_path):
    # the lanes' timeout scale: on a loaded run the replicator's start alone took 146 s of the 120 s
    # the scenario allows without progress
    outcome = rolling.run_scenario("mm2py", roll_clusters, tmp_path, unique_name, PORT_OFFSET, strict=True,
                                   timeout_scale=TIMEOUT_SCALE)
    print(outcome.report())
    assert outcome.remote_replication_factor == 3
    assert outcome.remote_min_insync_replicas == rolling.MIN_ISR, "min.insync.replicas not copied to the target"
    assert all(phase.alive and phase.caught_up for phase in outcome.phases), outcome.report()
    assert outcome.alive_throughout
    # asserts per-partition source order on the target itself
    missing, duplicates = mirrored_in_order(roll_clusters.target.bootstrap, outcome.remote, outcome.acked)
    assert outcome.records > 0 and missing == 0 == outcome.missing, outcome.report()
    assert not outcome.out_of_order
    print(f"rolling restarts: {outcome.records} records, {duplicates} duplicates, exit {outcome.exit_code}, "
          f"{outcome.seconds:.0f} s")
    assert outcome.exit_code == 0, outcome.stop_error
