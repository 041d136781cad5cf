"""Committing a micro-batch of the source connector: offset syncs, then positions, then the report.

In exactly-once mode the copy tasks committed positions and syncs in their transactions
(``mm2py.source.copy.transactional``); the committer then only reports.

Invariants:
- a commit runs only after Spark finished every task of the micro-batch (it is the query's
  ``foreachBatch`` step, on the driver);
- offset syncs (and their history, kept with a retention covering each synced topic) are
  written before positions: data that counts as mirrored always has its
  syncs, so translation never lacks the mapping of a mirrored record;
- positions move only to where the tasks report they copied (``next_offset - 1``), never to
  the planned ends, and only for partitions that moved;
- a write refused by an outage is retried (up to ``MAX_OUTAGE_SECONDS``) rather than failing
  the micro-batch, whose data the target already holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.flowspec import FlowSpec
from mm2py.formats import OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.metrics import Metrics
from mm2py.policy import ReplicationPolicy
from mm2py.source.plan.listing import OffsetLister, SourceListing
from mm2py.source.plan.resets import gap_entry
from mm2py.source.ranges import RangeResult
from mm2py.source.sync_history import history_for, to_commit
from mm2py.source.sync_writer import OffsetSyncWriter
from mm2py.stores.ledger import Ledger
from mm2py.stores.positions import PositionStore
from mm2py.types import TP

log = structlog.get_logger(__name__)

# How long a commit waits for its cluster before the micro-batch fails (and is copied again).
MAX_OUTAGE_SECONDS = 600.0
# Least time between two reads of the source's ends for the commit log's lag field.
LAG_SECONDS = 10.0


class PositionSaver(Protocol):
    def open(self) -> object: ...
    def save(self, positions: Mapping[TP, int], epochs: Mapping[TP, int] | None = None) -> None: ...
    def close(self) -> None: ...


class SyncSaver(Protocol):
    def open(self) -> object: ...
    def write(self, syncs: Sequence[OffsetSync], history: Sequence[OffsetSync] = ()) -> int: ...
    def close(self) -> None: ...


class HistoryKeeper(Protocol):
    def cover(self, topics: Iterable[str]) -> None: ...


@dataclass
class FlowTotals:
    """Running totals of one flow, for logs and status."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    positions: dict[TP, int] = field(default_factory=dict)


