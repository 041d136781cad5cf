"""Which tests each lane of ``make test`` runs (tests/lanes.py), and on which ports.

A lane is one pytest process: a marker expression, and the test modules it runs. Lanes of one
marker share its tests out by module: a lane that lists modules runs those; the one lane of a
marker that lists none (its default) runs every other module with tests of that marker, so a test
module no lane names (a new one) runs in the default lane until it is assigned to one. A module's
tests of a marker thus run in exactly one lane. The split is fixed, not computed from durations:
the modules are listed by their recorded durations (``--durations`` of the lanes' reports), so a
lane's run is the same from one run to the next.

Ports: every fixed port a test listens on (clusters, controllers, registries, KDCs, metrics,
Prometheus, JMX, the standalone Spark master), before ``MM2PY_TEST_PORT_OFFSET``, lies in
``PORT_BAND``; tests/unit/test_lanes.py reads them from the sources. Each lane adds its
``offset`` to ``MM2PY_TEST_PORT_OFFSET``; the offsets are ``LANE_SPACING`` apart, at least the
band's width, so no two lanes' clusters, registries, KDCs or metrics ports can meet. Every offset
is negative: the lanes stay below the kernel's ephemeral range (32768-60999) at offset 0.
"""

from __future__ import annotations

from dataclasses import dataclass

INTEGRATION = "tests/integration"
# make test is the gate: soak tests (repeats and multi-minute variants of scenarios the gate runs
# once) run in make test-soak, one pytest process
LONG = "long and not krb_clients and not soak"
REST = "not long and not krb_clients and not soak"
KRB_MARKER = "krb_clients and not soak"
# every fixed test port (a cluster's port up to port + 9) before the offset: bench's 29092-29393 too,
# so that make bench beside make test, on one offset, stays clear of every lane but the rest lane's
PORT_BAND = (29000, 32767)
LANE_SPACING = 3800


@dataclass(frozen=True)
class Lane:
    """One pytest process of make test: ``marker`` selects its tests, ``modules`` (file names under
    tests/integration) which of them it runs, none for the marker's default lane; its ports are
    ``offset`` from the run's; ``krb`` lanes run with .venv-krb once ``make kerberos-clients`` ended."""

    name: str
    marker: str
    offset: int
    modules: tuple[str, ...] = ()
    krb: bool = False

    @property
    def ports(self) -> tuple[int, int]:
        """The lowest and highest port its tests may listen on (at ``MM2PY_TEST_PORT_OFFSET`` 0)."""
        return PORT_BAND[0] + self.offset, PORT_BAND[1] + self.offset


# Seconds: a module's gate tests in full runs on this machine (three lanes busy; per test from the
# lanes' folders' times and --durations). The last full run from a clean clone (.ci/run, 49 min in
# all): rest 2,843 s, long-a 1,897 s then krb 660 s, long-b 2,815 s. Three lanes run at once
# (tests/lanes.py): a fourth loaded two cores to a load average of 24 and Spark's Python runners
# failed to start.
LANES = (
    # the rest's default: the unit tests and every integration module not marked long
    Lane("rest", REST, 0),
    # bad_input 700, spark_job_failover 480, stop 544 (two cases; three more soak), broker_faults 277,
    # unclean_election 136, remote_topic_deleted 123, multibroker 100, exactly_once and oauth ~60 each
    Lane("long-a", LONG, -LANE_SPACING,
         ("test_bad_input.py", "test_spark_job_failover.py", "test_stop.py", "test_broker_faults.py",
          "test_unclean_election.py", "test_remote_topic_deleted.py", "test_multibroker.py", "test_exactly_once.py",
          "test_oauth.py")),
    # the long default: resident 730, exactly_once_intervals 414, mm2_scenarios 400, failover 400, tail 350,
    # reschedule 300, devcluster 250, schemas 245, identity_cycles 206, metrics 171, recreated_partition_counts
    # 123, and every long module no lane names
    Lane("long-b", LONG, -2 * LANE_SPACING),
    Lane("krb", KRB_MARKER, -3 * LANE_SPACING, krb=True),
)


def default_lane(marker: str, lanes: tuple[Lane, ...] = LANES) -> Lane:
    """The lane that runs a module of ``marker``'s tests that no lane of the marker names."""
    (lane,) = [lane for lane in lanes if lane.marker == marker and not lane.modules]
    return lane


def lane_of(module: str, marker: str, lanes: tuple[Lane, ...] = LANES) -> Lane:
    """The lane that runs the tests of ``marker`` in ``module`` (a file name under tests/integration)."""
    named = [lane for lane in lanes if lane.marker == marker and module in lane.modules]
    return named[0] if named else default_lane(marker, lanes)


def selection(lane: Lane, lanes: tuple[Lane, ...] = LANES) -> list[str]:
    """The paths (and ``--ignore`` options) that give ``lane`` its modules: its own, or for a default
    lane the whole suite but the modules other lanes of its marker name."""
    if lane.modules:
        return [f"{INTEGRATION}/{module}" for module in lane.modules]
    others = [module for other in lanes if other.marker == lane.marker for module in other.modules]
    return ["tests", *(f"--ignore={INTEGRATION}/{module}" for module in others)]
