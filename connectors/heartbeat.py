"""The heartbeat connector: an MM2 Heartbeat into the target every ``emit.heartbeats.interval.seconds``."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import StructType

from connectors.source import decode_flow
from connectors.ticker import TickingReader
from mm2py.heartbeat import emit_heartbeat


class HeartbeatDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm2py-heartbeat"

    def schema(self) -> str:
        return "source string, target string, timestamp long"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        flow = decode_flow(self.options["flow"])
        return HeartbeatReader(flow, flow.emit_heartbeats_interval_seconds)


class HeartbeatReader(TickingReader):
    def work(self, tick: int) -> Iterator[tuple]:
        beat = emit_heartbeat(self.flow)
        yield beat.source_cluster_alias, beat.target_cluster_alias, beat.timestamp
