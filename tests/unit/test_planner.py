"""Planning micro-batches: BatchPlanner, TopicCatalogue and StallBook over small fakes of our interfaces."""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

from mm2py.errors import KafkaError
from mm2py.kafka.resources import TopicConfigEntry
from mm2py.source.plan.ahead import AHEAD_SECONDS
from mm2py.source.plan.planner import ASSUMED_BYTES_PER_OFFSET
from mm2py.source.plan.stalls import STALL_REFRESH_SECONDS, PlannedRange, StallBook
from mm2py.source.ranges import PartitionRange
from mm2py.types import TP
from tests.fakes.planning import Clock, FakeTail, rig

# -- construction and first plan ---------------------------------------------------------


def test_constructors_do_no_io_and_the_positions_topic_is_made_on_first_use():
    r = rig({"orders": 1})
    assert r.events == [] and r.tail.reads == 0
    r.planner.initial_offsets()
    assert r.events[0] == ("store", "ensure_topic", "dst"), "before the first refresh"
    r.planner.latest_offsets(r.planner.initial_offsets(), None)
    assert r.events.count(("store", "ensure_topic", "dst")) == 1


def test_heartbeats_topics_are_mirrored_whatever_topics_says_as_mm2():
    """MM2's shouldReplicateTopic: ``heartbeats.replication.enabled`` (default true) lets them past the filter."""
    source = {"orders": 1, "payments": 1, "heartbeats": 1, "C.heartbeats": 1, "B.heartbeats": 1}
    r = rig(source, extra="A->B.topics = orders\nA->B.topics.exclude = .*heartbeats\n")
    r.planner.prepare_target()
    # B.heartbeats came from B: sending it back would be a cycle
    assert sorted(name for name, *_ in r.dst.created) == ["A.C.heartbeats", "A.heartbeats", "A.orders"]
    off = rig(source, extra="A->B.topics = orders\nA->B.heartbeats.replication.enabled = false\n")
    off.planner.prepare_target()
    assert [name for name, *_ in off.dst.created] == ["A.orders"]


def test_first_plan_starts_from_recorded_positions_else_earliest_both_exactly():
    """A log start is a record position too: DeleteRecords leaves it inside a batch (issue 45)."""
    r = rig({"orders": 2}, stored={("orders", 0): 41})
    r.src.earliest = {("orders", 1): 5}
    r.src.latest = {("orders", 0): 100, ("orders", 1): 70}
    assert r.planner.initial_offsets() == {"p": {"orders:0": 42, "orders:1": 5}, "exact": ["orders:0", "orders:1"],
                                           "new": {}}
    assert r.store.loads == 1


def test_a_first_range_from_the_log_start_is_exact_and_the_next_one_starts_at_its_boundary():
    r = rig({"orders": 1})
    r.src.earliest = {("orders", 0): 500}  # DeleteRecords moved it, maybe inside a batch
    r.src.latest = {("orders", 0): 2000}
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    [first] = r.planner.ranges(start, end)
    assert (first.start, first.end, first.exact) == (500, 2000, True)
    r.tail.positions = {("orders", 0): 1999}
    r.src.latest = {("orders", 0): 2500}
    later = r.planner.latest_offsets(end, None)
    [second] = r.planner.ranges(end, later)
    assert (second.start, second.end, second.exact) == (2000, 2500, False), "the range before owns its batch"


def test_a_partition_first_seen_mid_run_and_planned_at_once_starts_exactly():
    r = rig({"orders": 1}, stored={("refunds", 1): 6}, extra="A->B.refresh.topics.interval.seconds = 0\n")
    r.src.latest = {("orders", 0): 10}
    start = r.planner.initial_offsets()
    r.src.counts["refunds"] = 2
    r.src.earliest.update({("refunds", 0): 3})
    r.src.latest.update({("refunds", 0): 20, ("refunds", 1): 20})
    end = r.planner.latest_offsets(start, None)
    assert end["new"] == {"refunds:0": 3, "refunds:1": 7}
    planned = {x.partition: (x.start, x.exact) for x in r.planner.ranges(start, end) if x.topic == "refunds"}
    assert planned == {0: (3, True), 1: (7, True)}, "the log start and the recorded position are record positions"


