"""When a micro-batch's copy tasks tail (mm2py.source.copy.tail)."""

from __future__ import annotations

from dataclasses import replace

from mm2py.config.model import ClusterConfig, FlowConfig
from mm2py.source.copy.tail import TaskSlots, may_tail, tail_ms, tasks_to_tail

FLOW = FlowConfig(source=ClusterConfig("A", "a:9092"), target=ClusterConfig("B", "b:9092"))


def test_a_caught_up_at_least_once_flow_tails_while_a_slot_stays_free():
    assert FLOW.copy.tail_ms == 10000
    assert tail_ms(FLOW, provenance=False, caught_up=True, tasks=1, share=TaskSlots(2, 1)) == 10000
    assert tail_ms(FLOW, provenance=False, caught_up=True, tasks=2, share=TaskSlots(2, 1)) == 0
    assert tail_ms(FLOW, provenance=False, caught_up=True, tasks=1, share=TaskSlots(2, 2)) == 0
    assert tail_ms(FLOW, provenance=False, caught_up=True, tasks=2, share=TaskSlots(8, 3)) == 10000


def test_no_tail_behind_a_backlog_with_exactly_once_provenance_or_when_off():
    assert tail_ms(FLOW, provenance=False, caught_up=False, tasks=1, share=TaskSlots(4, 1)) == 0
    assert tail_ms(FLOW, provenance=False, caught_up=True, tasks=0, share=TaskSlots(4, 1)) == 0
    exactly_once = replace(FLOW, delivery=replace(FLOW.delivery, exactly_once="enabled"))
    no_tail = replace(FLOW, copy=replace(FLOW.copy, tail_ms=0))
    for flow, provenance in ((exactly_once, False), (FLOW, True), (no_tail, False)):
        assert not may_tail(flow, provenance)
        assert tail_ms(flow, provenance=provenance, caught_up=True, tasks=1, share=TaskSlots(4, 1)) == 0


def test_a_caught_up_micro_batch_gets_as_few_tasks_as_leave_a_slot_free():
    assert tasks_to_tail(2, 1) == 1 and tasks_to_tail(8, 1) == 7 and tasks_to_tail(8, 3) == 2
    assert tasks_to_tail(2, 2) == 1, "at least one task; tail_ms then says no tail"
    assert tail_ms(FLOW, provenance=False, caught_up=True, tasks=tasks_to_tail(2, 2), share=TaskSlots(2, 2)) == 0
