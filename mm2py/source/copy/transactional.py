"""Exactly-once copy tasks: a task's batches, positions and offset syncs in one target transaction.

Each copy task of a flow in exactly-once mode is a transactional producer on the target:

1. ``begin``: InitProducerId for the task's transactional id, fencing any earlier holder;
2. the copier writes the task's raw batches, stamped transactional;
3. ``commit``: the position of every partition the task moved goes to
   ``mm2-offsets.{source}.internal`` (MM2's format and partitioning, so Apache MM2 can take
   over), the offset syncs go either into the same transaction (syncs topic on the target) or,
   with the syncs topic on the source, to the source cluster acknowledged before step 4;
4. EndTxn(commit). Any failure before it aborts (or leaves open until the coordinator aborts
   it): read_committed consumers never see the task's records, and the next attempt resumes
   from the committed positions.

Transactional ids are ``mm2py-{source}->{target}-{slice}``: ``slice`` is the index of the task's
range group in its micro-batch (0 .. tasks-1). Spark retries a task with the same index, so a
retry fences its failed attempt; micro-batches run one after another, so one id is never used
by two live tasks. When the task count changes (a restart with another ``tasks.max``), the
start-up step (``mm2py.source.copy.exactly_once.prepare``) fences every id of the flow the
coordinators list, so no task of an earlier run can commit after a task of this one.

Invariants:
- a record counts as mirrored (its position is committed) exactly when its batch is committed:
  both are in one transaction;
- offset syncs on the source are acknowledged before the transaction commits, so a committed
  record always has its syncs; a sync of an attempt that then aborted points at that attempt's
  aborted records, below the retry's copy, and the retry's syncs (written later, from the same
  committed position on) supersede it (``mm2py.checkpoint.translation``);
- a position record goes to partition ``murmur2(key) % partitions`` of the positions topic, as
  Kafka Connect's producer places it, so the compacted topic keeps one live record per source
  partition whichever tool wrote it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kafka.partitioner.default import murmur2

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.formats import OffsetSync, SourceOffset
from mm2py.kafka import batches as rb
from mm2py.kafka.transactions import Transaction
from mm2py.kafka.wire import RawClient, to_kafka_error
from mm2py.source.copy.copy_settings import ProducerState
from mm2py.source.ranges import RangeResult
from mm2py.source.sync_history import all_syncs, history_syncs
from mm2py.types import TP

# A test may make a task stop right after producing, before it commits (or right after it
# committed): the task creates the file named here (if it does not exist yet, with its pid)
# and sleeps, to be killed there.
HOLD_BEFORE_COMMIT = "MM2PY_TEST_HOLD_BEFORE_COMMIT"
HOLD_AFTER_COMMIT = "MM2PY_TEST_HOLD_AFTER_COMMIT"


def _hold(variable: str) -> None:
    path = os.environ.get(variable)
    if path and not os.path.exists(path):
        with open(path, "w") as marker:
            marker.write(str(os.getpid()))
        time.sleep(3600)


def transactional_prefix(source: str, target: str) -> str:
    return f"mm2py-{source}->{target}-"


def transactional_id(source: str, target: str, slice_index: int) -> str:
    return f"{transactional_prefix(source, target)}{slice_index}"


@dataclass(frozen=True)
class ExactlyOnce:
    """What an exactly-once copy task needs besides its ranges; picklable, sent with the task."""

    source_alias: str
    target_alias: str
    positions_topic: str
    # MM2's offset syncs topic and mm2py's history of it (None: no syncs); in the transaction when
    # on the target, else on ``source_syncs`` (acknowledged before the commit)
    syncs_topic: str | None = None
    history_topic: str | None = None
    source_syncs: ClusterConfig | None = None
    transaction_timeout_ms: int = 60000
    timeout_ms: int = 60000
    produce_timeout_ms: int = 30000  # the data producer's request.timeout.ms, for the syncs on the target
    commit_ms: int = 2000  # copy.tail.commit.ms: a copy interval's task commits this often (interval_commits)

    def transactional_id(self, slice_index: int) -> str:
        return transactional_id(self.source_alias, self.target_alias, slice_index)


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java producer picks for ``key`` (murmur2, made positive)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class SyncSink(Protocol):
    """Where syncs on the source go (a ``RecordWriter``); an interface for the task."""

    def write(self, topic: str, records: Iterable[tuple[bytes, bytes | None]]) -> int: ...


class TaskTransaction:
    """The transaction of one copy task. Constructor does no I/O."""

    def __init__(self, dst: RawClient, spec: ExactlyOnce, slice_index: int, *, principal: str | None = None,
                 source_syncs: SyncSink | None = None):
        self.dst = dst
        self.spec = spec
        self.source_syncs = source_syncs
        self.produce_timeout_ms = spec.produce_timeout_ms
        self.txn = Transaction(dst, spec.transactional_id(slice_index), timeout_ms=spec.timeout_ms,
                               transaction_timeout_ms=spec.transaction_timeout_ms, principal=principal)

    def begin(self) -> ProducerState:
        self.txn.begin()
        return self.state()

    def state(self) -> ProducerState:
        """The producer state of the id's current transaction (each end bumps its epoch)."""
        return ProducerState(self.txn.producer_id, self.txn.epoch, self.txn.transactional_id)

    def commit(self, results: Sequence[RangeResult]) -> None:
        """Write the positions (and syncs) of ``results`` in the transaction, then commit it.

        A task that moved no partition (every range stalled at its start, say) has nothing to
        commit: its transaction is aborted instead (a broker refuses to commit an empty one, and
        a batch it refused is not in the log anyway).
        """
        positions = [SourceOffset(self.spec.source_alias, r.topic, r.partition, r.next_offset - 1,
                                  leader_epoch=r.leader_epoch if r.leader_epoch >= 0 else None)
                     for r in results if r.next_offset > r.start]
        if not positions:  # acknowledged data moves a position, so none was written either
            self.txn.abort()
            return
        self.commit_positions(positions, all_syncs(results), history_syncs(results))

    def commit_positions(self, positions: Sequence[SourceOffset], syncs: Sequence[OffsetSync],
                         history: Sequence[OffsetSync]) -> ProducerState:
        """Write ``positions`` (and ``syncs``, ``history``) in the transaction and commit it; return the
        producer state of the id's next transaction (transaction version 2 bumps the epoch at each end)."""
        records: dict[str, list[tuple[bytes, bytes | None]]] = {
            self.spec.positions_topic: [(p.key_bytes(), p.value_bytes()) for p in positions]}
        rows: dict[str, list[tuple[bytes, bytes | None]]] = {}
        if self.spec.syncs_topic is not None:
            rows[self.spec.syncs_topic] = [(s.key_bytes(), s.value_bytes()) for s in syncs]
        if self.spec.history_topic is not None:
            rows[self.spec.history_topic] = [(s.key_bytes(), s.value_bytes()) for s in history]
        if self.spec.source_syncs is None:  # on the target: in the transaction
            records.update(rows)
        self._produce(records)
        if self.spec.source_syncs is not None and self.source_syncs is not None:
            for topic, topic_rows in rows.items():
                if topic_rows:
                    self.source_syncs.write(topic, topic_rows)
        _hold(HOLD_BEFORE_COMMIT)
        self.txn.commit()
        _hold(HOLD_AFTER_COMMIT)
        return self.state()

    def abort(self) -> None:
        """Abort, as far as the coordinator can be reached (else it aborts on the transaction timeout)."""
        with contextlib.suppress(KafkaError):
            self.txn.abort()

    def _produce(self, records: dict[str, list[tuple[bytes, bytes | None]]]) -> None:
        """Write keyed records, one transactional batch per partition, and wait for every answer."""
        wanted = {topic: rows for topic, rows in records.items() if rows}
        if not wanted:
            return
        leaders = self.dst.leaders(wanted)
        counts: dict[str, int] = {}
        for topic, _partition in leaders:
            counts[topic] = counts.get(topic, 0) + 1
        by_partition: dict[TP, list[rb.Record]] = {}
        now = int(time.time() * 1000)
        for topic, rows in wanted.items():
            for key, value in rows:
                tp = (topic, partition_for(key, counts[topic]))
                by_partition.setdefault(tp, []).append(rb.Record(0, now, key, value, ()))
        state = (self.txn.producer_id, self.txn.epoch)
        by_node: dict[int, dict[TP, tuple[bytes]]] = {}
        for tp, partition_records in by_partition.items():
            built = rb.rebuild(partition_records, 0, state[0], state[1], 0, transactional=True)
            assert built is not None
            by_node.setdefault(leaders[tp], {})[tp] = (built,)
        futures = [self.dst.produce(node, batches, timeout_ms=self.produce_timeout_ms,
                                    transactional_id=self.txn.transactional_id) for node, batches in by_node.items()]
        for future in futures:
            for tp, result in self.dst.produced(self.dst.wait(future)).items():
                if result.error_code:
                    raise to_kafka_error(result.error_code, cluster=self.dst.alias, topic=tp[0], partition=tp[1],
                                         detail=result.error_message)
