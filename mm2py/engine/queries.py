"""A flow's streaming queries as the engine keeps them: each ``Connector`` (a query and how to start
it again) and the ``RunningFlow`` holding a flow's connectors and its sink.

Invariant: a flow's first connector is its source query when it mirrors (``sink`` set); a
heartbeat-only flow has no sink.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql.streaming import StreamingQuery

from mm2py.config.model import FlowConfig
from mm2py.source.plan.commit import FlowCommitter


class FlowSink(Protocol):
    """A source query's sink as the engine sees it (``mm2py.connectors.sink.FlowSink``)."""

    committer: FlowCommitter

    def close(self) -> None: ...


@dataclass
class Connector:
    """One streaming query of a flow (source, checkpoint or heartbeat) and how to start it again."""

    flow: FlowConfig
    kind: str
    start: Callable[[], StreamingQuery]
    query: StreamingQuery
    progress_at: str | None = None  # timestamp of the query's last progress report seen
    phases: dict[str, int] = field(default_factory=dict)  # that report's durationMs: Spark's phases, ms
    restart_at: float | None = None  # monotonic time to start the failed query again
    stopped: bool = False  # ended by itself, or its flow failed for good: not restarted

    def made_progress(self) -> bool:
        """True when the query reported progress since the last call (a trigger ran through).

        Reads only the last report's timestamp from the JVM: the whole report (``lastProgress``)
        carries the source's offsets, thousands of partitions of JSON built and parsed per call.
        """
        try:
            last = self.query._jsq.lastProgress()  # PySpark's handle on the JVM query
            stamp = last.timestamp() if last is not None else None
            if stamp is None or stamp == self.progress_at:
                return False
            durations = last.durationMs().toString()  # the Java map's own text: one call, not one per entry
        except Exception:  # a query whose JVM side is gone reports nothing
            return False
        self.progress_at = stamp
        self.phases = parse_durations(durations)
        return True


def parse_durations(text: str) -> dict[str, int]:
    """A progress report's ``durationMs`` from the Java map's text ``{addBatch=5, walCommit=12}``.

    Entries that are not ``name=integer`` are left out: the figures are for watching, not for
    control, so an unexpected text costs a series, never the run.
    """
    out: dict[str, int] = {}
    for entry in text.strip().strip("{}").split(","):
        name, _, value = entry.strip().partition("=")
        if name and value.strip().isdigit():
            out[name] = int(value)
    return out


@dataclass
class RunningFlow:
    flow: FlowConfig
    sink: FlowSink | None  # None: a flow that only runs heartbeats
    connectors: list[Connector] = field(default_factory=list)
    # a query made progress, or the start-up reached both clusters: a failure after that is an
    # outage (retried), not a wrong address (mm2py.engine.supervisor.classify)
    ever_ran: bool = False

    @property
    def query(self) -> StreamingQuery:
        """The source connector's query."""
        return self.connectors[0].query


def exception_text(query: StreamingQuery) -> str | None:
    try:
        exc = query.exception()
    except Exception as e:  # the JVM side of a query may be gone
        return first_line(e)
    return str(exc) if exc is not None else None


def first_line(exc: BaseException) -> str:
    """``str(exc)``'s first line; a py4j error asks the JVM for its text, and the JVM may be gone."""
    try:
        return (str(exc).splitlines() or [""])[0]
    except Exception:  # ConnectionRefusedError and kin, from py4j
        return type(exc).__name__