def test_first_plan_without_a_recorded_position_follows_auto_offset_reset_latest():
    r = rig({"orders": 2}, stored={("orders", 0): 41}, extra="A.consumer.auto.offset.reset = latest\n")
    r.src.earliest = {("orders", 1): 5}
    r.src.latest = {("orders", 0): 100, ("orders", 1): 70}
    assert r.planner.initial_offsets()["p"] == {"orders:0": 42, "orders:1": 70}


def test_first_range_after_a_recorded_position_is_exact_and_later_ones_are_not():
    r = rig({"orders": 1}, stored={("orders", 0): 41})
    r.src.latest = {("orders", 0): 100}
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    assert end["p"] == {"orders:0": 100} and end["exact"] == []
    [first] = r.planner.ranges(start, end)
    assert (first.start, first.end, first.exact) == (42, 100, True)
    r.tail.positions = {("orders", 0): 99}  # copied through
    r.src.latest = {("orders", 0): 150}
    later = r.planner.latest_offsets(end, None)
    [second] = r.planner.ranges(end, later)
    assert (second.start, second.end, second.exact) == (100, 150, False)


# -- remote topics ------------------------------------------------------------------------


def test_remote_topics_are_created_a_hundred_per_request():
    from mm2py.source.plan.catalogue import CREATE_AT_ONCE

    r = rig({f"t{i:03d}": 2 for i in range(250)})
    r.planner.initial_offsets()
    requests = [e[2] for e in r.events if e[:2] == ("dst", "create_topics")]
    assert [len(names) for names in requests] == [CREATE_AT_ONCE, CREATE_AT_ONCE, 50]
    assert sorted(n for names in requests for n in names) == sorted(f"A.t{i:03d}" for i in range(250))


def test_prepare_target_creates_only_what_the_first_plan_would_and_that_plan_finds_it_made():
    r = rig({"orders": 3, "refunds": 2, "mm2-offsets.B.internal": 1}, target={"A.refunds": 2})
    r.planner.prepare_target()
    assert r.dst.created == [("A.orders", 3, 2, {})]
    assert r.events[0] == ("store", "ensure_topic", "dst")
    assert r.catalogue.partitions == {}, "a topic is planned only after a refresh"
    assert not any(e[:2] == ("src", "list_offsets") for e in r.events), "no sizes, no offsets"
    r.planner.initial_offsets()
    assert len(r.dst.created) == 1 and r.events.count(("store", "ensure_topic", "dst")) == 1
    assert r.catalogue.partitions == {"orders": 3, "refunds": 2}


def test_a_remote_topic_created_meanwhile_by_another_client_is_waited_for_not_skipped():
    # the driver's TargetPreparation and the planner's first refresh may create the same topics
    r = rig({"orders": 3, "refunds": 2})
    listed = r.dst.topics

    def listed_before_the_other_client_created_one() -> dict[str, int]:
        topics = listed()
        r.dst.counts["A.refunds"] = 2  # the other client's request lands between listing and creating
        return topics

    r.dst.topics = listed_before_the_other_client_created_one
    r.planner.initial_offsets()
    assert [name for name, *_ in r.dst.created] == ["A.orders", "A.refunds"]
    assert ("dst", "wait_for_leaders", (("A.refunds", 2),)) in r.events, "its leaders may still be elected"


def test_replication_factor_above_the_target_s_brokers_is_capped_once_per_creation():
    r = rig({"orders": 3, "refunds": 2}, extra="replication.factor = 5\n")
    with capture_logs() as logs:
        r.planner.initial_offsets()
    assert {(name, rf) for name, _, rf, _ in r.dst.created} == {("A.orders", 3), ("A.refunds", 3)}
    capped = [e for e in logs if e["event"] == "replication.factor capped"]
    assert [(e["topics"], e["configured"], e["brokers"]) for e in capped] == [(2, 5, 3)]


