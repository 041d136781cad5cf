"""Per-partition offset ranges: the unit of work of a micro-batch.

A micro-batch is a set of ranges ``[start, end)`` of source partitions. A range owns every
source batch whose *base offset* lies in it: the batch that straddles ``end`` is mirrored
whole by this range, and skipped by the next one. Hence consecutive ranges planned from any
offsets (admission control cuts mid-batch) never copy a batch twice nor miss one.

That holds where ``start`` is a *boundary*: the end of a range the flow copied before. Any
other start is an *exact* record position (``exact``): a flow's first range (from a recorded
position, or the log start or end by ``auto.offset.reset``), a restart where a copy stopped,
a start after a committed or tailed position. There no earlier range took the batch that
straddles ``start`` (DeleteRecords leaves a log start inside a batch, an MM2 position may lie
inside one), so the range copies that batch from ``start`` on, the records before trimmed.
``owned_from`` decides both cases, and the copier's skip past deleted records too.
"""

from __future__ import annotations

import builtins
import math
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

from mm2py.types import TP


@dataclass(frozen=True, slots=True)
class PartitionRange:
    topic: str
    partition: int
    start: int
    end: int
    target_topic: str
    # True when ``start`` is an exact record position rather than the boundary of a range copied
    # before (see the module docstring): records before it inside the first batch are trimmed.
    exact: bool = False
    # > 0 when the remote topic has fewer partitions than the source and partition.mismatch
    # is hash: records are spread over this many target partitions by key (mm2py.source.copy.rehash)
    target_partitions: int = 0
    # the remote topic's max.message.bytes when known (0: unknown): a larger batch stalls the
    # partition before it is sent, so nothing after it reaches the target out of order
    max_batch_bytes: int = 0
    # the source topic's id the plan was made for ("": unknown): the copy fetches that topic by
    # this id, so a topic re-created under it is never read as if it went on (mm2py.kafka.topic_ids)
    topic_id: str = ""
    # the last sync (upstream, downstream) the copier this range takes over from wrote (a resident
    # handover, mm2py.source.copy.resident_task): a first sync on its line continues that run, so
    # it is no run start for the history (mm2py.source.sync_history) and not written again
    prior_sync: tuple[int, int] | None = None

    @property
    def key(self) -> str:
        return tp_key(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class RangeResult:
    """What a task did for one range; small, sent back to the driver."""

    topic: str
    partition: int
    start: int
    end: int
    next_offset: int  # first source offset not yet mirrored (>= end when done)
    records: int = 0
    bytes: int = 0
    batches: int = 0
    rebuilt: int = 0
    dropped: int = 0  # control records and aborted-transaction records left out
    went_home: int = 0  # records left out because they were first written on the target (provenance)
    tailed: int = 0  # records copied after the planned end, while the task tailed (mm2py.source.copy.tail)
    # (upstream offset, downstream offset) wherever the linear mapping starts or breaks
    syncs: tuple[tuple[int, int], ...] = field(default_factory=tuple)
    max_timestamp: int = -1  # newest record timestamp copied (ms), -1 if none
    fetched_ms: int = -1  # wall clock when the batch holding it was fetched
    acked_ms: int = -1  # wall clock when the target acknowledged the range's last batch
    # A partition the target refused to take (mm2py.source.copy.copier): the source offset of the
    # batch it stopped at (next_offset is that offset), the batch's size and the reason.
    stall_offset: int = -1
    stall_bytes: int = -1
    stall_reason: str = ""
    # source offsets [lost_start, lost_end) deleted by retention before they were mirrored
    lost_start: int = -1
    lost_end: int = -1
    # schemas.on.error (mm2py.schemas): records written with their ids untranslated (pass), and
    # records sent to the dead-letter topic instead of the remote topic (dead-letter)
    schema_passed: int = 0
    schema_dead_lettered: int = 0
    # leading ``syncs`` the task already wrote while it tailed (mm2py.source.copy.tail_commit)
    syncs_written: int = 0
    # the partitionLeaderEpoch of the source batch holding ``next_offset - 1`` (-1: unknown, or
    # nothing copied): the planner checks the log it came from still holds it (mm2py.source.plan.divergence)
    leader_epoch: int = -1
    # per transform link: (name, records in, out, dropped, failed) (mm2py.transforms.Chain.apply)
    transformed: tuple[tuple[str, int, int, int, int], ...] = field(default_factory=tuple)

    @staticmethod
    def spark_schema() -> str:
        """The Spark DDL of a task's row: its results, packed (``pack``)."""
        return "results binary"

    @staticmethod
    def pack(results: Sequence[RangeResult]) -> tuple:
        """One Spark row carrying every result of a task.

        A row per range would cost Spark's per-cell conversions (Arrow in the task, rows in
        the driver) for each of thousands of partitions; one binary cell costs a pickle of
        plain tuples in field order.
        """
        return (pickle.dumps([tuple(getattr(r, name) for name in _FIELDS) for r in results],
                             protocol=pickle.HIGHEST_PROTOCOL),)

    @classmethod
    def unpack(cls, packed: builtins.bytes | bytearray) -> list[RangeResult]:  # the field ``bytes`` shadows it
        """The results a row made by ``pack`` carries, in the task's order."""
        return [cls(*values) for values in pickle.loads(packed)]


_FIELDS = tuple(f.name for f in fields(RangeResult))


def owned_from(r: PartitionRange, base_offset: int, log_start: int = -1) -> int | None:
    """The first offset range ``r`` copies of the batch at ``base_offset``; None when it copies none of it.

    ``log_start`` is where the copy skipped to after records were deleted before it read them
    (-1: it did not skip). A batch holding ``log_start`` is copied from there on, whatever the
    start: the range before may have ended at that skip too, without the batch. Otherwise a
    batch at or after ``start`` is copied whole, one below an exact start from ``start`` on,
    and one below a boundary start not at all: the range before copied it whole.
    """
    if base_offset < log_start:
        return log_start
    if base_offset >= r.start:
        return base_offset
    return r.start if r.exact else None


def tp_key(topic: str, partition: int) -> str:
    """The JSON-safe key of a topic-partition in Spark offsets: ``topic:partition``.

    Topic names cannot contain ':' (Kafka allows only [a-zA-Z0-9._-]), so it splits back.
    """
    return f"{topic}:{partition}"


def split_key(key: str) -> TP:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def assign(
    ranges: list[PartitionRange],
    tasks: int,
    size_of: Callable[[PartitionRange], float] | None = None,
    min_task_size: float = 0,
) -> list[list[PartitionRange]]:
    """Spread ranges over at most ``tasks`` groups, balancing ``size_of`` (greedy LPT).

    ``size_of`` defaults to the offset count; the planner passes estimated bytes. With
    ``min_task_size`` there are only as many groups as the total size justifies (one per
    ``min_task_size``, at least one): a Spark task has a fixed cost, so a small micro-batch
    is copied faster by one task than split over every core.
    """
    measure = size_of or (lambda r: r.size)
    work = sorted(((measure(r), r) for r in ranges if r.size > 0), key=lambda w: w[0], reverse=True)
    if not work:
        return []
    wanted = tasks
    if min_task_size > 0:
        wanted = min(tasks, math.ceil(sum(size for size, _ in work) / min_task_size))
    groups: list[list[PartitionRange]] = [[] for _ in range(max(1, min(wanted, len(work))))]
    loads = [0.0] * len(groups)
    for size, r in work:
        i = loads.index(min(loads))
        groups[i].append(r)
        loads[i] += size
    return groups
