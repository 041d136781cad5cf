"""Issue 45: a source log that diverged under the flow after an unclean leader election (KIP-320)."""

from __future__ import annotations

import struct
from collections.abc import Mapping

from structlog.testing import capture_logs

from mm2py.formats import OffsetSync, SourceOffset
from mm2py.kafka import batches as rb
from mm2py.kafka.leader_epochs import EpochEnd, epoch_answers, epoch_request
from mm2py.kafka.wire import FetchedPartition
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.plan.divergence import DivergenceCheck
from mm2py.source.plan.resets import CONTINUE, STOP
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.stores.ledger import TRUNCATED
from mm2py.stores.positions import PositionStore
from mm2py.types import TP
from tests.fakes.batches import build
from tests.fakes.copy_path import Answer, FakeSource, FakeTarget, batch
from tests.fakes.resets import Guarded, advance


class FakeEpochs:
    """The source's leaders: their epochs now, and where each ends an epoch asked about."""

    def __init__(self) -> None:
        self.current: dict[TP, int] = {}
        self.ends: dict[TP, EpochEnd] = {}
        self.asked: list[dict[TP, int]] = []

    def leader_epochs(self, tps: list[TP]) -> dict[TP, int]:
        return {tp: self.current[tp] for tp in tps if tp in self.current}

    def epoch_ends(self, epochs: Mapping[TP, int]) -> dict[TP, EpochEnd]:
        self.asked.append(dict(epochs))
        return {tp: self.ends[tp] for tp in epochs if tp in self.ends}


class Copied:
    def __init__(self, positions: dict[TP, int], epochs: dict[TP, int]):
        self.positions, self.epochs = positions, epochs


T0: TP = ("orders", 0)


def check(position: int, copied_epoch: int, leader: int, end: EpochEnd | None) -> tuple[DivergenceCheck, FakeEpochs]:
    source = FakeEpochs()
    source.current = {T0: leader}
    if end is not None:
        source.ends = {T0: end}
    copied = Copied({T0: position}, {T0: copied_epoch})
    return DivergenceCheck(source, lambda: copied), source


def test_a_leader_epoch_no_newer_than_the_copied_one_asks_nothing():
    c, source = check(1999, 3, 3, None)
    assert c.find({T0: 2000}, {T0: 2500}) == [] and source.asked == []
    c.copied().epochs.clear()  # unknown epoch (MM2's position, a reset's): the log-end check only
    source.current[T0] = 9
    assert c.find({T0: 2000}, {T0: 2500}) == [] and source.asked == []


def test_an_epoch_ending_below_the_copied_position_is_a_divergence_there():
    c, source = check(1999, 3, 5, EpochEnd(0, 3, 1500))
    [reset] = c.find({T0: 2000}, {T0: 2600})
    assert source.asked == [{T0: 3}], "the epoch of the last batch copied"
    assert (reset.kind, reset.diverged_at, reset.position, reset.log_end) == (TRUNCATED, 1500, 2000, 2600)
    assert (reset.copied_epoch, reset.leader_epoch, reset.resumes_from(0)) == (3, 5, 1500)
    assert reset.resumes_from(1700) == 1700, "never below the log start"
    assert len(c.find({T0: 2000}, {T0: 2600})) == 1, "found again until the guard acts on it"


def test_a_consistent_answer_is_asked_once_per_leader_epoch_change():
    c, source = check(1999, 3, 4, EpochEnd(0, 3, 2000))  # a clean election: epoch 3 ends at the position
    assert c.find({T0: 2000}, {T0: 2600}) == [] and c.find({T0: 2000}, {T0: 2600}) == []
    assert len(source.asked) == 1
    source.current[T0] = 5  # another election
    assert c.find({T0: 2000}, {T0: 2600}) == [] and len(source.asked) == 2


def test_an_undefined_end_falls_back_to_the_log_end_check():
    c, _ = check(1999, 3, 5, EpochEnd(0, -1, -1))
    assert c.find({T0: 2000}, {T0: 2600}) == []