def test_remote_topic_is_created_with_the_source_partition_count_before_its_ranges_are_planned():
    r = rig({"orders": 3}, extra="A->B.refresh.topics.interval.seconds = 0\n")
    r.src.latest = {("orders", p): 10 for p in range(3)}
    start = r.planner.initial_offsets()
    assert r.dst.created == [("A.orders", 3, 2, {})]
    created_at = r.events.index(("dst", "create_topic", "A.orders"))
    listed_at = next(i for i, e in enumerate(r.events) if e[:2] == ("src", "list_offsets"))
    assert created_at < listed_at, "no offsets of orders are planned before A.orders exists"

    # a topic that appears later is created before the micro-batch that first plans it
    r.src.counts["refunds"] = 2
    r.src.latest.update({("refunds", 0): 4, ("refunds", 1): 6})
    end = r.planner.latest_offsets(start, None)
    assert r.dst.created[-1] == ("A.refunds", 2, 2, {})
    assert end["new"] == {"refunds:0": 0, "refunds:1": 0}
    ranges = r.planner.ranges(start, end)
    assert {(x.target_topic, x.partition) for x in ranges if x.topic == "refunds"} == {("A.refunds", 0),
                                                                                       ("A.refunds", 1)}
    assert all(x.partition < r.dst.counts[x.target_topic] for x in ranges)


def test_smaller_remote_topic_with_recorded_positions_is_grown():
    r = rig({"orders": 2}, target={"A.orders": 1}, stored={("orders", 0): 5})
    r.planner.initial_offsets()
    assert r.dst.grown == [("A.orders", 2)] and r.catalogue.rehash == {}
    assert r.store.loads == 1, "read once for the mismatch decision and the first starts"


def test_smaller_remote_topic_of_someone_else_fails_the_flow_or_is_hashed_into():
    with pytest.raises(KafkaError, match="partition.mismatch = hash"):
        rig({"orders": 2}, target={"A.orders": 1}).planner.initial_offsets()
    r = rig({"orders": 2}, target={"A.orders": 1}, extra="A->B.partition.mismatch = hash\n")
    r.src.latest = {("orders", 0): 3, ("orders", 1): 3}
    start = r.planner.initial_offsets()
    assert r.dst.grown == [] and r.catalogue.rehash == {"orders": 1}
    ranges = r.planner.ranges(start, r.planner.latest_offsets(start, None))
    assert {x.target_partitions for x in ranges} == {1}


def test_ranges_carry_the_policy_remote_topic_and_its_batch_limit():
    r = rig({"orders": 1, "events": 1}, extra="replication.policy.separator = _\n")
    r.dst.configs = {"A_orders": [TopicConfigEntry("max.message.bytes", "2000000", is_default=False)]}
    r.src.latest = {("orders", 0): 10, ("events", 0): 20}
    start = r.planner.initial_offsets()
    ranges = r.planner.ranges(start, r.planner.latest_offsets(start, None))
    assert all(isinstance(x, PartitionRange) for x in ranges)
    assert sorted((x.topic, x.target_topic, x.start, x.end, x.max_batch_bytes, x.target_partitions)
                  for x in ranges) == [("events", "A_events", 0, 20, 0, 0), ("orders", "A_orders", 0, 10, 2000000, 0)]


def test_bytes_per_offset_come_from_the_log_sizes():
    r = rig({"t": 2}, log_sizes=lambda topics: {("t", 0): 2000} if topics == {"t"} else {})
    r.src.latest = {("t", 0): 100, ("t", 1): 100}
    r.planner.initial_offsets()
    assert r.catalogue.bytes_per_offset == {"t:0": 20.0}
    assert r.planner.estimated_bytes(PartitionRange("t", 0, 0, 10, "A.t")) == 200
    assert r.planner.estimated_bytes(PartitionRange("t", 1, 0, 10, "A.t")) == 10 * ASSUMED_BYTES_PER_OFFSET


