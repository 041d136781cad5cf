"""One idempotent producer id across a worker's copy tasks (mm2py.source.copy.producer_slot)."""

from __future__ import annotations

import pytest

from mm2py.errors import KafkaError
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.producer_slot import ROTATE_AT, KeptProducer, ProducerSlot
from mm2py.source.ranges import PartitionRange
from tests.fakes.copy_path import NOT_LEADER, FakeSource, IdempotentTarget, batch

LOGS = {("t", 0): [batch(o, 5) for o in range(0, 50, 5)]}


class CountingTarget(IdempotentTarget):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.ids_given = 0

    def init_producer_id(self) -> tuple[int, int]:
        self.ids_given += 1
        return 6 + self.ids_given, 0


def task(target: IdempotentTarget, slot: ProducerSlot, start: int, end: int,
         settings: CopySettings | None = None) -> Copier:
    c = Copier(FakeSource(LOGS), target, [PartitionRange("t", 0, start, end, "A.t")],  # type: ignore[arg-type]
               settings or CopySettings(offset_lag_max=1000, produce_backoff_ms=0), CopyMode(producer_slot=slot))
    c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
    return c


def test_the_next_task_continues_the_kept_id_and_its_sequences() -> None:
    target, slot = CountingTarget(), ProducerSlot()
    task(target, slot, 0, 25).run()
    second = task(target, slot, 25, 50)
    [result] = second.run()
    assert target.ids_given == 1, "one producer id for both tasks"
    assert second.producer_id == 7
    assert target.log[("A.t", 0)] == [(s, 5) for s in range(0, 50, 5)], "sequences go on where the first task stopped"
    assert result.next_offset == 50
    kept = slot.take()
    assert kept is not None and kept.next_sequence == {("A.t", 0): 50}


def test_a_failed_task_leaves_no_id_behind() -> None:
    target, slot = CountingTarget({10: (NOT_LEADER, 10**6, False)}), ProducerSlot()
    with pytest.raises(KafkaError):
        task(target, slot, 0, 50, CopySettings(produce_backoff_ms=1, delivery_timeout_ms=50)).run()
    assert slot.take() is None, "the next task asks the target for a fresh id"


def test_the_id_is_given_up_before_its_sequences_near_the_int32_limit() -> None:
    slot = ProducerSlot()
    slot.put_back(KeptProducer(7, 0, {("A.t", 0): ROTATE_AT}))
    assert slot.take() is None
    slot.put_back(KeptProducer(7, 0, {("A.t", 0): ROTATE_AT - 1}))
    assert slot.take() is not None
