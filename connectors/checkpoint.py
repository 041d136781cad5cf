"""The checkpoint connector: translated group offsets every ``emit.checkpoints.interval.seconds``.

Groups are listed on the driver side (``mm2py.checkpoint.schedule.GroupListing``, as MM2's
connector lists them for its tasks) and travel with each pass; the pass runs in a task, which
keeps the syncs and checkpoints it read for the next pass in the same worker
(``mm2py.worker.kept_state``), so a pass reads only what was appended since.
"""

from __future__ import annotations

from collections.abc import Iterator

from mm2py.connectors.options import decode_spec
from mm2py.connectors.ticker import TickingReader
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from mm2py.checkpoint.schedule import GroupListing, sync_due
from mm2py.config.model import FlowConfig


class CheckpointDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm2py-checkpoint"

    def schema(self) -> str:
        return "grp string, topic string, partition int, upstream long, downstream long, synced boolean"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        spec = decode_spec(self.options["spec"])
        return CheckpointReader(spec.flow, spec.flow.checkpoints.emit_checkpoints_interval_seconds, spec.reverse)


class CheckpointPass(InputPartition):
    def __init__(self, tick: int, groups: tuple[str, ...], sync_offsets: bool):
        self.tick, self.groups, self.sync_offsets = tick, groups, sync_offsets


class CheckpointReader(TickingReader):
    def __init__(self, flow: FlowConfig, interval_seconds: float, reverse: FlowConfig | None = None):
        super().__init__(flow, interval_seconds)
        self.reverse = reverse  # the flow back, for a two-cluster identity cycle (mm2py.checkpoint.both_ways)
        selection = flow.selection
        self.listing = GroupListing(selection.refresh_groups_enabled, selection.refresh_groups_interval_seconds)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["listing"] = None  # driver side only
        return state

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if end["tick"] <= start["tick"]:
            return []
        from mm2py.kafka.admin import Admin

        admin = Admin(self.flow.source, timeout_ms=self.flow.admin_timeout_ms)
        groups = self.listing.current(lambda: admin.groups())
        sync = sync_due(end["tick"], self.interval, self.flow.checkpoints.sync_group_offsets_interval_seconds)
        return [CheckpointPass(end["tick"], groups, sync)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        # in the task: the query's planner never needs these
        from mm2py.checkpoint.state import kept_logs
        from mm2py.checkpoint.task import run_checkpoints

        assert isinstance(partition, CheckpointPass)
        syncs, checkpoints = kept_logs(self.flow)
        reverse = (self.reverse, kept_logs(self.reverse)[0]) if self.reverse is not None else None
        report = run_checkpoints(self.flow, partition.groups, partition.sync_offsets, syncs, checkpoints, reverse)
        synced = set(report.synced_groups)
        for cp in report.emitted:
            yield (cp.consumer_group_id, cp.topic, cp.partition, cp.upstream_offset, cp.downstream_offset,
                   cp.consumer_group_id in synced)
