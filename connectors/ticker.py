"""A timer as a streaming source: one micro-batch per interval, for periodic connectors.

Offsets are ``{"tick": n}`` with n = whole intervals since the epoch, so a restarted query
neither bursts nor skips more than the intervals it was down.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from mm2py.config.model import FlowConfig


class Tick(InputPartition):
    def __init__(self, tick: int):
        self.tick = tick


class TickingReader(DataSourceStreamReader):
    """Subclasses set ``interval_seconds`` and implement ``work(tick)``."""

    def __init__(self, flow: FlowConfig, interval_seconds: float):
        self.flow = flow
        self.interval = max(interval_seconds, 0.1)

    def _now_tick(self) -> int:
        return int(time.time() / self.interval)

    def initialOffset(self) -> dict:
        return {"tick": self._now_tick() - 1}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"tick": max(start["tick"], self._now_tick())}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [Tick(end["tick"])] if end["tick"] > start["tick"] else []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, Tick)
        yield from self.work(partition.tick)

    def work(self, tick: int) -> Iterator[tuple]:
        raise NotImplementedError

    def commit(self, end: dict) -> None:
        pass
