"""A timer as a streaming source: one micro-batch per interval, for periodic connectors.

Offsets are ``{"tick": n}`` with n = whole intervals since the epoch, so a restarted query
neither bursts nor skips more than the intervals it was down. Subclasses plan a tick's work
in ``partitions`` (only when ``end["tick"] > start["tick"]``) and do it in ``read``.
"""

from __future__ import annotations

import time

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadLimit

from mm2py.config.model import FlowConfig


class TickingReader(DataSourceStreamReader):
    def __init__(self, flow: FlowConfig, interval_seconds: float):
        self.flow = flow
        self.interval = max(interval_seconds, 0.1)

    def _now_tick(self) -> int:
        return int(time.time() / self.interval)

    def initialOffset(self) -> dict:
        return {"tick": self._now_tick() - 1}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"tick": max(start["tick"], self._now_tick())}

    def commit(self, end: dict) -> None:
        pass
