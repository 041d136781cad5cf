"""``foreachBatch`` sinks: the driver-side end of each query, handing Spark's rows to the core."""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, Row

from mm2py.config.model import FlowConfig
from mm2py.errors import Mm2pyError, brief_failure
from mm2py.metrics import Metrics
from mm2py.source.plan.commit import FlowCommitter
from mm2py.source.ranges import RangeResult

log = structlog.get_logger(__name__)


# What Spark's stream thread looks for, after py4j's words, to tell a query stopped mid-call
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                 "java.nio.channels.ClosedByInterruptException")


def collected(df: DataFrame) -> list[Row]:
    """``df.collect()``; a failed micro-batch is raised with a brief text (``brief_failure``).

    Spark's stream thread matches the text of a ``foreachBatch`` error that holds py4j's
    "Py4JJavaError: An error occurred while calling" against a pattern that recurses once per
    character (StreamExecution.isInterruptionException), to tell a query stopped in the middle
    of a call. With a Java stack in the text, that overflows the thread's stack: the thread
    dies printing a thousand lines, without recording the query's error. PySpark leaves as
    Py4JJavaError the job failures it has no class for, a collect cut by ``query.stop()``
    among them. The brief text keeps what ``from_task_failure`` reads, or for an interrupted
    call the short sentence Spark reads as a stop.
    """
    try:
        return df.collect()
    except Py4JJavaError as e:
        try:
            text = str(e)
        except Exception:  # py4j asks the JVM for the text; the JVM may be gone
            text = type(e).__name__
        interrupted = next((name for name in INTERRUPTIONS if name in text), None)
        if interrupted is not None:
            raise Mm2pyError(f"py4j.protocol.Py4JJavaError: An error occurred while calling collect: "
                             f"{interrupted}") from None
        raise Mm2pyError(brief_failure(text)) from None


class FlowSink:
    """The source query's sink: the micro-batch's result rows go to the flow's committer."""

    def __init__(self, committer: FlowCommitter, committed: Callable[[], None] | None = None):
        self.committer = committer
        self.committed = committed  # called after each committed micro-batch

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        results = [result for row in collected(df) for result in RangeResult.unpack(row.results)]
        self.committer.commit(results, batch_id)
        if self.committed is not None:
            self.committed()

    def close(self) -> None:
        self.committer.close()


def log_rows(flow: FlowConfig, what: str | None, metrics: Metrics | None = None) -> Callable:
    """The sink of a periodic connector: the work was done in the task; log what it did."""
    def sink(df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        rows = collected(df)
        if metrics is not None and what == "checkpoints":
            metrics.observe_checkpoint_pass(flow, time.monotonic() - started, rows)
        if what and rows:
            log.info(f"{what} emitted", flow=flow.name, count=len(rows),
                     groups=sorted({r[0] for r in rows}), synced=sorted({r[0] for r in rows if r[-1]}))
    return sink
