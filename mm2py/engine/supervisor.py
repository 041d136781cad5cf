"""What happens to a flow when one of its streaming queries fails: restart it later, or stop the flow.

One table decides (``classify``). An outage (a broker restarting, a cluster down, a leader
moving, a request timing out) stalls the flow: its query is started again after a backoff
that doubles up to ``max_backoff`` seconds, for as long as it takes, and the flow resumes
from the positions recorded on the target. What waiting cannot fix (a missing ACL, refused
credentials, a batch larger than the target accepts, records lost from the source, bad
configuration, a Python transform raising on a record) stops that flow only; the other flows
go on. Spark missing a connection to its own Python processes (a loaded machine) is an outage
too, even before the flow first ran.

Invariants:
- a restarted query plans from the positions on the target, so a restart neither skips nor
  loses a record (at-least-once, as any task retry);
- a cluster that never answered since the process started is a configuration problem, not
  an outage: the flow stops at once, naming it, rather than waiting for ever;
- each flow logs once per change of state (running -> stalled -> running, or -> failed), not
  once per attempt;
- the process ends with an error only once no mirroring flow is left running or stalled.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from mm2py.errors import (
    AuthenticationError,
    AuthorizationError,
    ClusterUnreachableError,
    ConfigError,
    DataLossError,
    EngineTimeoutError,
    FormatError,
    KafkaError,
    Mm2pyError,
    RecordTooLargeError,
    TransformFailedError,
)

log = structlog.get_logger(__name__)

# errors that waiting cannot fix: the flow stops, naming them
FATAL: tuple[type[Mm2pyError], ...] = (
    AuthorizationError, AuthenticationError, RecordTooLargeError, DataLossError, ConfigError, FormatError,
    TransformFailedError,
)


class State(enum.Enum):
    RUNNING = "running"
    STALLED = "stalled"
    FAILED = "failed"


class Verdict(enum.Enum):
    RETRY = "retry"
    FATAL = "fatal"


def classify(error: Mm2pyError, *, ever_ran: bool) -> Verdict:
    """Whether a failed query of a flow is started again (an outage) or ends the flow."""
    if isinstance(error, FATAL):
        return Verdict.FATAL
    if isinstance(error, EngineTimeoutError):
        return Verdict.RETRY  # Spark's own processes, too loaded to connect in time: not the flow's setup
    if not ever_ran:
        # nothing ever worked: a wrong bootstrap, port or listener rather than an outage
        return Verdict.FATAL if isinstance(error, ClusterUnreachableError) or not isinstance(error, KafkaError) \
            else Verdict.RETRY
    return Verdict.RETRY


@dataclass
class Health:
    """One flow's state as the operator sees it (status, metrics, logs)."""

    flow: str
    state: State = State.RUNNING
    since: float = 0.0  # wall-clock seconds when the state began
    reason: str = ""  # the last error while stalled or failed
    attempts: int = 0  # restarts since the flow last made progress
    retry_at: float = 0.0  # monotonic time of the next restart while stalled
    mirrors: bool = True  # False for a flow that only writes heartbeats (the reverse of an enabled one)


class Supervisor:
    """Keeps the health of every flow and decides about each failure."""

    def __init__(self, *, initial_backoff: float = 1.0, max_backoff: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.clock = clock
        self.wall = wall
        self.health: dict[str, Health] = {}

    def add(self, flow: str, *, mirrors: bool = True) -> None:
        self.health[flow] = Health(flow, since=self.wall(), mirrors=mirrors)

    def failed(self, flow: str, error: Mm2pyError, *, ever_ran: bool) -> Health:
        """A query of ``flow`` failed with ``error``: stall it (retry later) or fail it."""
        h = self.health[flow]
        if classify(error, ever_ran=ever_ran) is Verdict.FATAL:
            h.state, h.since, h.reason = State.FAILED, self.wall(), str(error)
            log.error("flow stopped: this error needs the operator; other flows go on", flow=flow, error=str(error))
            return h
        backoff = min(self.initial_backoff * 2 ** h.attempts, self.max_backoff)
        h.attempts += 1
        h.retry_at = self.clock() + backoff
        if h.state is not State.STALLED:
            log.warning("flow stalled; restarting it until the cluster answers again", flow=flow,
                        error=str(error), retry_in_s=backoff)
            h.since = self.wall()
        h.state, h.reason = State.STALLED, str(error)
        return h


    def progressed(self, flow: str) -> None:
        """The flow made progress (a micro-batch committed): it runs again."""
        h = self.health[flow]
        if h.state is State.STALLED:
            log.info("flow resumed", flow=flow, stalled_s=round(self.wall() - h.since, 1))
            h.state, h.since, h.reason = State.RUNNING, self.wall(), ""
        h.attempts = 0

    def alive(self) -> bool:
        """True while some mirroring flow is running or stalled (heartbeats alone keep no process up)."""
        return any(h.state is not State.FAILED for h in self.health.values() if h.mirrors)
