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
LONG = "long and not krb_clients"
REST = "not long and not krb_clients"
KRB_MARKER = "krb_clients"
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


# Seconds: a long module's in stop 58's CI run (a loaded run; per test from the lanes' folders'
# times, before that stop's cuts), about 4,500 s a lane there. Four lanes, not more: six (the rest
# in two, the long tests in three) loaded two cores past what Spark's Python workers bear (load
# average 22; a worker timed out connecting back to its JVM).
LANES = (
    # the rest's default: the unit tests and every integration module not marked long (~4,900 s)
    Lane("rest", REST, 0),
    # stop 2,437 s before its cuts (ten cases, five now), exactly_once 1,338 (five random kills,
    # two now), spark_job_failover 857, broker_faults 700, unclean_election 420, remote_topic_deleted
    # 360, oauth 270, rolling_restart 212, multibroker 100
    Lane("long-a", LONG, -LANE_SPACING,
         ("test_stop.py", "test_exactly_once.py", "test_spark_job_failover.py", "test_broker_faults.py",
          "test_unclean_election.py", "test_remote_topic_deleted.py", "test_oauth.py", "test_rolling_restart.py",
          "test_multibroker.py")),
    # the long default: reschedule 898 (three cases, two now), identity_cycles 761, resident 730,
    # exactly_once_intervals 665, mirror_core 648, recreated_partition_counts 490, prometheus 232,
    # tail 216, live_lag 190, and every long module no lane names
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
