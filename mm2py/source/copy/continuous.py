"""Continuous copy: a backlog micro-batch is a checkpoint interval, not a unit of copying.

Without it, each copy task of a backlog micro-batch copies its planned ranges and ends; the
last one ends alone, then the sink commits, the next plan is made and its tasks launched, and
the copy rate falls below half for that while. With ``copy.continuous.enabled`` the copy tasks
of such a micro-batch copy for the interval (``batch.duration.ms`` from each task's start): a
task that finished its planned ranges goes on copying its partitions, from where each stands
to where it is when the interval closes, with the tail's machinery (mm2py.source.copy.tail), so
every task ends when the interval closes and none alone before it.

Invariants (those of mm2py.source.copy.tail hold for an interval as for a tail, except that an
interval's micro-batch need not be caught up, and its tasks need not leave a slot free):
- a task never ends short of its planned ranges: a range unfinished when the interval closes is
  copied to its end first (``Tails.reached_end``), so Spark's offsets stay a lower bound;
- a partition's position is ``acked_next - 1``, recorded during the interval
  (mm2py.source.copy.tail_commit) and at the sink's commit: never ahead of what the target
  acknowledged; the next plan starts it after that position when it lies past Spark's offset
  (mm2py.source.plan.stalls.ahead_of), so the handover between intervals goes through the target;
- one writer per partition: a partition is in one task of an interval (every partition of the
  flow, ``BatchPlanner.idle_ranges``), and Spark starts the next interval's tasks only after all
  of this one's returned, each with nothing in flight;
- only flows without provenance (as tails), never in a --once run (it copies
  what was there at its start), and only while every task of the flows that hold slots runs at
  once (``tasks * flows <= slots``): a task waiting for a slot would start its interval when
  another ended it;
- exactly-once: a task commits a transaction of what it holds every ``copy.tail.commit.ms`` over its
  slice's transactional id, fenced by the producer epoch (mm2py.source.copy.interval_commits), and
  each partition of the next interval starts after its committed position;
- the planner plans ``PLANNED_SHARE`` of what an interval is measured to copy, and measures an
  interval by what it copied, not by what it planned (mm2py.source.plan.sizing: ``IntervalMeter``,
  ``BatchSizer.copied``).
"""

from __future__ import annotations

from mm2py.config.model import FlowConfig
from mm2py.source.copy.tail import TaskSlots


def may_continue(flow: FlowConfig, provenance: bool) -> bool:
    """Whether ``flow``'s backlog micro-batches are copy intervals at all: the setting, no provenance,
    a positive ``batch.duration.ms`` (at-least-once or exactly-once)."""
    return flow.copy.continuous_enabled and not provenance and flow.copy.batch_duration_ms > 0


def fits(tasks: int, share: TaskSlots) -> bool:
    """``tasks`` copy tasks of every flow holding slots run at once in Spark's slots."""
    return tasks > 0 and tasks * max(share.tailing_flows, 1) <= share.slots


def interval_ms(flow: FlowConfig, *, provenance: bool, backlog: bool, tasks: int, share: TaskSlots) -> int:
    """How long the copy tasks of the micro-batch just planned copy (0: to their planned ends).

    ``backlog``: the plan was not caught up (a caught-up micro-batch tails instead, ``tail_ms``)
    in a run that goes on (a --once run's plans copy what the source had at its start, and end).
    """
    if not backlog or not may_continue(flow, provenance) or not fits(tasks, share):
        return 0
    return flow.copy.batch_duration_ms
