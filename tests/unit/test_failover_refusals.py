"""Issue 45: failover refuses a committed offset past a source log gone back, and translates the rest exactly.

The scene, as on real brokers (tests/integration/test_unclean_election.py): the flow copied a
partition's records 0..499 under leader epoch 0, one offset sync per 100 records; an unclean
election made a stale replica leader at epoch 2, whose log leaves the copied one at offset 300
and has grown past the flow's position since. In-memory collaborators: the source's answers
(log ends, leader epochs, OffsetsForLeaderEpoch) and the flow's syncs (``SyncIndex``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mm2py.checkpoint.translation import SyncIndex
from mm2py.errors import KafkaError
from mm2py.formats import OffsetSync
from mm2py.kafka.leader_epochs import EpochEnd
from mm2py.ops.failover import plan_rows
from mm2py.ops.refusals import Standing, diverged
from mm2py.types import TP

T0: TP = ("orders", 0)
POSITION, DIVERGED_AT, NEW_END = 499, 300, 700  # last offset copied; where the new log leaves it; its end now


class Source:
    """The source's leader as the failover asks it: log ends, leader epochs, where an epoch ends."""

    def __init__(self, ends: dict[TP, int], epochs: dict[TP, int], epoch_ends: dict[TP, EpochEnd],
                 down: bool = False):
        self.ends, self.epochs, self.answers, self.down = ends, epochs, epoch_ends, down
        self.asked: list[dict[TP, int]] = []

    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        if self.down:
            raise KafkaError("source down")
        return {tp: self.ends[tp] for tp in tps if tp in self.ends}

    def leader_epochs(self, tps: list[TP]) -> dict[TP, int]:
        return {tp: self.epochs[tp] for tp in tps if tp in self.epochs}

    def epoch_ends(self, epochs: Mapping[TP, int]) -> dict[TP, EpochEnd]:
        self.asked.append(dict(epochs))
        return {tp: self.answers[tp] for tp in epochs if tp in self.answers}


def syncs() -> SyncIndex:
    """The flow's syncs: records 0..499 landed at the same offsets, a sync every 100, the end at 500."""
    index = SyncIndex()
    for up in range(0, POSITION + 2, 100):
        index.add(OffsetSync(T0[0], T0[1], up, up))
    return index


def plan(committed: int, standing: Standing) -> tuple[int | None, str]:
    [row] = plan_rows({T0: committed}, standing, lambda t: f"A.{t}", syncs().translate, "syncs")
    assert (row.source_topic, row.target_topic, row.partition, row.source_offset) == ("orders", "A.orders", 0,
                                                                                      committed)
    return row.target_offset, row.how


def after_unclean_election() -> Standing:
    source = Source({T0: NEW_END}, {T0: 2}, {T0: EpochEnd(0, 0, DIVERGED_AT)})
    positions, copied_epochs = {T0: POSITION}, {T0: 0}
    split = diverged(source, positions, copied_epochs, [T0])
    assert source.asked == [{T0: 0}], "the leader is asked where the copied epoch ends"
    assert split[T0].diverged_at == DIVERGED_AT
    return Standing(positions, {T0: NEW_END}, split)


def test_a_group_past_the_divergence_point_is_refused_naming_topic_partition_and_offsets() -> None:
    standing = after_unclean_election()
    for committed in (DIVERGED_AT, DIVERGED_AT + 50, POSITION + 100):
        target, how = plan(committed, standing)
        assert target is None, (committed, how)
        assert how.startswith(f"refused: source log diverged at offset {DIVERGED_AT} of orders-0 "), how
        assert "leader epoch 0 -> 2" in how and f"below the flow's position {POSITION + 1}" in how, how
        assert f"the committed offset {committed} is at or past it" in how, how


def test_a_group_below_the_divergence_point_translates_exactly() -> None:
    standing = after_unclean_election()
    for committed in (0, 150, DIVERGED_AT - 1):
        assert plan(committed, standing) == (committed, "syncs"), committed


def test_a_log_that_ends_below_the_position_refuses_every_offset_naming_it() -> None:
    # a truncation the new log has not grown past: its end tells, whatever the epochs
    standing = Standing({T0: POSITION}, {T0: DIVERGED_AT})
    for committed in (0, 150, DIVERGED_AT):
        target, how = plan(committed, standing)
        assert target is None, (committed, how)
        assert how == (f"refused: source log of orders-0 ends at offset {DIVERGED_AT}, below the flow's mirrored "
                       f"position {POSITION + 1} (truncated or re-created), and the flow has not taken it up yet "
                       f"(mm2py-ledger): the committed offset {committed} would translate through the old log's "
                       "syncs; not translated"), how


def test_a_leader_that_kept_the_copied_epoch_or_a_source_down_refuses_nothing() -> None:
    # a leader change without truncation: the copied epoch ends past the position
    clean = Source({T0: NEW_END}, {T0: 2}, {T0: EpochEnd(0, 0, NEW_END)})
    assert diverged(clean, {T0: POSITION}, {T0: 0}, [T0]) == {}
    # no leader change: not even asked
    same = Source({T0: NEW_END}, {T0: 0}, {})
    assert diverged(same, {T0: POSITION}, {T0: 0}, [T0]) == {} and same.asked == []
    # the source does not answer: not checked (the caller has no log ends either)
    assert diverged(Source({}, {}, {}, down=True), {T0: POSITION}, {T0: 0}, [T0]) == {}
    standing = Standing({T0: POSITION}, {T0: NEW_END})
    assert plan(DIVERGED_AT + 50, standing) == (DIVERGED_AT + 50, "syncs")
    assert plan(POSITION + 1, standing) == (POSITION + 1, "syncs"), "the end of what is mirrored"
