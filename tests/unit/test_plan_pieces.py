"""The planner's pieces on their own: budget shares, first starts, the ranges of a micro-batch."""

from __future__ import annotations

from mm2py.source.plan.first_starts import first_starts
from mm2py.source.plan.shares import share_budget
from mm2py.source.plan.spark_offsets import Offsets
from mm2py.types import TP
from tests.fakes.planning import rig


def test_without_a_budget_every_partition_with_a_backlog_is_planned_to_its_end_and_only_those():
    asked: list[str] = []

    def size(key: str) -> float:
        asked.append(key)
        return 10.0

    ends, planned, total = share_budget({"a:0": 5, "a:1": 7, "b:0": 0}, {"a:0": 3, "a:1": 0, "b:0": 0}, size, None)
    assert ends == {"a:0": 8} and planned == total == 30.0
    assert asked == ["a:0"], "idle partitions cost no size lookup"


def test_under_a_budget_each_backlog_gets_its_share_and_at_least_one_offset():
    begin = {"a:0": 0, "a:1": 100, "a:2": 50}
    ends, planned, total = share_budget(begin, {"a:0": 1000, "a:1": 1, "a:2": 0}, lambda _k: 1.0, 101)
    assert total == 1001
    assert ends == {"a:0": 100, "a:1": 101}, "in proportion, the small one still moves"
    assert planned == 101


class Lister:
    def __init__(self, answers: dict[TP, int]):
        self.answers = answers
        self.asked: list[tuple[list[TP], str]] = []

    def list_offsets(self, tps: list[TP], spec: str = "latest") -> dict[TP, int]:
        self.asked.append((list(tps), spec))
        return {tp: self.answers[tp] for tp in tps}


def test_first_starts_follow_the_recorded_position_then_the_log_start_read_then_ask_the_rest():
    tps = [("t", 0), ("t", 1), ("t", 2)]
    lister = Lister({("t", 2): 40})
    starts = first_starts(tps, {("t", 0): 9}, "earliest", lister, {("t", 1): 3})
    assert starts == {"t:0": 10, "t:1": 3, "t:2": 40}
    assert lister.asked == [([("t", 2)], "earliest")], "only the partition without a known start is asked"


def test_latest_reset_asks_the_ends_and_ignores_log_starts():
    lister = Lister({("t", 0): 70})
    assert first_starts([("t", 0)], {}, "latest", lister, {("t", 0): 3}) == {"t:0": 70}
    assert lister.asked == [([("t", 0)], "latest")]


def test_ranges_and_idle_ranges_of_one_micro_batch_parse_its_offsets_once(monkeypatch):
    r = rig({"orders": 3})
    start = r.planner.initial_offsets()
    r.src.latest = {("orders", 0): 5, ("orders", 1): 0, ("orders", 2): 0}
    end = r.planner.latest_offsets(start, None)
    parsed: list[dict] = []
    parse = Offsets.parse

    def counted(raw: dict) -> Offsets:
        parsed.append(raw)
        return parse(raw)

    monkeypatch.setattr(Offsets, "parse", staticmethod(counted))
    planned = r.planner.ranges(start, end)
    idle = r.planner.idle_ranges(start, end, planned)
    assert [(x.key, x.start, x.end) for x in planned] == [("orders:0", 0, 5)]
    assert sorted((x.key, x.start, x.end) for x in idle) == [("orders:1", 0, 0), ("orders:2", 0, 0)]
    assert len(parsed) == 2, "start and end once for both calls"
    r.planner.ranges(dict(start), dict(end))
    assert len(parsed) == 4, "other dicts are parsed again"


def test_a_topic_that_appears_is_planned_after_the_refresh_that_finds_it():
    r = rig({"orders": 2})
    start = r.planner.initial_offsets()
    r.src.latest = {("orders", 0): 5, ("orders", 1): 5}
    start = r.planner.latest_offsets(start, None)
    r.src.counts["refunds"] = 2
    r.src.latest.update({("refunds", 0): 4, ("refunds", 1): 0})
    r.planner.catalogue.refresh_topics(force=True)
    end = r.planner.latest_offsets(start, None)
    assert set(Offsets.parse(end).positions) == {"orders:0", "orders:1", "refunds:0", "refunds:1"}
    assert [(x.key, x.start, x.end) for x in r.planner.ranges(start, end)] == [("refunds:0", 0, 4)]