def test_continue_copies_a_diverged_log_again_from_the_divergence_point_and_names_the_range():
    g = Guarded({"orders": 1}, stored={T0: 1999})
    source = FakeEpochs()
    g.guard.divergence = DivergenceCheck(source, lambda: Copied(dict(g.r.tail.positions), {T0: 3}))
    g.r.src.latest = {T0: 2000}
    g.r.tail.positions = {T0: 1999}
    source.current = {T0: 3}
    end = advance(g, g.r.planner.initial_offsets())
    # unclean election: the new leader (epoch 5) had the log up to 1500, and wrote on past 2000
    source.current, source.ends = {T0: 5}, {T0: EpochEnd(0, 3, 1500)}
    g.r.src.latest, g.r.src.earliest = {T0: 2600}, {T0: 0}
    g.r.dst.latest = {("A.orders", 0): 2000}
    with capture_logs() as logs:
        nxt = g.r.planner.latest_offsets(end, None)
    assert [(x.start, x.end, x.exact) for x in g.r.planner.ranges(end, nxt)] == [(1500, 2600, True)]
    [entry] = g.ledger.appended[-1][0]
    assert (entry.kind, entry.action) == (TRUNCATED, CONTINUE)
    assert entry.source_old == {"start": 1500, "end": 2000, "leader_epoch": 3}, "the mirrored records gone"
    assert entry.source_new == {"start": 1500, "end": 2600, "diverged_at": 1500, "leader_epoch": 5}
    assert entry.target_old == {"end": 2000} and entry.target_new == {"start": 2000}
    assert g.saved == [{T0: 1499}] and g.syncs == [OffsetSync("orders", 0, 1500, 2000)]
    [line] = [x for x in logs if x["log_level"] == "warning" and x.get("kind") == TRUNCATED]
    assert "diverged at offset 1500" in line["event"] and "from offset 1500 of the new log" in line["event"]


def test_stop_leaves_a_diverged_partition_unplanned_and_asks_no_more():
    g = Guarded({"orders": 1}, policy=STOP, stored={T0: 1999})
    source = FakeEpochs()
    g.guard.divergence = DivergenceCheck(source, lambda: Copied({T0: 1999}, {T0: 3}))
    g.r.src.latest = {T0: 2000}
    end = advance(g, g.r.planner.initial_offsets())
    source.current, source.ends = {T0: 5}, {T0: EpochEnd(0, 3, 1500)}
    g.r.src.latest = {T0: 2600}
    nxt = advance(g, end)
    assert nxt["p"] == {"orders:0": 2000} and g.guard.stopped() == {T0}
    advance(g, nxt)
    assert len(source.asked) == 1


# -- the epoch's way from the copy task to the planner -------------------------------------


def with_epoch(buf: bytes, epoch: int) -> bytes:
    out = bytearray(buf)
    struct.pack_into(">i", out, 12, epoch)  # partitionLeaderEpoch: outside the CRC
    return bytes(out)


def test_a_batch_view_carries_its_partition_leader_epoch():
    buf = with_epoch(build(0, 3), 7) + with_epoch(build(3, 2), 8)
    assert [v.leader_epoch for v in rb.split_batches(buf)] == [7, 8]


def test_a_copy_reports_the_epoch_of_the_batch_holding_its_last_offset():
    part = PartitionCopy.of(PartitionRange("orders", 0, 0, 100, "A.orders"))
    assert part.result().leader_epoch == -1, "nothing read"
    for base, epoch in ((0, 3), (10, 3), (20, 5), (30, 5)):
        part.read_batch(base, epoch)
    assert part.epochs == [(0, 3), (20, 5)]
    assert (part.epoch_below(20), part.epoch_below(21), part.epoch_below(0)) == (3, 5, -1)
    part.next_fetch = 40
    assert part.result().leader_epoch == 5
    part.stall(20, 10, "too large")
    assert part.result().leader_epoch == 3, "a stall's position is before the batch it stopped at"
    packed = RangeResult.unpack(RangeResult.pack([part.result()])[0])
    assert packed[0].leader_epoch == 3


def test_a_position_carries_its_epoch_beside_mm2s_offset():
    record = SourceOffset("A", "orders", 0, 1999, leader_epoch=5)
    assert record.value_bytes() == b'{"offset":1999,"leaderEpoch":5}'
    assert SourceOffset("A", "orders", 0, 1999).value_bytes() == b'{"offset":1999}', "MM2's bytes unchanged"
    assert SourceOffset.from_record(record.key_bytes(), record.value_bytes()) == record
    store = PositionStore.__new__(PositionStore)
    store.source_alias = "A"
    positions: dict[TP, int] = {}
    epochs: dict[TP, int] = {}
    store._apply(positions, record.key_bytes(), record.value_bytes(), epochs)
    assert (positions, epochs) == ({T0: 1999}, {T0: 5})
    store._apply(positions, record.key_bytes(), b'{"offset":2999}', epochs)  # MM2 took over
    assert (positions, epochs) == ({T0: 2999}, {})


