"""Watching a process's running queries: progress, restarts through outages, failure, orderly stop.

``QueryWatch`` shares the engine's list of running flows and its ``Supervisor`` (which decides
retry or give up per flow); it starts no query of its own, only starts failed ones again.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass

import structlog
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

from mm2py.engine.queries import Connector, RunningFlow, exception_text, first_line
from mm2py.engine.supervisor import State, Supervisor
from mm2py.errors import Mm2pyError, from_task_failure
from mm2py.metrics import Metrics
from mm2py.source.copy.stop_flag import StopFlag

log = structlog.get_logger(__name__)


@dataclass
class QueryWatch:
    """The running flows of one engine (``flows``, shared with it), watched until they end or stop."""

    flows: list[RunningFlow]
    supervisor: Supervisor
    metrics: Metrics | None
    stop_flag: StopFlag

    def await_caught_up(self, timeout: float) -> None:
        """With ``until_caught_up``: wait until every query finished; raise on failure or timeout."""
        for running in self.flows:
            try:
                running.query.awaitTermination(math.ceil(timeout))  # whole seconds, as PySpark types it
            except StreamingQueryException as e:
                raise from_task_failure(f"flow {running.flow.name}", str(e)) from None
            exc = running.query.exception()
            if exc is not None:
                raise from_task_failure(f"flow {running.flow.name}", str(exc)) from None
            if running.query.isActive:
                raise Mm2pyError(f"flow {running.flow.name} still running after {timeout} s")

    def wait(self, stop: threading.Event) -> None:
        """Block until ``stop`` is set or every flow's source query has ended; restart queries through outages.

        Raises the first fatal error once no mirroring flow is left running or stalled.
        """
        first_fatal: Mm2pyError | None = None
        while not stop.is_set():
            for running in self.flows:
                first_fatal = self._watch(running) or first_fatal
            if self.metrics is not None:
                self.metrics.observe_health(self.supervisor.health.values())
                self.metrics.observe_connectors(self.connector_states())
            # every mirroring flow's source query ended: by itself (availableNow) or failed for good
            finished = all(r.connectors[0].stopped for r in self.flows if r.sink is not None)
            if finished or not self.supervisor.alive():
                if first_fatal is not None:
                    raise first_fatal
                return
            stop.wait(0.5)

    def _watch(self, running: RunningFlow) -> Mm2pyError | None:
        """Check one flow's queries: note progress, restart what an outage stopped, stop what failed."""
        name = running.flow.name
        for connector in running.connectors:
            if connector.stopped:
                continue
            if connector.made_progress():
                running.ever_ran = True
                if connector.kind == "source" or running.sink is None:
                    self.supervisor.progressed(name)
                if connector.kind == "source":
                    log.debug("micro-batch phases", flow=name, **{f"{k}_ms": v for k, v in connector.phases.items()})
                    if self.metrics is not None:
                        self.metrics.observe_progress(name, connector.phases)
            if connector.query.isActive:
                continue
            if connector.restart_at is not None:
                if self.supervisor.clock() >= connector.restart_at:
                    self._restart(connector)
                continue
            exc = exception_text(connector.query)
            if exc is None:
                connector.stopped = True  # ended by itself (availableNow)
                continue
            error = from_task_failure(f"{connector.kind} {name}", exc)
            health = self.supervisor.failed(name, error, ever_ran=running.ever_ran)
            if health.state is State.FAILED:
                for other in running.connectors:
                    other.stopped = True
                    with contextlib.suppress(Exception):
                        other.query.stop()
                return error
            connector.restart_at = health.retry_at
        return None

    def connector_states(self) -> list[tuple[str, str, str]]:
        """(flow, connector kind, state) of every query: running, stalled (restart pending), failed or stopped."""
        out = []
        for running in self.flows:
            failed = self.supervisor.health[running.flow.name].state is State.FAILED
            for c in running.connectors:
                if c.stopped:
                    state = "failed" if failed else "stopped"
                else:
                    state = "stalled" if c.restart_at is not None else "running"
                out.append((running.flow.name, c.kind, state))
        return out

    def _restart(self, connector: Connector) -> None:
        connector.restart_at = None
        try:
            connector.query = connector.start()
        except Exception as e:  # py4j or Spark; tried again at the next backoff
            health = self.supervisor.failed(connector.flow.name, Mm2pyError(first_line(e)), ever_ran=True)
            connector.restart_at = health.retry_at
            return
        log.info("query restarted", flow=connector.flow.name, connector=connector.kind)

    def _drain(self, deadline: float) -> None:
        """Let each running micro-batch commit, then stop its query; past ``deadline``, stop the rest anyway.

        A stopped query cancels its running tasks, and what a cancelled task copied is not recorded:
        the next start copies it again. With the stop flag raised, tails end where they stand and
        no source plans another micro-batch (mm2py.source.copy.stop_flag), so each query is stopped once
        it is between triggers or the micro-batch it was running completed (committed, for a source).
        """
        def batch_id(query: StreamingQuery) -> int:
            progress = query.lastProgress
            return int(progress["batchId"]) if progress else -1

        waiting: dict[int, tuple[RunningFlow, Connector, int]] = {}
        for running in self.flows:
            for connector in running.connectors:
                with contextlib.suppress(Exception):  # a query whose JVM side is gone
                    if connector.query.isActive:
                        waiting[id(connector)] = (running, connector, batch_id(connector.query))
        while waiting and time.monotonic() < deadline:
            for key, (_running, connector, first) in list(waiting.items()):
                try:
                    idle = not connector.query.status["isTriggerActive"] or batch_id(connector.query) != first
                except Exception:  # the query ended meanwhile
                    idle = True
                if idle:
                    with contextlib.suppress(Exception):
                        connector.query.stop()
                    del waiting[key]
            time.sleep(0.02)
        for running, connector, _first in waiting.values():
            log.warning("stopping a query whose micro-batch did not commit within shutdown.timeout.ms; the next "
                        "start copies it again", flow=running.flow.name, connector=connector.kind)

    def stop(self, *, quiet: bool = False, timeout_s: float = 25.0) -> None:
        """Stop every query and report what was committed; ``quiet`` after a signal.

        Running micro-batches commit first, for up to ``timeout_s`` (``_drain``).
        """
        self.stop_flag.raise_()
        self._drain(time.monotonic() + timeout_s)
        unstoppable = []
        for running in self.flows:
            for connector in reversed(running.connectors):
                try:
                    connector.query.stop()
                except Exception as e:  # keep stopping the others
                    unstoppable.append(f"{connector.kind} {running.flow.name}")
                    if not quiet:
                        log.warning("stopping a query failed", flow=running.flow.name, connector=connector.kind,
                                    error=first_line(e))
            if running.sink is not None:
                with contextlib.suppress(Exception):
                    running.sink.close()
        committed = {r.flow.name: {"micro_batches": r.sink.committer.totals.batches,
                                   "records": r.sink.committer.totals.records}
                     for r in self.flows if r.sink is not None}
        log.info("flows stopped; each resumes from the positions recorded on its target", committed=committed,
                 **({"spark_ended_first": unstoppable} if unstoppable and quiet else {}))