class FlowCommitter:
    """Records what each micro-batch of one flow copied. Constructor does no I/O."""

    def __init__(self, flow: FlowConfig, policy: ReplicationPolicy, positions: PositionSaver | None,
                 syncs: SyncSaver | None, source: OffsetLister, target: Admin | None = None,
                 metrics: Metrics | None = None, history: HistoryKeeper | None = None, ledger: Ledger | None = None):
        self.flow = flow
        self.ledger = ledger  # records lost ranges (mm2py.stores.ledger)
        self.history = history
        self.policy = policy
        self.positions = positions
        self.syncs = syncs
        self.source = source
        self.target = target
        self.metrics = metrics
        self.totals = FlowTotals()
        self.last_sync: dict[TP, tuple[int, int]] = {}  # each partition's newest sync written
        self._lag_at = -LAG_SECONDS  # when the lag field was last read
        self._started = time.monotonic()
        self._committed_at: float | None = None  # when the last micro-batch was committed
        self.max_outage_s = MAX_OUTAGE_SECONDS
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], None] = time.sleep

    def open(self) -> None:
        """Start the writers' producers ahead of the first commit, which then waits on none of them.

        Nothing waits here: the producers connect and get their producer ids in the background
        (``PositionStore.open``).
        """
        if self.positions is not None:
            self.positions.open()
        if self.syncs is not None:
            self.syncs.open()

    def commit(self, results: list[RangeResult], batch_id: int) -> None:
        if not results:
            return
        t0 = time.monotonic()
        positions = {(r.topic, r.partition): r.next_offset - 1 for r in results if r.next_offset > r.start}
        epochs = {(r.topic, r.partition): r.leader_epoch for r in results  # checked by mm2py.source.plan.divergence
                  if r.next_offset > r.start and r.leader_epoch >= 0}
        syncs, run_starts = to_commit(results, self.last_sync)  # less what tailing tasks wrote
        if self.history is not None and syncs:  # its retention covers every topic synced (in tasks too)
            keeper = self.history
            self._durably("offset-sync history", lambda: keeper.cover({s.topic for s in syncs}))
        if self.syncs is not None and syncs:
            saver = self.syncs
            history = run_starts if self.history is not None else []
            self._durably("offset syncs", lambda: saver.write(syncs, history))
        self.last_sync.update({(r.topic, r.partition): r.syncs[-1] for r in results if r.syncs})
        gaps = [gap_entry(self.flow.name, r.topic, r.partition, r.lost_start, r.lost_end)
                for r in results if r.lost_start >= 0]
        if self.ledger is not None and gaps:  # recorded before the positions move past them
            ledger = self.ledger
            self._durably("ledger", lambda: ledger.append(gaps))
        if self.positions is not None:
            self._durably("positions", lambda: self.positions.save(positions, epochs))  # type: ignore[union-attr]
        self._report_trouble(results)
        records = sum(r.records for r in results)
        size = sum(r.bytes for r in results)
        self.totals.batches += 1
        self.totals.records += records
        self.totals.bytes += size
        self.totals.positions.update(positions)
        committed = time.monotonic() - t0  # the commit's own time: its writes, not the lag read after
        if self.metrics is not None:
            self.metrics.observe_batch(self.flow, results, commit_seconds=committed)
        lag = self._lag(results)
        done = time.monotonic()
        # the micro-batch's whole cycle: since the previous one committed (the flow started, for the first)
        cycle = done - (self._committed_at if self._committed_at is not None else self._started)
        self._committed_at = done
        log.info(
            "micro-batch mirrored",
            flow=self.flow.name,
            batch=batch_id,
            partitions=len(results),
            records=records,
            bytes=size,
            rebuilt_batches=sum(r.rebuilt for r in results),
            offset_syncs=len(syncs) if self.flow.checkpoints.emit_offset_syncs_enabled else 0,
            dropped_records=sum(r.dropped for r in results),
            went_home_records=sum(r.went_home for r in results),  # provenance: first written on the target
            tailed_records=sum(r.tailed for r in results),  # copied after the planned ends (mm2py.source.copy.tail)
            lag_records=lag,
            **self._progress(lag),
            batch_seconds=round(cycle, 3),
            mb_per_s=round(size / cycle / 1e6, 1) if cycle > 0 else None,
            commit_seconds=round(committed, 3),
        )

    def _durably(self, what: str, write: Callable[[], object]) -> None:
        """``write()``, retried through an outage of its cluster for up to ``max_outage_s``.

        The micro-batch's data is on the target already: failing here would make Spark copy it
        again (duplicates), while waiting keeps the next micro-batch from starting, so order and
        the syncs-before-positions rule hold either way.
        """
        deadline = self.clock() + self.max_outage_s
        backoff, waiting = 0.5, False
        while True:
            try:
                write()
            except KafkaError as e:
                if not e.retriable or self.clock() + backoff > deadline:
                    raise
                if not waiting:
                    log.warning(f"could not record {what}; retrying until the cluster answers", flow=self.flow.name,
                                error=str(e))
                    waiting = True
                self.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            if waiting:
                log.info(f"{what} recorded after the outage", flow=self.flow.name)
            return

    def _report_trouble(self, results: list[RangeResult]) -> None:
        """ERROR lines for stalled partitions (every micro-batch while they stay so) and lost ranges."""
        for r in results:
            if r.lost_start >= 0:
                log.error("source records deleted before they were mirrored (retention or delete-records): "
                          "skipped to the log start", flow=self.flow.name, topic=r.topic, partition=r.partition,
                          lost_from=r.lost_start, lost_to=r.lost_end, lost_records=r.lost_end - r.lost_start)
            if r.stall_offset < 0:
                continue
            remote = self.policy.format_remote_topic(self.flow.source.alias, r.topic)
            fields = dict(flow=self.flow.name, topic=r.topic, partition=r.partition, offset=r.stall_offset,
                          remote_topic=remote, reason=r.stall_reason)
            if r.stall_bytes >= 0 and "too large" in r.stall_reason:
                fields.update(batch_bytes=r.stall_bytes, target_max_message_bytes=self._max_message_bytes(remote))
                log.error("partition stalled: a source batch is larger than the remote topic accepts; raise its "
                          "max.message.bytes (other partitions go on, this one retries every micro-batch)", **fields)
            else:
                log.error("partition stalled: the target refused it; retried every micro-batch", **fields)

    def _max_message_bytes(self, topic: str) -> int | None:
        """The remote topic's max.message.bytes, for the report (None when it cannot be read)."""
        if self.target is None:
            return None
        try:
            entries = self.target.topic_configs([topic])
        except KafkaError:
            return None
        value = next((e.value for e in entries.get(topic, ()) if e.name == "max.message.bytes"), None)
        return int(value) if value is not None else None

    def _progress(self, lag: int | None) -> dict:
        """Records/s since the flow started and the time left at that rate (long backfills)."""
        rate = self.totals.records / max(time.monotonic() - self._started, 1e-3)
        out: dict[str, object] = {"records_per_s": round(rate)}
        if lag:
            out["eta_s"] = round(lag / rate) if rate > 0 else None
        return out

    def _lag(self, results: list[RangeResult]) -> int | None:
        """Records still to mirror in the batch's partitions, as the source stands now.

        Read at most every ``LAG_SECONDS`` (None between): at thousands of partitions the
        ListOffsets behind this log field costs a good part of a steady micro-batch. Not read
        after a micro-batch whose tasks tailed (mm2py.source.copy.tail): they copied until their tail
        ended, and what arrived since waits for this commit and the next plan.
        """
        now = time.monotonic()
        if now - self._lag_at < LAG_SECONDS or any(r.tailed for r in results):
            return None
        self._lag_at = now
        try:
            ends = self.source.list_offsets([(r.topic, r.partition) for r in results], "latest")
        except KafkaError:
            return None  # only a log field: never fail a copied micro-batch over it
        return sum(max(ends.get((r.topic, r.partition), 0) - r.next_offset, 0) for r in results)

    def close(self) -> None:
        if self.positions is not None:
            self.positions.close()
        if self.syncs is not None:
            self.syncs.close()
        if self.ledger is not None:
            self.ledger.close()
        if isinstance(self.source, SourceListing):
            self.source.close()


def committer_for(spec: FlowSpec, metrics: Metrics | None = None) -> FlowCommitter:
    """A committer over the real clusters of ``spec``'s flow."""
    flow = spec.flow
    timeout = flow.admin_timeout_ms
    # exactly-once: the copy tasks committed positions and syncs with their data (mm2py.source.copy.transactional)
    in_tasks = flow.delivery.exactly_once != "off"
    return FlowCommitter(
        flow, spec.policy,
        None if in_tasks else PositionStore(flow.target, flow.source.alias, timeout_ms=timeout),
        OffsetSyncWriter(flow) if flow.checkpoints.emit_offset_syncs_enabled and not in_tasks else None,
        SourceListing(flow),
        Admin(flow.target, timeout_ms=timeout),
        metrics,
        (history_for(flow)
         if flow.checkpoints.emit_offset_syncs_enabled and flow.checkpoints.offset_syncs_history_enabled else None),
        Ledger(flow.target, flow.source.alias, flow.name, timeout_s=timeout / 1000),
    )
