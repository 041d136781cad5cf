"""Tailing copy tasks: a caught-up flow's records reach the target without waiting for a micro-batch.

A micro-batch has a fixed cycle (planning, Spark's offset and commit logs, task launch, the
sink's commit), and a record that arrives just after a plan waits for the next one. A copy
task of a caught-up flow therefore keeps copying what arrives after its planned ranges for
``copy.tail.ms`` (measured from the task's start); only the records that arrive between two
micro-batches wait for the next plan.

Invariants:
- a tailing partition's ``next_offset`` is the first offset not acknowledged by the target
  (mm2py.source.copy.copier), and the sink records positions and offset syncs from it as for any
  range: nothing past what landed counts as mirrored, and a failed task is copied again from
  its range's start (at-least-once, as without tailing);
- the planner starts a partition after its recorded position when that lies past Spark's
  offset (mm2py.source.plan.stalls.ahead_of), so what a tail took is not planned again;
- only micro-batches that planned everything the source had, or all but less than one more
  byte budget, tail (``BatchPlanner.caught_up``): a backlog is cut into micro-batches by the
  budget, and a tailing micro-batch, which lasts the tail's window, is left out of its sizing;
  with ``copy.continuous.enabled`` a backlog micro-batch copies past its ends too, with this
  window for its interval (mm2py.source.copy.continuous: measured by what it copied, and
  holding every slot its tasks need rather than leaving one free);
- a micro-batch is given fewer copy tasks to tail only when it holds what arrived since the
  last plan (``BatchPlanner.only_arrivals``: every end reached with less than half the byte
  budget, or less than the whole budget after a plan that reached every end too); the last
  micro-batch of a backlog keeps its tasks, as one task would copy it at one core's speed, and
  tails only if they leave a slot free;
- a tailing micro-batch holds every partition of the flow: those with nothing planned get an
  empty range starting at their next record (``BatchPlanner.idle_ranges``), so no partition
  waits for the next micro-batch while the others tail;
- never with exactly-once delivery (its tasks' one transaction would hide a tail's records until
  the task's end; copy intervals commit one per period, mm2py.source.copy.interval_commits, and
  tails could too, but are not turned on), never with provenance (a batch
  past the planned ends may carry a producer id registered after the registry was read), and
  never in a --once run (it must end);
- a tailing task holds a Spark task slot for the window: a micro-batch tails only when the
  tailing flows' tasks leave at least one slot free, so the checkpoint connectors and other
  queries always find one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mm2py import worker
from mm2py.config.model import FlowConfig
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.stop_flag import StopFlag
from mm2py.source.copy.tail_commit import FlowProgressSink, TailProgress, TaskProgress
from mm2py.types import TP


class TailWindow:
    """How long one copy task tails, and what it records on the way. Constructor does no I/O.

    ``open()`` is False for good once the window's end passed or the run's stop flag rose
    (mm2py.source.copy.stop_flag): a stopping run's tails end where they stand, so their micro-batch
    commits at once. ``progress`` makes what the target acknowledged durable while the task
    tails (mm2py.source.copy.tail_commit), or commits an exactly-once task's transaction every period
    (mm2py.source.copy.interval_commits).
    """

    def __init__(self, until: float, stop: StopFlag | None = None, progress: TaskProgress | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.until = until
        self.stop = stop
        self.progress = progress
        self.clock = clock
        self._closed = False

    def open(self) -> bool:
        if not self._closed and (self.clock() >= self.until or (self.stop is not None and self.stop.raised())):
            self._closed = True
        return not self._closed


class Tails:
    """The partitions of one copy task that copy past their planned end while ``window`` is open.

    A partition that reached its end tails only while the window is open and it is not stalled;
    once the window closes every tailing partition is done where it stands. Constructor does no I/O.
    """

    def __init__(self, window: TailWindow | None):
        self.window = window
        self.partitions: set[TP] = set()

    def __contains__(self, tp: TP) -> bool:
        return tp in self.partitions

    def __bool__(self) -> bool:
        return bool(self.partitions)

    def all_of(self, tps: Iterable[TP]) -> bool:
        """Every one of ``tps`` tails (so none owes planned data)."""
        return self.partitions.issuperset(tps)

    def reached_end(self, tp: TP, part: PartitionCopy) -> bool:
        """``part`` copied its planned range: True when it is done, False when it tails on."""
        if self.window is not None and not part.stalled and self.window.open():
            self.partitions.add(tp)
            part.tail_from = part.records
            return False
        part.done = True
        return True

    def stop(self, tp: TP, part: PartitionCopy) -> None:
        """``part`` ends its tail where it stands."""
        self.partitions.discard(tp)
        part.done = True

    def expire(self, parts: Mapping[TP, PartitionCopy]) -> None:
        """Once the window closed, every tailing partition is done where it stands."""
        if self.partitions and self.window is not None and not self.window.open():
            for tp in self.partitions:
                parts[tp].done = True
            self.partitions.clear()

    def caught_up(self, parts: Mapping[TP, PartitionCopy], in_flight: bool) -> bool:
        """Every planned range copied and acknowledged: each open partition tails, nothing in flight."""
        return bool(self.partitions) and not in_flight and all(
            p.done or tp in self.partitions for tp, p in parts.items())


def window_for(flow: FlowConfig, ms: int, stop: StopFlag | None) -> TailWindow | None:
    """A copy task's window: tailing for ``ms`` from now (0: not at all), recording the task's
    progress with the worker's kept writers (mm2py.worker). Exactly-once: None without a window,
    else one whose progress the task's transactions fill in (mm2py.source.copy.interval_commits)."""
    if flow.delivery.exactly_once != "off":
        return TailWindow(time.monotonic() + ms / 1000, stop) if ms > 0 else None
    sink = worker.kept_state(("tail progress", flow.name, flow.source.bootstrap_servers,
                              flow.target.bootstrap_servers), lambda: FlowProgressSink(flow).open())
    progress = TailProgress(sink, flow.copy.tail_commit_ms / 1000, syncs=flow.checkpoints.emit_offset_syncs_enabled,
                            history=flow.checkpoints.offset_syncs_history_enabled)
    return TailWindow(time.monotonic() + ms / 1000, stop, progress)


