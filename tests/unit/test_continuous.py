"""Copy intervals on a backlog (mm2py.source.copy.continuous): when, how they are planned and measured."""

from __future__ import annotations

from dataclasses import replace

from mm2py.config.model import ClusterConfig, FlowConfig
from mm2py.source.copy.continuous import fits, interval_ms, may_continue
from mm2py.source.copy.tail import TaskSlots
from mm2py.source.plan.planner import ASSUMED_BYTES_PER_OFFSET
from mm2py.source.plan.sizing import PLANNED_SHARE, BatchSizer, IntervalMeter
from tests.fakes.planning import rig

OFF = FlowConfig(source=ClusterConfig("A", "a:9092"), target=ClusterConfig("B", "b:9092"))
FLOW = replace(OFF, copy=replace(OFF.copy, continuous_enabled=True))


def test_a_backlog_micro_batch_of_an_at_least_once_flow_is_an_interval_when_its_tasks_fit_the_slots():
    assert not OFF.copy.continuous_enabled, "off by default"
    assert interval_ms(FLOW, provenance=False, backlog=True, tasks=2, share=TaskSlots(2, 1)) == 2000
    assert interval_ms(FLOW, provenance=False, backlog=True, tasks=3, share=TaskSlots(2, 1)) == 0, "one waits a slot"
    assert interval_ms(FLOW, provenance=False, backlog=True, tasks=2, share=TaskSlots(4, 3)) == 0
    assert interval_ms(FLOW, provenance=False, backlog=False, tasks=1, share=TaskSlots(2, 1)) == 0, "it tails"
    assert interval_ms(OFF, provenance=False, backlog=True, tasks=1, share=TaskSlots(2, 1)) == 0
    assert not fits(0, TaskSlots(2, 1)) and fits(2, TaskSlots(4, 2)) and fits(1, TaskSlots(1, 0))


def test_no_interval_with_provenance_or_no_duration_while_exactly_once_has_intervals():
    exactly_once = replace(FLOW, delivery=replace(FLOW.delivery, exactly_once="enabled"))
    no_duration = replace(FLOW, copy=replace(FLOW.copy, batch_duration_ms=0))
    assert may_continue(FLOW, False) and may_continue(exactly_once, False)
    for flow, provenance in ((exactly_once, True), (FLOW, True), (no_duration, False)):
        assert not may_continue(flow, provenance)
        assert interval_ms(flow, provenance=provenance, backlog=True, tasks=1, share=TaskSlots(2, 1)) == 0


def test_an_interval_is_measured_by_what_it_copied_not_by_what_it_planned():
    meter = IntervalMeter()
    meter.planned(10.0, {"t:0": 100, "t:1": 50})
    assert meter.measure({"t:0": 900, "t:1": 50}, lambda k: 2.0) is None, "the last plan was no interval"
    meter.planned(12.0, {"t:0": 100, "t:1": 50})
    meter.continuing()
    # t:0 copied 800 offsets, t:1 went back (a reset) and counts 0, t:2 is new and was not in the interval
    assert meter.measure({"t:0": 900, "t:1": 10, "t:2": 5}, lambda k: 2.0) == (12.0, 1600.0)
    assert meter.measure({"t:0": 950}, lambda k: 2.0) is None, "measured once"

    sizer = BatchSizer(1 << 40, 2.0, budget=100e6)
    sizer.planned(0.0, 100, 1 << 30)  # the first batch is not measured
    sizer.planned(1.0, 1000, 1 << 30)  # far below its budget: not measured either
    sizer.unmeasured()  # the interval's plan
    sizer.copied(1.0, 400e6)  # it copied 400 MB by the next plan, 2 s later
    assert sizer.next_budget(3.0) == 400e6, "up at once: 2 s of data at 200 MB/s"


def test_an_interval_plans_a_share_of_its_budget_and_hands_what_it_copied_to_the_sizer():
    r = rig({"t": 2})
    r.planner.continuous = True
    r.src.latest = {("t", 0): 100_000, ("t", 1): 100_000}
    start = r.planner.initial_offsets()
    budget = 4000 * ASSUMED_BYTES_PER_OFFSET
    end = r.planner.latest_offsets(start, budget)
    assert end["p"] == {"t:0": 1500, "t:1": 1500}, f"{PLANNED_SHARE} of the budget, shared by backlog"
    assert not r.planner.caught_up and not r.planner.once
    r.planner.ranges(start, end)
    r.planner.tailing(2.0, interval=True)
    measured: list[tuple[float, float]] = []
    r.planner.sizer.copied = lambda when, copied: measured.append((when, copied))  # type: ignore[method-assign]
    r.tail.positions = {("t", 0): 5999, ("t", 1): 1499}  # t:0 copied past its end until the interval closed
    again = r.planner.latest_offsets(end, budget)
    assert again["r"] == {"t:0": [6000, True]}, "the next interval starts where the acknowledged writes ended"
    assert [copied for _, copied in measured] == [(6000 + 1500) * ASSUMED_BYTES_PER_OFFSET]
