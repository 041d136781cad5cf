"""Target preparation that overlaps Spark's start-up.

Starting Spark (its JVM, the Python workers, the warm-up) takes seconds, and so does creating a
flow's remote topics: at thousands of partitions each is over ten seconds. ``TargetPreparation``
creates the remote topics, the positions topic and the offset-syncs topic of every flow in a
thread while Spark starts; the flows' planners and committers then find them made.

Invariants:
- it only creates what the first plan and commit would create themselves, by the same code
  (``BatchPlanner.prepare_target``, ``OffsetSyncWriter.ensure_topic``), so nothing depends on
  it: a failure is logged and the planner or committer meets the same error where it always did
  (and reports it there);
- ``wait`` returns by ``limit`` seconds, or at once on ``stop``: a cluster that does not answer
  delays the flows' start by at most that long (the planners then create what is still missing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import structlog

from mm2py.config.model import FlowConfig
from mm2py.source.planner import planner_for
from mm2py.source.sync_writer import OffsetSyncWriter
from mm2py.topology import LoopGuard

log = structlog.get_logger(__name__)

Preparer = Callable[[FlowConfig], None]


class TargetPreparation:
    """Runs ``prepare`` for each flow, one after the other, in a daemon thread."""

    def __init__(self, flows: Sequence[FlowConfig], prepare: Preparer):
        self.flows = tuple(flows)
        self.prepare = prepare
        self._thread = threading.Thread(target=self._run, name="mm2py-prepare-targets", daemon=True)
        self.seconds: float | None = None  # how long all flows took, once done
        self.prepared: set[str] = set()  # flows whose preparation went through: both clusters answered

    def start(self) -> TargetPreparation:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        for flow in self.flows:
            try:
                self.prepare(flow)
                self.prepared.add(flow.name)
            except Exception as e:  # noqa: BLE001 - the planner or committer meets it and reports it
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


def prepare_flow_target(guard_for: Callable[[FlowConfig], LoopGuard]) -> Preparer:
    """The preparer of the real flows: their planners' ``prepare_target`` and their offset-syncs topic
    (clients built in the thread)."""
    def prepare(flow: FlowConfig) -> None:
        planner_for(flow, guard_for(flow)).prepare_target()
        if flow.emit_offset_syncs_enabled:
            OffsetSyncWriter(flow).ensure_topic()
    return prepare