def test_known_topics_limits_and_sizes_are_read_again_only_when_forced_or_due(monkeypatch):
    asked: list[set[str]] = []
    r = rig({"a": 2}, extra="A->B.refresh.topics.interval.seconds = 0\n",
            log_sizes=lambda topics: asked.append(set(topics)) or {})
    r.planner.initial_offsets()
    r.src.counts["b"] = 1
    r.catalogue.refresh_topics()
    r.catalogue.refresh_topics()
    assert asked == [{"a"}, {"b"}], "a refresh sizes the topics new to it, and none when nothing changed"
    r.src.counts["a"] = 3
    r.catalogue.refresh_topics()
    r.catalogue.refresh_topics(force=True)
    assert asked[2:] == [{"a"}, {"a", "b"}], "more partitions, and a forced refresh (a stall), read again"
    monkeypatch.setattr("mm2py.source.plan.catalogue.SIZES_SECONDS", 0)
    r.catalogue.refresh_topics()
    assert asked[4:] == [{"a", "b"}], "and every SIZES_SECONDS"


def test_unreadable_log_sizes_plan_with_the_default():
    def fail(topics: set[str]) -> dict[TP, int]:
        raise KafkaError("no", cluster="A")

    r = rig({"t": 1}, log_sizes=fail)
    r.src.latest = {("t", 0): 100}
    with capture_logs() as logs:
        r.planner.initial_offsets()
    assert r.catalogue.bytes_per_offset == {}
    assert any("could not size" in e["event"] for e in logs)


# -- byte budget ------------------------------------------------------------------------


