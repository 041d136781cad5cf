"""Target preparation that overlaps Spark's start-up.

Starting Spark (its JVM, the Python workers, the warm-up) takes seconds, and so does creating a
flow's remote topics: at thousands of partitions each is over ten seconds. ``TargetPreparation``
creates, in a thread while Spark starts, the internal topics the process's own connectors write
(``heartbeats`` on every cluster it beats into, each flow's checkpoints and offset-syncs topics)
and then each flow's positions topic and remote topics; the connectors, planners and committers
then find them made.

A source lists its topics at its first plan and then only every ``refresh.topics.interval.seconds``
(600 s by default). mm2py starts every connector itself, so it makes its internal topics before any
source lists topics: ``heartbeats`` on A (written by B->A's heartbeat connector) is then mirrored
by A->B from the first micro-batch, and hops and upstream clusters are known on B at once.

Invariants:
- it only creates what the connectors, first plan and commit would create themselves, by the same
  code (``HeartbeatEmitter.ensure_topic``, ``ensure_checkpoints_topic``,
  ``BatchPlanner.prepare_target``, ``OffsetSyncWriter.ensure_topic``), so nothing depends on it:
  a failure is logged and the connector, planner or committer meets the same error where it
  always did (and reports it there);
- the heartbeats topics come first: a flow's preparation lists its source's topics (its remote
  topics), and every flow's plans come after the whole preparation (``wait``);
- ``wait`` returns by ``limit`` seconds, or at once on ``stop``: a cluster that does not answer
  delays the flows' start by at most that long (the planners then create what is still missing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import structlog

from mm2py.checkpoint.task import ensure_checkpoints_topic
from mm2py.config.model import FlowConfig
from mm2py.flowspec import FlowSpec
from mm2py.heartbeat.emitter import HeartbeatEmitter
from mm2py.source.plan.wiring import planner_for
from mm2py.source.sync_writer import OffsetSyncWriter

log = structlog.get_logger(__name__)

Preparer = Callable[[FlowConfig], None]


class TargetPreparation:
    """Runs ``prepare_heartbeats`` for each of ``heartbeats``, then ``prepare`` for each of ``flows``,
    one after the other, in a daemon thread (``start``). The constructor does no I/O.

    ``heartbeats``: the flows whose heartbeat connectors this process runs
    (``MirrorMakerConfig.heartbeat_flows``), none in a run that stops once caught up.
    """

    def __init__(self, flows: Sequence[FlowConfig], prepare: Preparer, heartbeats: Sequence[FlowConfig] = (),
                 prepare_heartbeats: Preparer | None = None):
        self.flows = tuple(flows)
        self.prepare = prepare
        self.heartbeats = tuple(heartbeats)
        self.prepare_heartbeats = prepare_heartbeats or prepare_heartbeats_topic
        self._thread = threading.Thread(target=self._run, name="mm2py-prepare-targets", daemon=True)
        self.seconds: float | None = None  # how long all flows took, once done
        self.prepared: set[str] = set()  # flows whose preparation went through: both clusters answered

    def start(self) -> TargetPreparation:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        for flow in self.heartbeats:
            try:
                self.prepare_heartbeats(flow)
            except Exception as e:  # the heartbeat connector meets it and reports it
                log.info("heartbeats topic not prepared before the flows started; the heartbeat connector "
                         "creates it", flow=flow.name, cluster=flow.target.alias, error=str(e))
        for flow in self.flows:
            try:
                self.prepare(flow)
                self.prepared.add(flow.name)
            except Exception as e:  # the planner or committer meets it and reports it
                log.info("targets not prepared before the flow started; its planner and committer create "
                         "what is missing", flow=flow.name, error=str(e))
        self.seconds = time.monotonic() - started
        log.debug("targets prepared", flows=[f.name for f in self.flows], seconds=round(self.seconds, 1))

    def wait(self, stop: threading.Event, limit: float) -> bool:
        """Wait until done, ``stop`` is set or ``limit`` seconds passed; returns whether it is done."""
        deadline = time.monotonic() + limit
        while self._thread.is_alive() and not stop.is_set() and time.monotonic() < deadline:
            self._thread.join(0.2)
        return not self._thread.is_alive()


def prepare_flow_target(spec_for: Callable[[FlowConfig], FlowSpec], *, checkpoints: bool = True) -> Preparer:
    """The preparer of the real flows: their planners' ``prepare_target``, their offset-syncs topic
    and, with ``checkpoints`` (a run that does not stop once caught up), the checkpoints topic of
    each flow whose checkpoint connector runs (clients built in the thread)."""
    def prepare(flow: FlowConfig) -> None:
        planner_for(spec_for(flow)).prepare_target()
        if flow.checkpoints.emit_offset_syncs_enabled:
            OffsetSyncWriter(flow).ensure_topic()
            if checkpoints and flow.checkpoints.emit_checkpoints_enabled:
                ensure_checkpoints_topic(flow)
    return prepare


def prepare_heartbeats_topic(flow: FlowConfig) -> None:
    """The ``heartbeats`` topic on ``flow``'s target, made as its heartbeat connector makes it,
    when that connector runs (``emit.heartbeats.enabled``)."""
    if flow.heartbeats.emit_heartbeats_enabled:
        HeartbeatEmitter(FlowSpec.alone(flow)).ensure_topic()
