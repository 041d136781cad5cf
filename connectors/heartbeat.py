"""The heartbeat connector: an MM2 Heartbeat into the target every ``emit.heartbeats.interval.seconds``.

Beats are written by the query's driver-side reader each time Spark polls it for new data
(``latestOffset``, once per trigger interval), with one producer kept open. The query's
offset moves, and a micro-batch runs, only once per report interval, carrying a summary row
(beats written, last timestamp). A beat from the reader costs a produce request; a Spark job
per beat would cost far more (docs/design.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import structlog
from mm2py.connectors.options import decode_spec
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

from mm2py.errors import Mm2pyError
from mm2py.flowspec import FlowSpec
from mm2py.heartbeat.emitter import HeartbeatEmitter

log = structlog.get_logger(__name__)

REPORT_INTERVAL_SECONDS = 60.0


class BeatReport(InputPartition):
    def __init__(self, beats: int, last_timestamp: int):
        self.beats = beats
        self.last_timestamp = last_timestamp


class HeartbeatDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm2py-heartbeat"

    def schema(self) -> str:
        return "source string, target string, beats long, timestamp long"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HeartbeatReader(decode_spec(self.options["spec"]))


class HeartbeatReader(DataSourceStreamReader):
    """Offsets are ``{"report": n, "beats": b, "ts": t}``: report number, beats written, last beat."""

    def __init__(self, spec: FlowSpec, report_interval: float = REPORT_INTERVAL_SECONDS):
        self.spec = spec
        self.flow = flow = spec.flow
        self.interval = max(flow.heartbeats.emit_heartbeats_interval_seconds, 0.1)
        self.report_interval = report_interval
        self._emitter: HeartbeatEmitter | None = None  # driver side only, never pickled
        self._last_beat = 0.0
        self._offset = {"report": 0, "beats": 0, "ts": -1}
        self._beats = 0
        self._last_ts = -1
        self._reported_at = time.monotonic()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_emitter"] = None
        return state

    def initialOffset(self) -> dict:
        return dict(self._offset)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        now = time.monotonic()
        if now - self._last_beat >= self.interval * 0.9:  # polls drift a little around the interval
            self._last_beat = now
            try:
                if self._emitter is None:
                    self._emitter = HeartbeatEmitter(self.spec)
                self._last_ts = self._emitter.beat().timestamp
                self._beats += 1
            except Mm2pyError as e:
                # a missed beat is what heartbeats exist to show; the source connector fails
                # loudly on its own if the target stays unreachable
                log.warning("heartbeat not written", flow=self.flow.name, error=str(e))
        if self._beats and now - self._reported_at >= self.report_interval:
            self._offset = {"report": int(start.get("report", 0)) + 1, "beats": self._beats, "ts": self._last_ts}
            self._beats = 0
            self._reported_at = now
        return dict(self._offset) if self._offset["report"] > int(start.get("report", 0)) else dict(start)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if int(end.get("report", 0)) <= int(start.get("report", 0)):
            return []
        return [BeatReport(int(end["beats"]), int(end["ts"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, BeatReport)
        yield self.flow.source.alias, self.flow.target.alias, partition.beats, partition.last_timestamp

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        if self._emitter is not None:
            self._emitter.close()