def may_tail(flow: FlowConfig, provenance: bool) -> bool:
    """Whether ``flow``'s copy tasks tail at all: at-least-once, no provenance, ``copy.tail.ms`` > 0."""
    return flow.copy.tail_ms > 0 and flow.delivery.exactly_once == "off" and not provenance


@dataclass(frozen=True)
class TaskSlots:
    """Spark's task slots, and the flows of this run whose copy tasks may tail (each holding as
    many slots while it does)."""

    slots: int
    tailing_flows: int = 1

    def tasks_to_tail(self) -> int:
        """The most copy tasks a micro-batch may have and still tail (``tasks_to_tail``)."""
        return tasks_to_tail(self.slots, self.tailing_flows)


def tasks_to_tail(slots: int, tailing_flows: int) -> int:
    """The most copy tasks a micro-batch that reached every end may have and still tail (at least 1).

    Such a micro-batch holds what arrived since the last plan, so fewer tasks cost it little, while
    a tail saves every record arriving in its window a whole micro-batch cycle. (The last plans of a
    backlog, cut less than a budget short or reaching every end with half a budget or more after a
    cut plan, keep their tasks: they tail only if those leave a slot.)
    """
    return max(1, (slots - 1) // max(tailing_flows, 1))


def tail_ms(flow: FlowConfig, *, provenance: bool, caught_up: bool, tasks: int, share: TaskSlots) -> int:
    """How long the copy tasks of the micro-batch just planned tail (0: they end at their planned ends).

    ``tasks``: the micro-batch's copy tasks; ``share``: Spark's task slots and the flows of this
    run whose tasks may tail; the tasks of all of them leave at least one slot free.
    """
    if not (may_tail(flow, provenance) and caught_up and tasks > 0):
        return 0
    if tasks * max(share.tailing_flows, 1) >= share.slots:
        return 0
    return flow.copy.tail_ms