def test_byte_budget_is_shared_in_proportion_to_backlog_and_no_partition_starves():
    r = rig({"t": 4})
    r.src.latest = {("t", 0): 9000, ("t", 1): 1000, ("t", 2): 5, ("t", 3): 0}
    start = r.planner.initial_offsets()
    backlog_bytes = 10005 * ASSUMED_BYTES_PER_OFFSET
    end = r.planner.latest_offsets(start, backlog_bytes // 10)
    assert end["p"] == {"t:0": 900, "t:1": 100, "t:2": 1, "t:3": 0}
    # without a cap (or within it) every backlog is planned whole
    assert r.planner.latest_offsets(start, None)["p"] == {"t:0": 9000, "t:1": 1000, "t:2": 5, "t:3": 0}


# -- stalls -------------------------------------------------------------------------------


def test_partition_that_stopped_short_is_planned_again_from_where_its_copy_stopped():
    r = rig({"t": 1})
    r.src.latest = {("t", 0): 100}
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    [planned] = r.planner.ranges(start, end)
    assert (planned.start, planned.end) == (0, 100)

    r.tail.positions = {("t", 0): 39}  # the copy stopped after offset 39
    r.src.latest = {("t", 0): 150}
    before = r.events.count(("src", "topics"))
    again = r.planner.latest_offsets(end, None)
    assert again["r"] == {"t:0": [40, True]} and again["rn"] == 1 and again["p"] == {"t:0": 150}
    assert r.events.count(("src", "topics")) == before + 1, "a new stall refreshes topics at once"
    [restarted] = r.planner.ranges(end, again)
    assert (restarted.start, restarted.end, restarted.exact) == (40, 150, True)

    # copied through this time: planned on from Spark's offset
    r.tail.positions = {("t", 0): 149}
    r.src.latest = {("t", 0): 160}
    on = r.planner.latest_offsets(again, None)
    assert "r" not in on
    [next_range] = r.planner.ranges(again, on)
    assert (next_range.start, next_range.end) == (150, 160)


def test_partition_stopping_twice_at_one_offset_is_held_until_the_stall_refresh():
    r = rig({"t": 1})
    r.src.latest = {("t", 0): 100}
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    r.planner.ranges(start, end)
    r.tail.positions = {("t", 0): 39}
    again = r.planner.latest_offsets(end, None)
    r.planner.ranges(end, again)

    held = r.planner.latest_offsets(again, None)  # stopped at 40 again
    assert held["p"] == {"t:0": 40} and "r" not in held and held["exact"] == ["t:0"]
    assert r.planner.ranges(again, held) == []
    assert r.planner.latest_offsets(held, None)["p"] == {"t:0": 40}, "still held"

    r.clock.now += STALL_REFRESH_SECONDS
    retried = r.planner.latest_offsets(held, None)
    [r40] = r.planner.ranges(held, retried)
    assert (r40.start, r40.end, r40.exact) == (40, 100, True)


def test_available_now_leaves_a_partition_behind_after_it_stops_twice_at_one_offset():
    r = rig({"t": 1, "u": 1})
    r.src.latest = {("t", 0): 100, ("u", 0): 10}
    start = r.planner.initial_offsets()
    r.planner.prepare_available_now()
    r.src.latest = {("t", 0): 500, ("u", 0): 50}  # arrives after the run began: not planned
    end = r.planner.latest_offsets(start, None)
    assert end["p"] == {"t:0": 100, "u:0": 10}
    r.planner.ranges(start, end)
    r.tail.positions = {("t", 0): 39, ("u", 0): 9}
    again = r.planner.latest_offsets(end, None)
    assert again["r"] == {"t:0": [40, True]}
    [restarted] = r.planner.ranges(end, again)
    assert (restarted.topic, restarted.start, restarted.end) == ("t", 40, 100)

    with capture_logs() as logs:
        last = r.planner.latest_offsets(again, None)  # stopped at 40 again
    assert last["p"] == {"t:0": 100, "u:0": 10} and "r" not in last
    assert r.planner.ranges(again, last) == [], "nothing left to plan: the run ends"
    assert [e["partition"] for e in logs if e["log_level"] == "error"] == ["t:0"]


def test_stall_book_reviews_only_what_was_planned():
    tail, clock = FakeTail(), Clock()
    book = StallBook("A->B", tail, clock=clock)
    review = book.review()
    assert (review.restart, review.stopped, review.held, review.refresh) == ({}, {}, frozenset(), False)
    assert tail.reads == 0, "nothing planned: the positions are not read"

    book.planned({"t:0": PlannedRange(10, 20, False), "t:1": PlannedRange(0, 5, True)})
    tail.positions = {("t", 1): 4}  # t:0 recorded nothing: it starts again at its own start
    review = book.review()
    assert review.restart == review.stopped == {"t:0": (10, False)} and review.refresh

    book.planned({"t:0": PlannedRange(10, 20, False)})
    review = book.review()  # the same offset again: held, and the last refresh is recent
    assert review.restart == {} and review.stopped == {"t:0": (10, False)} and review.held == {"t:0"}
    assert not review.refresh
    clock.now += STALL_REFRESH_SECONDS
    review = book.review()
    assert review.stopped == {"t:0": (10, False)} and review.held == frozenset() and review.refresh


# -- tailing copies (mm2py.source.copy.tail) --------------------------------------------------


def test_partition_a_tailing_copy_took_past_its_end_is_planned_from_its_recorded_position():
    r = rig({"t": 2})
    r.src.latest = {("t", 0): 100, ("t", 1): 10}
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    assert r.planner.caught_up
    r.planner.ranges(start, end)

    r.tail.positions = {("t", 0): 179, ("t", 1): 9}  # t:0 tailed on to 180; t:1 stopped at its end
    r.src.latest = {("t", 0): 200, ("t", 1): 10}
    again = r.planner.latest_offsets(end, None)
    assert again["r"] == {"t:0": [180, True]} and again["p"] == {"t:0": 200, "t:1": 10}
    [on] = r.planner.ranges(end, again)
    assert (on.partition, on.start, on.end, on.exact) == (0, 180, 200, True)

    r.tail.positions = {("t", 0): 249, ("t", 1): 9}  # tailed to the source's end: nothing left to plan
    r.src.latest = {("t", 0): 250, ("t", 1): 10}
    last = r.planner.latest_offsets(again, None)
    # Spark's offset stays: once its offsets repeat, no micro-batch starts with nothing to copy
    assert last["p"] == again["p"] and "r" not in last
    assert r.planner.ranges(again, last) == []
    assert r.planner.latest_offsets(last, None) == last


def test_after_the_first_review_only_planned_or_ahead_partitions_are_compared():
    tail = FakeTail()
    book = StallBook("A->B", tail)
    tail.positions = {("t", 0): 49, ("t", 1): 9}
    assert book.review({"t:0": 10, "t:1": 10}).ahead == {"t:0": 50}, "the first review compares every partition"
    tail.positions = {("t", 0): 49, ("t", 1): 19}  # t:1 moved without being planned: never by a copy
    assert book.review({"t:0": 10, "t:1": 10}).ahead == {"t:0": 50}, "t:0 stays ahead until it is planned"
    book.planned({"t:0": PlannedRange(50, 60, True)})
    tail.positions = {("t", 0): 59, ("t", 1): 19}
    assert book.review({"t:0": 60, "t:1": 10}).ahead == {}


def test_a_tailing_micro_batch_adds_every_other_partition_as_an_empty_range():
    r = rig({"t": 3})
    r.src.latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 5}
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    r.planner.ranges(start, end)
    # t:0 tailed to 180 past its end; t:1 and t:2 got nothing new
    r.tail.positions = {("t", 0): 179, ("t", 1): 9, ("t", 2): 4}
    r.src.latest = {("t", 0): 180, ("t", 1): 12, ("t", 2): 5}
    again = r.planner.latest_offsets(end, None)
    planned = r.planner.ranges(end, again)
    assert [(p.partition, p.start, p.end) for p in planned] == [(1, 10, 12)]
    idle = r.planner.idle_ranges(end, again, planned)
    # t:0 resumes after what its tail took, not at Spark's offset; t:1 is planned already
    assert sorted((p.partition, p.start, p.end, p.exact) for p in idle) == [(0, 180, 180, True), (2, 5, 5, True)]
    r.tail.positions = {("t", 0): 189, ("t", 1): 11, ("t", 2): 4}  # the tail took t:0 on to 190
    r.src.latest = {("t", 0): 190, ("t", 1): 12, ("t", 2): 5}
    last = r.planner.latest_offsets(again, None)
    assert "r" not in last and r.planner.ranges(again, last) == [], "no copy stopped short, nothing left"
    assert [(p.partition, p.start) for p in r.planner.idle_ranges(again, last, [])] == [(0, 190), (1, 12), (2, 5)]


