"""``foreachBatch`` sinks: the driver-side end of each query, handing Spark's rows to the core."""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog
from pyspark.sql import DataFrame

from mm2py.config.model import FlowConfig
from mm2py.metrics import Metrics
from mm2py.source.commit import FlowCommitter
from mm2py.source.ranges import RangeResult

log = structlog.get_logger(__name__)


class FlowSink:
    """The source query's sink: the micro-batch's result rows go to the flow's committer."""

    def __init__(self, committer: FlowCommitter, committed: Callable[[], None] | None = None):
        self.committer = committer
        self.committed = committed  # called after each committed micro-batch

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        results = [result for row in df.collect() for result in RangeResult.unpack(row.results)]
        self.committer.commit(results, batch_id)
        if self.committed is not None:
            self.committed()

    def close(self) -> None:
        self.committer.close()


def log_rows(flow: FlowConfig, what: str | None, metrics: Metrics | None = None) -> Callable:
    """The sink of a periodic connector: the work was done in the task; log what it did."""
    def sink(df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        rows = df.collect()
        if metrics is not None and what == "checkpoints":
            metrics.observe_checkpoint_pass(flow, time.monotonic() - started, rows)
        if what and rows:
            log.info(f"{what} emitted", flow=flow.name, count=len(rows),
                     groups=sorted({r[0] for r in rows}), synced=sorted({r[0] for r in rows if r[-1]}))
    return sink
