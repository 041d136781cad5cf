"""The checkpoint connector: translated group offsets every ``emit.checkpoints.interval.seconds``."""

from __future__ import annotations

from collections.abc import Iterator

from mm2py.connectors.options import decode_flow
from mm2py.connectors.ticker import TickingReader
from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import StructType


class CheckpointDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm2py-checkpoint"

    def schema(self) -> str:
        return "grp string, topic string, partition int, upstream long, downstream long, synced boolean"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        flow = decode_flow(self.options["flow"])
        return CheckpointReader(flow, flow.emit_checkpoints_interval_seconds)


class CheckpointReader(TickingReader):
    def work(self, tick: int) -> Iterator[tuple]:
        from mm2py.checkpoint.task import run_checkpoints  # in the task: the query's planner never needs it

        report = run_checkpoints(self.flow)
        synced = set(report.synced_groups)
        for cp in report.emitted:
            yield (cp.consumer_group_id, cp.topic, cp.partition, cp.upstream_offset, cp.downstream_offset,
                   cp.consumer_group_id in synced)