def test_a_plan_less_than_a_budget_short_of_the_end_counts_as_caught_up():
    r = rig({"t": 1})
    r.src.latest = {("t", 0): 3000}
    start = r.planner.initial_offsets()
    r.planner.latest_offsets(start, 1000 * ASSUMED_BYTES_PER_OFFSET)
    assert not r.planner.caught_up, "three budgets behind"
    r.planner.latest_offsets(start, 1500 * ASSUMED_BYTES_PER_OFFSET)
    assert r.planner.caught_up, "the tail takes the other half along"
    assert not r.planner.reached_ends, "so its tasks are not cut down to tail"
    r.planner.latest_offsets(start, 3000 * ASSUMED_BYTES_PER_OFFSET)
    assert r.planner.caught_up and r.planner.reached_ends


def test_only_what_arrived_since_the_last_plan_is_given_fewer_tasks_to_tail():
    r = rig({"t": 1})
    r.src.latest = {("t", 0): 3000}
    start = r.planner.initial_offsets()
    r.planner.latest_offsets(start, 4000 * ASSUMED_BYTES_PER_OFFSET)
    assert r.planner.reached_ends and not r.planner.only_arrivals, (
        "the end of a backlog, three quarters of a budget: one task would copy it at one core's speed")
    r.planner.latest_offsets(start, 7000 * ASSUMED_BYTES_PER_OFFSET)
    assert r.planner.reached_ends and r.planner.only_arrivals, "less than half a budget: what arrived"
    r.planner.latest_offsets(start, 1000 * ASSUMED_BYTES_PER_OFFSET)
    assert not r.planner.reached_ends and not r.planner.only_arrivals


