"""The source connector's sink: records positions and reports what each micro-batch did."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import structlog
from pyspark.sql import DataFrame

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.formats import OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.metrics import Metrics
from mm2py.policy import policy_for
from mm2py.source.positions import PositionStore
from mm2py.source.sync_writer import OffsetSyncWriter

log = structlog.get_logger(__name__)


@dataclass
class FlowTotals:
    """Running totals of one flow, for logs and status."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    positions: dict[tuple[str, int], int] = field(default_factory=dict)


class FlowSink:
    """``foreachBatch`` callback of a flow's source query; runs in the driver process.

    Positions move only here, after Spark finished every task of the micro-batch, and only
    to where the tasks report they actually copied (``next_offset``), never to planned ends.
    """

    def __init__(self, flow: FlowConfig, metrics: Metrics | None = None):
        self.flow = flow
        self.metrics = metrics
        self.src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
        self.store = PositionStore(flow.target, flow.source.alias, timeout_ms=flow.admin_timeout_ms)
        self.syncs = OffsetSyncWriter(flow) if flow.emit_offset_syncs_enabled else None
        self.totals = FlowTotals()
        self._started = time.monotonic()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        t0 = time.monotonic()
        rows = df.collect()
        if not rows:
            return
        positions = {}
        syncs: list[OffsetSync] = []
        records = size = rebuilt = dropped = 0
        for row in rows:
            syncs.extend(OffsetSync(row.topic, row.partition, up, down) for up, down in row.syncs)
            if row.next_offset > row.start:
                positions[(row.topic, row.partition)] = row.next_offset - 1
            records += row.records
            size += row.bytes
            rebuilt += row.rebuilt
            dropped += row.dropped
        # syncs first: data that counts as mirrored always has its syncs
        if self.syncs is not None and syncs:
            self.syncs.write(syncs)
        self.store.save(positions)
        self._report_trouble(rows)
        self.totals.batches += 1
        self.totals.records += records
        self.totals.bytes += size
        self.totals.positions.update(positions)
        if self.metrics is not None:
            self.metrics.observe_batch(self.flow, rows)
        lag = self._lag(rows)
        elapsed = time.monotonic() - t0
        log.info(
            "micro-batch mirrored",
            flow=self.flow.name,
            batch=batch_id,
            partitions=len(rows),
            records=records,
            bytes=size,
            rebuilt_batches=rebuilt,
            offset_syncs=len(syncs) if self.syncs is not None else 0,
            dropped_records=dropped,
            lag_records=lag,
            **self._progress(lag),
            seconds=round(elapsed, 3),
            mb_per_s=round(size / elapsed / 1e6, 1) if elapsed > 0 else None,
        )

    def _report_trouble(self, rows: list) -> None:
        """ERROR lines for stalled partitions (every micro-batch while they stay so) and lost ranges."""
        for row in rows:
            if row.lost_start >= 0:
                log.error("source records deleted before they were mirrored (retention or delete-records): "
                          "skipped to the log start", flow=self.flow.name, topic=row.topic, partition=row.partition,
                          lost_from=row.lost_start, lost_to=row.lost_end, lost_records=row.lost_end - row.lost_start)
            if row.stall_offset < 0:
                continue
            remote = self._remote(row.topic)
            fields = dict(flow=self.flow.name, topic=row.topic, partition=row.partition, offset=row.stall_offset,
                          remote_topic=remote, reason=row.stall_reason)
            if row.stall_bytes >= 0 and "too large" in row.stall_reason:
                fields.update(batch_bytes=row.stall_bytes, target_max_message_bytes=self._max_message_bytes(remote))
                log.error("partition stalled: a source batch is larger than the remote topic accepts; raise its "
                          "max.message.bytes (other partitions go on, this one retries every micro-batch)", **fields)
            else:
                log.error("partition stalled: the target refused it; retried every micro-batch", **fields)

    def _remote(self, topic: str) -> str:
        return policy_for(self.flow).format_remote_topic(self.flow.source.alias, topic)

    def _max_message_bytes(self, topic: str) -> int | None:
        """The remote topic's max.message.bytes, for the report (None when it cannot be read)."""
        try:
            entries = Admin(self.flow.target, timeout_ms=self.flow.admin_timeout_ms).topic_configs([topic])
        except KafkaError:
            return None
        value = next((e.value for e in entries.get(topic, ()) if e.name == "max.message.bytes"), None)
        return int(value) if value is not None else None

    def _progress(self, lag: int | None) -> dict:
        """Records/s since the flow started and the time left at that rate (long backfills)."""
        rate = self.totals.records / max(time.monotonic() - self._started, 1e-3)
        out = {"records_per_s": round(rate)}
        if lag:
            out["eta_s"] = round(lag / rate) if rate > 0 else None
        return out

    def _lag(self, rows: list) -> int | None:
        """Records still to mirror in the batch's partitions, as the source stands now."""
        try:
            ends = self.src.list_offsets([(r.topic, r.partition) for r in rows], "latest")
        except KafkaError:
            return None  # only a log field: never fail a copied micro-batch over it
        return sum(max(ends.get((r.topic, r.partition), 0) - r.next_offset, 0) for r in rows)

    def close(self) -> None:
        self.store.close()
        if self.syncs is not None:
            self.syncs.close()
