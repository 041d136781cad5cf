"""Partitions whose last micro-batch stopped short, and where the next one starts them again.

Spark moves a source's offsets to the ends the planner chose, whatever the tasks copied. A
copy task may stop a partition early on purpose (mm2py.source.copy.copier: a batch the target
refuses as too large, a remote topic deleted meanwhile); the next micro-batch must then
start where the copy stopped, not at Spark's offset, or the records in between are lost.

The sink records where each partition really got to (``mm2-offsets.{source}.internal`` on the
target), and the planner runs in another process (Spark's Python source runner), so the
positions topic is the one channel both see. ``StallBook`` reads it through a tail
(``mm2py.stores.positions.PositionTail``: one ListOffsets request and the few records the last
micro-batch wrote, per micro-batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from mm2py.source.ranges import split_key
from mm2py.types import TP

log = structlog.get_logger(__name__)

# While a partition stays stalled, topics and their limits are re-read this often.
STALL_REFRESH_SECONDS = 30


@dataclass(frozen=True)
class PlannedRange:
    """A range the planner handed to Spark: where it began, where it should end."""

    begin: int
    end: int
    exact: bool


def ahead_of(start: dict[str, int], recorded: dict[TP, int]) -> dict[str, int]:
    """Partitions whose recorded position lies past Spark's ``start``: the next offset to plan for each.

    A copy task that tailed its partitions (``copy.tail.ms``) copied past the ends Spark
    recorded, and a run restarted from an older Spark checkpoint finds positions written after
    it: the records up to a recorded position are on the target, so planning starts after it.
    """
    out = {}
    for key, begin in start.items():
        last = recorded.get(split_key(key))
        if last is not None and last + 1 > begin:
            out[key] = last + 1
    return out


def short_ranges(planned: dict[str, PlannedRange], recorded: dict[str, int | None]) -> dict[str, PlannedRange]:
    """Ranges whose copy stopped before their end, and where to start them again.

    ``recorded`` is the last mirrored offset of each planned partition (None when none is
    recorded). The restart is the recorded position + 1 (an exact record position) when it
    lies inside the range, else the range's own start.
    """
    out = {}
    for key, r in planned.items():
        if r.end <= r.begin:
            continue  # planned empty: only a tail copied here (BatchPlanner.idle_ranges)
        last = recorded.get(key)
        copied_to = last + 1 if last is not None else None
        if copied_to is not None and copied_to >= r.end:
            continue
        if copied_to is not None and copied_to > r.begin:
            out[key] = PlannedRange(copied_to, r.end, True)
        else:
            out[key] = r
    return out


class RecordedTail(Protocol):
    """The positions the sink recorded, read again on each call (``PositionTail``)."""

    def refresh(self) -> dict[TP, int]: ...


@dataclass(frozen=True)
class StallReview:
    """What the copies of the last micro-batch mean for the next one."""

    # partitions that stopped short in the last micro-batch: (offset, exact) to plan them from
    restart: dict[str, tuple[int, bool]]
    # every partition to begin where its copy stopped: the restarts and the held partitions
    stopped: dict[str, tuple[int, bool]]
    # partitions whose recorded position lies past Spark's start (a tailing copy went further):
    # the next offset to plan, an exact record position
    ahead: dict[str, int]
    # partitions not planned in the next micro-batch (stalled twice at one offset)
    held: frozenset[str]
    # re-read topics and their limits before planning (a deleted remote topic is re-created,
    # a raised max.message.bytes is seen)
    refresh: bool


class StallBook:
    """The ranges of the last micro-batch, checked against the recorded positions before the next.

    ``planned`` remembers the ranges handed to Spark; ``review`` (before the next micro-batch is
    planned) reads the positions through ``tail`` and says which partitions start again where
    their copy stopped. A partition that stops short is planned again from there at once; one
    that stops twice at the same offset is held (not planned) until the next stall refresh,
    since what would change it (a raised limit, a re-created topic) is seen by that refresh. In
    an availableNow run (--once) such a partition is left where it stopped instead, so the run
    ends; its ERROR lines say why. Topics are refreshed at once for a new stall, then at most
    every ``STALL_REFRESH_SECONDS`` while partitions stay stalled.

    Invariants:
    - a partition is re-planned only from a position the sink recorded, or from the start of the
      range that stopped short: never past what was copied;
    - a partition whose recorded position lies past Spark's start (``ahead_of``) is planned from
      after that position: what a tailing copy took beyond its planned end is not copied again;
      only a copy moves a position, so after a run's first review (every partition) only the
      partitions planned last and those still ahead are compared, not every partition;
    - the tail reads the positions topic to its end as it is when asked, and the sink's writes
      for a micro-batch are acknowledged (acks=all) before that micro-batch ends, so ``review``
      sees every position of the last micro-batch;
    - the constructor does no I/O: the tail is first read when a planned micro-batch is reviewed.
    """

    def __init__(self, flow_name: str, tail: RecordedTail, *, clock: Callable[[], float] = time.monotonic):
        self.flow_name = flow_name
        self.tail = tail
        self.clock = clock
        self._planned: dict[str, PlannedRange] = {}  # the ranges of the micro-batch planned last
        self._restarted: dict[str, int] = {}  # partition -> offset last restarted from
        # partition -> (offset, exact, clock time) of a partition stalled twice at one offset:
        # not planned until then
        self._held: dict[str, tuple[int, bool, float]] = {}
        self._stall_refresh_at = 0.0
        self._reviewed = False  # the first review of a run compares every start with the positions
        self._recorded: dict[TP, int] = {}  # the positions as last read
        self._ahead: dict[str, int] = {}  # partitions found ahead of Spark's start at the last review

    def planned(self, ranges: dict[str, PlannedRange]) -> None:
        """The ranges just handed to Spark, per partition key; the next ``review`` checks them."""
        self._planned = ranges

    def also_planned(self, ranges: dict[str, PlannedRange]) -> None:
        """Empty ranges added for a tail: reviewed too, since a tail may move their positions."""
        self._planned = {**self._planned, **ranges}

    def next_offset(self, key: str, start: int) -> int:
        """Where ``key`` resumes from Spark's ``start``: after its recorded position when it was ahead."""
        return max(start, self._ahead.get(key, start))

    def held(self, key: str) -> bool:
        return key in self._held

    def review(self, start: dict[str, int] | None = None, *, available_now: bool = False) -> StallReview:
        """Before the next micro-batch is planned from Spark's ``start``: what the last one's copies mean for it."""
        # positions move only when a micro-batch copied something: read again after one that planned
        if self._planned or (start and not self._reviewed):
            self._recorded = self.tail.refresh()
        start = start or {}
        if self._reviewed:  # a position moved only where a copy ran: the last plan's partitions
            start = {k: start[k] for k in self._planned.keys() | self._ahead.keys() if k in start}
        self._reviewed = True
        restart = self._stopped_short(available_now, self._recorded)
        ahead = self._ahead = ahead_of(start, self._recorded)
        # A remote topic deleted meanwhile stops its partitions short: a refresh re-creates it; one
        # raised max.message.bytes is seen by a refresh too. At once for a new stall, then every
        # STALL_REFRESH_SECONDS.
        # A partition held after stalling twice is tried again once its hold ends, after a refresh.
        now = self.clock()
        retrying = bool(restart) or any(until <= now for _, _, until in self._held.values())
        refresh = retrying and now - self._stall_refresh_at >= STALL_REFRESH_SECONDS
        if refresh:
            self._stall_refresh_at = now
        # Spark's offset of a held partition moved to the end planned for it; its copy stopped here
        stopped = {k: (offset, ex) for k, (offset, ex, _) in self._held.items()}
        stopped.update(restart)
        self._held = {k: v for k, v in self._held.items() if v[2] > now}
        return StallReview(restart, stopped, ahead, frozenset(self._held), refresh)

    def _stopped_short(self, available_now: bool, recorded: dict[TP, int]) -> dict[str, tuple[int, bool]]:
        """Partitions of the last micro-batch whose copy stopped before the planned end.

        They start again where the copy stopped. In an availableNow run (--once) a partition that
        stops at the same offset twice is left there, so the run ends; its ERROR lines say why.
        """
        planned, self._planned = self._planned, {}
        if not planned:
            return {}
        # an empty range (a tail's, BatchPlanner.idle_ranges) cannot stop short: only planned ones are looked up
        short = short_ranges(planned, {k: recorded.get(split_key(k)) for k, r in planned.items() if r.end > r.begin})
        restart = {}
        for key, r in short.items():
            again = self._restarted.get(key) == r.begin
            if again and available_now:
                log.error("partition left behind in this run: its copy keeps stopping at the same offset",
                          flow=self.flow_name, partition=key, offset=r.begin)
                continue
            if again:
                # the same refusal twice: what would change it (a raised limit, a re-created topic) is
                # seen by the stall refresh, so try again after it rather than at every micro-batch
                self._held[key] = (r.begin, r.exact, self.clock() + STALL_REFRESH_SECONDS)
                continue
            self._stall_refresh_at = 0.0  # new: refresh now (a deleted remote topic is re-created)
            log.warning("copy stopped short of the planned end; planning the partition again from there",
                        flow=self.flow_name, partition=key, offset=r.begin, planned_end=r.end)
            self._restarted[key] = r.begin
            restart[key] = (r.begin, r.exact)
        for key in planned.keys() - short.keys():
            self._restarted.pop(key, None)
        return restart
