"""The copy state of one partition range inside a copy task, and the batches it has under way.

Invariants (the copier relies on them):
- ``queue`` and ``in_flight`` hold batches in source order; a batch moves from the head of
  ``queue`` to the tail of ``in_flight`` when sent (its bytes kept in ``sent``), and leaves
  ``in_flight`` from its head when the target answers;
- ``resend`` puts every in-flight batch back at the head of ``queue`` with its bytes (and so its
  sequence numbers) unchanged and bumps ``generation``: answers to requests sent before that are
  moot, and the broker's sequence check makes the resent batches land once, in order;
- ``records`` and ``bytes`` count every batch queued; a batch that will not be written (a
  stall) is taken back with ``uncount``;
- ``syncs`` hold a pair wherever the linear mapping upstream -> downstream starts or breaks,
  so every acknowledged offset translates exactly; where a writer left out the copy's first
  owned records (``first_owned``: a transform dropped them), the first sync maps from there
  onto the first record written, so the stretch translates to it as any later gap does;
- once stalled, nothing at or after ``stall_offset`` counts as mirrored;
- with several producer ids (provenance: one per origin), ``sequence`` is that of the producer
  id of the last batch queued, and the others' wait in ``_sequences``; a producer id's first
  batch here ``opens``: it is sent alone and nothing follows it until it is acknowledged (a
  broker takes any sequence from a producer id new to a partition).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from mm2py.kafka.fastio import Pieces
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.types import TP


@dataclass(frozen=True, slots=True)
class Pending:
    """A batch queued or in flight: the source offsets it carries and its size on the wire.

    A batch passed through unchanged carries ``count`` consecutive offsets from ``first``; a
    rebuilt one lists its records' offsets (``offsets``), which may have gaps.
    """

    first: int
    count: int
    size: int
    offsets: tuple[int, ...] | None = None
    opens: bool = False  # the first batch of its producer id in this partition: alone in flight

    @classmethod
    def rebuilt(cls, offsets: list[int], size: int) -> Pending:
        return cls(offsets[0], len(offsets), size, tuple(offsets))


@dataclass
class PartitionCopy:
    range: PartitionRange
    target: TP
    next_fetch: int
    done: bool = False
    sequence: int = 0
    records: int = 0
    bytes: int = 0
    batches: int = 0
    rebuilt: int = 0
    dropped: int = 0
    went_home: int = 0  # records left out because their origin is the target (mm2py.source.provenance)
    # transform link name -> [in, out, dropped, failed] records (mm2py.transforms.Chain.apply)
    transformed: dict[str, list[int]] = field(default_factory=dict)
    tail_from: int = -1  # ``records`` when the copy went on past its planned range (mm2py.source.copy.tail)
    max_timestamp: int = -1
    fetched_ms: int = -1
    acked_ms: int = -1
    answered: bool = False  # the target answered a batch: its sequences now enforce order
    # linear run tracking: the next (upstream, downstream) pair that continues the run
    run_next: tuple[int, int] | None = None
    syncs: list[tuple[int, int]] = field(default_factory=list)
    # the first source offset the copy owned, set by a writer that may leave records out (-1: not set)
    first_owned: int = -1
    in_flight: deque[Pending] = field(default_factory=deque)
    sent: deque[Pieces] = field(default_factory=deque)  # the bytes of each in-flight batch, for a resend
    generation: int = 0  # bumped by each resend
    queue: deque[tuple[Pieces, Pending]] = field(default_factory=deque)
    queued_bytes: int = 0
    stall_offset: int = -1
    stall_bytes: int = -1
    stall_reason: str = ""
    lost: tuple[int, int] | None = None
    producer_id: int = -1  # of the last batch queued, when the copier writes with several
    opening: bool = False  # the next batch queued opens its producer id here
    _sequences: dict[int, int] = field(default_factory=dict)
    # (first offset, partitionLeaderEpoch) wherever the epoch of the batches read changes, in order
    epochs: list[tuple[int, int]] = field(default_factory=list)
    read_node: int = -1  # the broker that answered with the last batch read

    @classmethod
    def of(cls, r: PartitionRange) -> PartitionCopy:
        return cls(r, (r.target_topic, r.partition), r.start)

    @property
    def stalled(self) -> bool:
        return self.stall_offset >= 0

    def read_batch(self, base_offset: int, leader_epoch: int, node: int = -1) -> None:
        """A source batch from ``base_offset`` was read past (copied or left out), written in ``leader_epoch``,
        as broker ``node`` answered it."""
        self.read_node = node
        if not self.epochs or self.epochs[-1][1] != leader_epoch:
            self.epochs.append((base_offset, leader_epoch))

    def leader_moved(self, leader_epoch: int, node: int) -> bool:
        """A batch of a newer leader epoch than the last one read comes from another broker: the leader moved
        while this copy ran, maybe uncleanly, and its log may have diverged from what was copied."""
        return (bool(self.epochs) and leader_epoch > self.epochs[-1][1] and node >= 0
                and self.read_node >= 0 and node != self.read_node)

    def epoch_below(self, next_offset: int) -> int:
        """The leader epoch of the batch holding ``next_offset - 1``; -1 when none read here holds it."""
        for first, epoch in reversed(self.epochs):
            if first < next_offset:
                return epoch
        return -1

    def use_producer(self, producer_id: int) -> None:
        """Make ``producer_id`` the one whose next sequence ``sequence`` holds, for the batches queued next."""
        if producer_id == self.producer_id:
            return
        if self.producer_id >= 0:
            self._sequences[self.producer_id] = self.sequence
        self.opening = producer_id not in self._sequences
        self.sequence = self._sequences.pop(producer_id, 0)
        self.producer_id = producer_id

    def enqueue(self, payload: Pieces, batch: Pending, *, rebuilt: bool) -> None:
        """Queue a batch to send; it counts as copied from now on."""
        if self.opening:
            batch = replace(batch, opens=True)
            self.opening = False
        self.queue.append((payload, batch))
        self.queued_bytes += batch.size
        self.sequence += batch.count
        self.records += batch.count
        self.bytes += batch.size
        self.rebuilt += int(rebuilt)

    def send_next(self) -> Pieces:
        """Move the oldest queued batch in flight; return its bytes."""
        payload, batch = self.queue.popleft()
        self.queued_bytes -= batch.size
        self.in_flight.append(batch)
        self.sent.append(payload)
        self.batches += 1
        return payload

    def take_oldest(self) -> Pending:
        """Take the oldest in-flight batch off (answered, or moot)."""
        self.sent.popleft()
        return self.in_flight.popleft()

    def resend(self) -> int:
        """Queue every in-flight batch again ahead of the rest, bytes unchanged; return how many."""
        count = len(self.in_flight)
        for payload, batch in zip(reversed(self.sent), reversed(self.in_flight), strict=True):
            self.queue.appendleft((payload, batch))
            self.queued_bytes += batch.size
        self.batches -= count
        self.in_flight.clear()
        self.sent.clear()
        self.generation += 1
        return count

    def stall(self, offset: int, size: int, reason: str) -> None:
        """Stop at the batch starting at ``offset``: nothing from it on counts as mirrored.

        Queued batches after it are dropped; earlier ones (a stall found before sending) still go.
        """
        self.stall_offset, self.stall_bytes, self.stall_reason = offset, size, reason
        self.done = True
        kept: deque[tuple[Pieces, Pending]] = deque()
        for payload, batch in self.queue:
            if batch.first < offset:
                kept.append((payload, batch))
                continue
            self.uncount(batch)
            self.queued_bytes -= batch.size
        self.queue = kept

    def uncount(self, batch: Pending) -> None:
        """Take back a batch counted as copied when it was queued, which will not be."""
        self.records -= batch.count
        self.bytes -= batch.size

    def may_send(self, most: int) -> bool:
        """True when the oldest queued batch may go with ``most`` batches in flight at most."""
        if not self.queue or len(self.in_flight) >= most:
            return False
        return not (self.in_flight and (self.in_flight[-1].opens or self.queue[0][1].opens))

    def past_stall(self) -> bool:
        """True when the oldest in-flight batch starts at or after the stall (its outcome is moot)."""
        return self.stalled and bool(self.in_flight) and self.in_flight[0].first >= self.stall_offset

    def acked_next(self) -> int:
        """The first source offset whose batch the target has not acknowledged (all below it landed)."""
        if self.in_flight:
            first = self.in_flight[0].first
        elif self.queue:
            first = self.queue[0][1].first
        else:
            first = self.next_fetch
        return min(first, self.stall_offset) if self.stalled else first

    def closed_syncs(self) -> list[tuple[int, int]]:
        """``syncs`` closed with where the next record will land (as ``result`` closes them), unchanged."""
        if self.run_next is not None and (not self.syncs or self.syncs[-1] != self.run_next):
            return [*self.syncs, self.run_next]
        return list(self.syncs)

    def result(self) -> RangeResult:
        # close with where the next record will land: the index then knows the run's end
        if self.run_next is not None and self.syncs[-1] != self.run_next:
            self.syncs.append(self.run_next)
        r = self.range
        lost_start, lost_end = self.lost or (-1, -1)
        next_offset = self.stall_offset if self.stalled else self.next_fetch
        return RangeResult(
            r.topic, r.partition, r.start, r.end, next_offset,
            records=self.records, bytes=self.bytes, batches=self.batches, rebuilt=self.rebuilt,
            dropped=self.dropped, went_home=self.went_home,
            transformed=tuple((name, t[0], t[1], t[2], t[3]) for name, t in sorted(self.transformed.items())),
            tailed=self.records - self.tail_from if self.tail_from >= 0 else 0, syncs=tuple(self.syncs),
            max_timestamp=self.max_timestamp,
            fetched_ms=self.fetched_ms, acked_ms=self.acked_ms, stall_offset=self.stall_offset,
            stall_bytes=self.stall_bytes, stall_reason=self.stall_reason, lost_start=lost_start, lost_end=lost_end,
            leader_epoch=self.epoch_below(next_offset),
        )

    def acked(self, downstream_base: int, lag_max: int) -> None:
        """Record the mapping of the oldest in-flight batch from its produce response.

        A sync is due wherever the linear run breaks (exactness needs no more), and at a
        batch start once ``offset.lag.max`` offsets passed since the last one, so tools that
        translate MM2's way ("last sync + 1") stay close too.
        """
        self.answered = True
        batch = self.take_oldest()
        if self.stalled and batch.first >= self.stall_offset:
            self.uncount(batch)  # the broker refuses batches after a refused one; kept as a guard
            return
        if not self.syncs and 0 <= self.first_owned < batch.first:
            # the copy's first owned records were left out: they map flat onto its first record
            # written (with no sync below them, translation would not know them at all)
            self.syncs.append((self.first_owned, downstream_base))
        if batch.offsets is None:  # passed unchanged: consecutive offsets
            self._sync_if_due(batch.first, downstream_base, lag_max)
            self.run_next = (batch.first + batch.count, downstream_base + batch.count)
            return
        for i, up in enumerate(batch.offsets):  # rebuilt: offsets may have gaps
            self._sync_if_due(up, downstream_base + i, lag_max)
            self.run_next = (up + 1, downstream_base + i + 1)

    def _sync_if_due(self, up: int, down: int, lag_max: int) -> None:
        after = self.run_next
        if after is not None and up > after[0] and down > after[1]:
            # skipped source records and others' target records at one break: the skipped ones
            # map flat onto this batch, so the run before keeps its exact length (translation)
            self.syncs.append((after[0], down))
        if self.run_next != (up, down) or up - self.syncs[-1][0] >= max(lag_max, 1):
            self.syncs.append((up, down))