def test_offsets_for_leader_epoch_asks_as_a_consumer():
    request = epoch_request({("t", 1): 4, ("t", 0): 3})
    assert request.replica_id == -1  # type: ignore[attr-defined]
    [topic] = request.topics  # type: ignore[attr-defined]
    assert [(p.partition, p.leader_epoch, p.current_leader_epoch) for p in topic.partitions] == [
        (0, 3, -1), (1, 4, -1)]

    class Answer:
        def __init__(self, **kw: object):
            self.__dict__.update(kw)

    response = Answer(topics=[Answer(topic="t", partitions=[
        Answer(error_code=0, partition=0, leader_epoch=3, end_offset=1500)])])
    assert epoch_answers(response) == {("t", 0): EpochEnd(0, 3, 1500)}


# -- a leader that moves while a copy runs -------------------------------------------------


class MovingSource(FakeSource):
    """Broker 1 leads, until it answers NOT_LEADER at ``moves_at``; broker 4 leads from then on."""

    def __init__(self, logs: dict[TP, list[bytes]], moves_at: int | None):
        super().__init__(logs)
        self.moves_at, self.leader = moves_at, 1

    def leaders(self, topics: set[str]) -> dict[TP, int]:
        return {tp: self.leader for tp in self.logs if tp[0] in topics}

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        if node == 1 and self.moves_at is not None and self.moves_at in positions.values():
            self.leader = 4
            return Answer({tp: FetchedPartition(6, 0, 0, 0, (), b"") for tp in positions}, is_done=True)
        return super().fetch(node, positions, **kw)


def test_a_copy_ends_where_a_newer_leader_epoch_comes_from_another_broker():
    logs = {("t", 0): [with_epoch(batch(o, 10), 3 if o < 20 else 5) for o in range(0, 40, 10)]}
    for moves_at, copied, epoch in ((20, [0, 10], 3), (None, [0, 10, 20, 30], 5)):
        target = FakeTarget()
        c = Copier(MovingSource(logs, moves_at), target, [PartitionRange("t", 0, 0, 40, "A.t")],  # type: ignore[arg-type]
                   CopySettings(offset_lag_max=1000))
        c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
        [result] = c.run()
        # moved: the next plan asks broker 4 where epoch 3 ends before offset 20 on is copied; an epoch
        # change read from one broker (an election long past) is copied through
        assert target.logs[("A.t", 0)] == copied
        assert (result.next_offset, result.leader_epoch, result.stall_offset) == (copied[-1] + 10, epoch, -1)


def test_a_diverged_stop_found_again_after_a_restart_is_recorded_once():
    first = Guarded({"orders": 1}, policy=STOP, stored={T0: 1999})
    source = FakeEpochs()
    first.guard.divergence = DivergenceCheck(source, lambda: Copied({T0: 1999}, {T0: 3}))
    first.r.src.latest = {T0: 2000}
    end = advance(first, first.r.planner.initial_offsets())
    source.current, source.ends = {T0: 5}, {T0: EpochEnd(0, 3, 1500)}
    first.r.src.latest = {T0: 2600}
    advance(first, end)
    [stop] = [e for entries, _ in first.ledger.appended for e in entries]
    assert (stop.kind, stop.action, stop.source_new["diverged_at"]) == (TRUNCATED, STOP, 1500)
    # restarted: its position still carries epoch 3, so the new guard finds the divergence again
    again = Guarded({"orders": 1}, policy=STOP, ledger=first.ledger, stored={T0: 1999})
    again.guard.divergence = DivergenceCheck(source, lambda: Copied({T0: 1999}, {T0: 3}))
    again.r.src.latest = {T0: 2600}
    with capture_logs() as logs:
        start = again.r.planner.initial_offsets()
        assert again.r.planner.ranges(start, again.r.planner.latest_offsets(start, None)) == []
    assert [e for entries, _ in again.ledger.appended for e in entries] == [stop], "recorded once"
    [error] = [x for x in logs if x["log_level"] == "error"]
    assert "diverged at offset 1500, below the flow's position 2000" in error["event"], error
    assert len(source.asked) == 2, "asked once per run"