def test_after_a_plan_that_reached_every_end_up_to_a_whole_budget_counts_as_arrivals():
    r = rig({"t": 1})
    r.src.latest = {("t", 0): 3000}
    start = r.planner.initial_offsets()
    r.planner.latest_offsets(start, 1000 * ASSUMED_BYTES_PER_OFFSET)  # cut: a backlog
    r.planner.latest_offsets(start, 4000 * ASSUMED_BYTES_PER_OFFSET)
    assert r.planner.reached_ends and not r.planner.only_arrivals, "the backlog's end keeps its tasks"
    r.planner.latest_offsets(start, 4000 * ASSUMED_BYTES_PER_OFFSET)
    assert r.planner.only_arrivals, (
        "after a plan that reached every end, what is planned arrived since: estimated at a log's "
        "average record size, three quarters of a budget of small records still goes to the tail")
    r.planner.latest_offsets(start, 2000 * ASSUMED_BYTES_PER_OFFSET)
    assert not r.planner.reached_ends and not r.planner.only_arrivals, "more than a budget: cut, all tasks"


def test_a_run_restarted_from_an_older_spark_checkpoint_starts_after_the_recorded_positions():
    r = rig({"t": 1})
    r.tail.positions = {("t", 0): 149}  # written after the checkpoint's last micro-batch
    r.src.latest = {("t", 0): 160}
    checkpoint = {"p": {"t:0": 100}, "exact": [], "new": {}}
    end = r.planner.latest_offsets(checkpoint, None)
    [planned] = r.planner.ranges(checkpoint, end)
    assert (planned.start, planned.end, planned.exact) == (150, 160, True)


def test_only_a_plan_that_reached_every_end_is_caught_up():
    r = rig({"t": 2})
    r.src.latest = {("t", 0): 9000, ("t", 1): 1000}
    start = r.planner.initial_offsets()
    r.planner.latest_offsets(start, 1000 * ASSUMED_BYTES_PER_OFFSET)
    assert not r.planner.caught_up, "a byte budget cut it"
    r.planner.latest_offsets(start, None)
    assert r.planner.caught_up
    r.planner.prepare_available_now()
    r.planner.latest_offsets(start, None)
    assert not r.planner.caught_up, "a --once run never tails"


def test_a_tailing_micro_batch_refreshes_topics_beside_its_tail_and_the_next_plan_does_not():
    r = rig({"t": 1}, extra="refresh.topics.interval.seconds = 5")
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    r.planner.ranges(start, end)
    r.src.counts["new"] = 2  # created on the source while the micro-batch tails
    r.events.clear()
    r.catalogue._refreshed_at -= 5  # the listing is due by the time the refresh starts
    r.planner.tailing(AHEAD_SECONDS + 0.05)  # the refresh starts 0.05 s into the tail
    deadline = time.monotonic() + 5
    while ("dst", "create_topics", ("A.new",)) not in r.events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("src", "topics") in r.events and ("dst", "create_topics", ("A.new",)) in r.events
    r.events.clear()
    again = r.planner.latest_offsets(end, None)
    assert ("src", "topics") not in r.events, "listed beside the tail, not due again at the plan"
    assert {p.topic for p in r.planner.ranges(end, again)} <= {"t", "new"} and "new" in r.catalogue.partitions


def test_a_refresh_that_failed_beside_the_tail_is_done_again_by_the_plan():
    r = rig({"t": 1}, extra="refresh.topics.interval.seconds = 5")
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    r.planner.ranges(start, end)
    listing = r.src.topics
    failed = []

    def unreachable() -> dict[str, int]:
        failed.append(1)
        raise KafkaError("source unreachable", cluster="A", retriable=True)

    r.src.topics = unreachable  # type: ignore[method-assign]
    r.catalogue._refreshed_at -= 5  # the listing is due by the time the refresh starts
    r.planner.tailing(AHEAD_SECONDS + 0.01)
    deadline = time.monotonic() + 5
    while not failed and time.monotonic() < deadline:
        time.sleep(0.01)
    r.src.topics = listing  # type: ignore[method-assign]
    r.events.clear()
    r.planner.latest_offsets(end, None)
    assert failed and ("src", "topics") in r.events, "the plan listed the source itself"
