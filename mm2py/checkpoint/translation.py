"""Exact offset translation from a complete list of offset syncs.

mm2py's source connector writes a sync at the start of every linear run, every
``offset.lag.max`` offsets within one, and at the end of what each task copied (the next
upstream offset and where it will land). Between two consecutive syncs ``s1 = (u1, d1)`` and
``s2 = (u2, d2)`` of a partition the target holds exactly the records of run s1, in order, at
``[d1, d2)``. Hence, for an upstream offset ``u1 <= U < u2``::

    translate(U) = min(d1 + (U - u1), d2)

the downstream offset of the first mirrored record at or after ``U``: exact, not MM2's
"last sync + 1". At or past the last sync (the end of what is mirrored), ``U`` translates to
that sync's downstream offset: a consumer resumes exactly where mirrored data ends.

Invariants of ``SyncIndex``:
- syncs of a partition are kept sorted by upstream offset, all of them (MM2 keeps 64);
- a sync read later (syncs are read in log order) supersedes every earlier sync of its partition
  at or above its upstream offset: a copy starts at a position and goes forward, so a sync below
  what is indexed starts a re-copy (a restart, MM2 taking over, or the retry of an exactly-once
  attempt that aborted) and what the earlier copy synced from there on no longer describes the
  target's readable records;
- translation never returns an offset beyond the downstream end of the last sync;
- where a run breaks with both skipped source records and target records of others between
  (identity cycles), the copier writes ``(end of the run upstream, next downstream)`` too, so the
  skipped stretch maps flat onto the next run and every run's length is known both ways;
- ``trim`` drops only syncs that map records gone from the source: it keeps the newest sync at
  or below the partition's log start, so every offset still in the source log translates as before.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

from mm2py.formats import OffsetSync
from mm2py.types import TP


@dataclass
class _PartitionSyncs:
    upstream: list[int] = field(default_factory=list)
    downstream: list[int] = field(default_factory=list)

    def add(self, up: int, down: int) -> None:
        if self.upstream and up <= self.upstream[-1]:  # a re-copy: supersede what it starts below
            i = bisect.bisect_left(self.upstream, up)
            del self.upstream[i:], self.downstream[i:]
        self.upstream.append(up)
        self.downstream.append(down)

    def trim(self, log_start: int) -> int:
        """Drop the syncs before the newest one at or below ``log_start``; return how many."""
        i = bisect.bisect_right(self.upstream, log_start) - 1
        if i <= 0:
            return 0
        del self.upstream[:i], self.downstream[:i]
        return i


class SyncIndex:
    def __init__(self) -> None:
        self._parts: dict[TP, _PartitionSyncs] = {}

    def add(self, sync: OffsetSync) -> None:
        self.add_offsets((sync.topic, sync.partition), sync.upstream_offset, sync.downstream_offset)

    def add_offsets(self, tp: TP, upstream: int, downstream: int) -> None:
        """``add`` of the sync ``(upstream, downstream)`` of ``tp``, without an ``OffsetSync``."""
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _PartitionSyncs()
        part.add(upstream, downstream)

    def partitions(self) -> list[TP]:
        return list(self._parts)

    def trim(self, log_starts: Mapping[TP, int]) -> int:
        """Forget syncs of records the source no longer holds (``log_starts``: each partition's
        log start); returns how many syncs went. Partitions not in ``log_starts`` are left alone."""
        return sum(part.trim(log_starts[tp]) for tp, part in self._parts.items() if tp in log_starts)

    def count(self, topic: str, partition: int) -> int:
        part = self._parts.get((topic, partition))
        return len(part.upstream) if part else 0

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        """Downstream offset a consumer committed at ``upstream`` resumes from; None if unknown."""
        part = self._parts.get((topic, partition))
        if part is None:
            return None
        i = bisect.bisect_right(part.upstream, upstream) - 1
        if i < 0:
            return None  # older than every sync: that data was not mirrored by this flow
        d1 = part.downstream[i]
        if i + 1 == len(part.upstream):
            return d1
        return min(d1 + (upstream - part.upstream[i]), part.downstream[i + 1])

    def last(self, topic: str, partition: int) -> tuple[int, int] | None:
        """The partition's newest sync (upstream, downstream): where mirrored data ends."""
        part = self._parts.get((topic, partition))
        return (part.upstream[-1], part.downstream[-1]) if part and part.upstream else None

    def first_upstream_at(self, topic: str, partition: int, downstream: int) -> int | None:
        """The first upstream offset whose record lands at or after ``downstream``; None with no sync.

        Below every sync that is the first sync's upstream offset; in a gap between runs (records
        of the target's own there), the next run's start.
        """
        part = self._parts.get((topic, partition))
        if part is None:
            return None
        i = bisect.bisect_right(part.downstream, downstream) - 1
        if i < 0:
            return part.upstream[0]
        u1, d1 = part.upstream[i], part.downstream[i]
        if i + 1 == len(part.upstream):
            return u1
        if downstream - d1 < part.upstream[i + 1] - u1:
            return u1 + (downstream - d1)
        # past the run's records: the next run's first record (a skipped stretch maps flat onto it)
        j = i + 1
        while j + 1 < len(part.upstream) and part.downstream[j + 1] == part.downstream[j]:
            j += 1
        return part.upstream[j]

    def inverse(self, topic: str, partition: int, downstream: int) -> int | None:
        """The upstream offset whose record sits at ``downstream`` (for failback); None if unknown."""
        part = self._parts.get((topic, partition))
        if part is None:
            return None
        # downstream offsets of a partition's syncs ascend with upstream: runs are contiguous
        i = bisect.bisect_right(part.downstream, downstream) - 1
        if i < 0:
            return None
        u1, d1 = part.upstream[i], part.downstream[i]
        if i + 1 == len(part.upstream):
            return u1
        return min(u1 + (downstream - d1), part.upstream[i + 1])

