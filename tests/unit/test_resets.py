"""Source partitions gone back (issue 45): detection at plan time, source.reset.policy, the ledger."""

from __future__ import annotations

from structlog.testing import capture_logs

from mm2py.formats import OffsetSync
from mm2py.source.plan.resets import CONTINUE, RECREATE, STOP, Reset, decide, detect, gap_entry
from mm2py.stores.ledger import GAP, RECREATED, TRUNCATED, LedgerEntry, parse
from tests.fakes.resets import Guarded, advance

# -- detection ---------------------------------------------------------------------------------


def test_detect_a_new_topic_id_as_recreated_and_a_log_end_below_the_position_as_truncated():
    begin = {("a", 0): 2000, ("b", 0): 2000, ("c", 0): 2000}
    ends = {("a", 0): 2500, ("b", 0): 1500, ("c", 0): 2000}
    found = detect(begin, ends, {"a": "old", "b": "b1", "c": "c1"}, {"a": "new", "b": "b1", "c": "c1"})
    assert [(r.kind, r.topic) for r in found] == [(RECREATED, "a"), (TRUNCATED, "b")]
    assert found[0].old_id == "old" and found[0].new_id == "new"
    # an unknown id (first run, or a broker without ids) still finds the log end below the position
    assert [r.kind for r in detect({("b", 0): 10}, {("b", 0): 3}, {}, {})] == [TRUNCATED]


def test_recreate_applies_to_a_recreated_topic_only():
    recreated = Reset(RECREATED, "t", 0, 10, 5, "x", "y")
    truncated = Reset(TRUNCATED, "t", 0, 10, 5)
    assert decide(RECREATE, recreated) == RECREATE and decide(RECREATE, truncated) == CONTINUE
    assert decide(STOP, truncated) == STOP and decide(CONTINUE, recreated) == CONTINUE


# -- policies through the planner --------------------------------------------------------------


def test_first_plan_records_the_topic_ids_and_plans_as_before():
    g = Guarded({"orders": 1})
    g.r.src.latest = {("orders", 0): 100}
    start = g.r.planner.initial_offsets()
    end = g.r.planner.latest_offsets(start, None)
    assert end["p"] == {"orders:0": 100}
    assert g.ledger.appended == [([], {"orders": "orders-1"})]
    assert [r.topic_id for r in g.r.planner.ranges(start, end)] == ["orders-1"], "the copy is pinned to that topic"
    g.r.planner.latest_offsets(end, None)
    assert len(g.ledger.appended) == 1, "recorded once"


def test_continue_copies_a_recreated_topic_from_its_new_log_start_and_says_so():
    g = Guarded({"orders": 1}, stored={("orders", 0): 1999})
    g.r.src.latest = {("orders", 0): 2000}
    start = g.r.planner.initial_offsets()
    end = advance(g, start)
    assert end["p"] == {"orders:0": 2000}
    g.ids["orders"] = "orders-2"  # deleted and created again; already past the old position
    g.r.src.latest, g.r.src.earliest = {("orders", 0): 2500}, {("orders", 0): 0}
    g.r.dst.latest = {("A.orders", 0): 2000}
    with capture_logs() as logs:
        nxt = g.r.planner.latest_offsets(end, None)
    ranges = g.r.planner.ranges(end, nxt)
    assert [(x.start, x.end, x.exact, x.topic_id) for x in ranges] == [(0, 2500, True, "orders-2")], \
        "the new log, read by the new id"
    [(entries, ids)] = g.ledger.appended[1:]
    assert ids == {"orders": "orders-2"}
    [entry] = entries
    assert (entry.kind, entry.action, entry.topic, entry.partition) == (RECREATED, CONTINUE, "orders", 0)
    assert entry.source_old == {"end": 2000, "topic_id": "orders-1"}
    assert entry.source_new == {"start": 0, "end": 2500, "topic_id": "orders-2"}
    assert entry.target_old == {"end": 2000} and entry.target_new == {"start": 2000}
    assert g.saved == [{("orders", 0): -1}], "a restart resumes from the new log"
    assert g.syncs == [OffsetSync("orders", 0, 0, 2000)], "new-log offsets never translate through old syncs"
    [line] = [x for x in logs if x["log_level"] == "warning" and x.get("kind") == RECREATED]
    assert line["action"] == CONTINUE and line["topic"] == "orders" and line["partition"] == 0


def test_the_copiers_still_writing_a_partition_end_before_its_reset_is_recorded_or_acted_on():
    g = Guarded({"orders": 1, "other": 1}, stored={("orders", 0): 1999, ("other", 0): 9})
    g.r.src.latest = {("orders", 0): 2000, ("other", 0): 10}
    order: list[str] = []
    settled: list[set] = []
    g.guard.settle = lambda tps: (settled.append(set(tps)), order.append("settle"))
    appended = g.ledger.append
    g.ledger.append = lambda *a, **k: (order.append("ledger"), appended(*a, **k))  # type: ignore[method-assign]
    end = advance(g, g.r.planner.initial_offsets())
    assert settled == [], "no reset: nothing is ended"
    g.ids["orders"] = "orders-2"
    g.r.src.latest, g.r.src.earliest = {("orders", 0): 50, ("other", 0): 12}, {("orders", 0): 0, ("other", 0): 0}
    g.r.dst.latest = {("A.orders", 0): 2000}
    order.clear()
    g.r.planner.latest_offsets(end, None)
    assert settled == [{("orders", 0)}] and order[0] == "settle" and "ledger" in order
    assert g.saved and g.syncs, "the reset's positions and syncs are written after"


def test_a_log_end_below_the_position_is_found_within_one_plan_and_copied_from_its_start():
    g = Guarded({"orders": 1}, stored={("orders", 0): 1999})
    g.r.src.latest = {("orders", 0): 2000}
    end = advance(g, g.r.planner.initial_offsets())
    g.r.src.latest, g.r.src.earliest = {("orders", 0): 1500}, {("orders", 0): 0}  # same id: truncated
    nxt = g.r.planner.latest_offsets(end, None)
    assert [(x.start, x.end, x.exact) for x in g.r.planner.ranges(end, nxt)] == [(0, 1500, True)]
    assert [e.kind for e in g.ledger.appended[-1][0]] == [TRUNCATED]


def test_an_empty_new_log_keeps_its_new_start_until_records_come():
    g = Guarded({"orders": 1}, stored={("orders", 0): 1999})
    g.r.src.latest = {("orders", 0): 2000}
    end = advance(g, g.r.planner.initial_offsets())
    g.ids["orders"] = "orders-2"
    g.r.src.latest = {("orders", 0): 0}
    nxt = advance(g, end)
    assert nxt["p"] == {"orders:0": 0} and "orders:0" in nxt["exact"]
    g.r.src.latest = {("orders", 0): 30}
    last = g.r.planner.latest_offsets(nxt, None)
    assert [(x.start, x.end) for x in g.r.planner.ranges(nxt, last)] == [(0, 30)]
    assert len([e for es, _ in g.ledger.appended for e in es]) == 1, "found once"


def test_a_topic_seen_gone_then_back_with_a_new_id_starts_from_its_new_log_start():
    """The deletion seen by a refresh drops the topic; back, it is first seen again, from the recorded
    position of the old topic (read at the run's start): the new id sends it to the new log start."""
    g = Guarded({"orders": 1}, stored={("orders", 0): 1999}, extra="A->B.refresh.topics.interval.seconds = 0\n")
    g.r.src.latest = {("orders", 0): 2000}
    end = advance(g, g.r.planner.initial_offsets())
    del g.r.src.counts["orders"]
    gone = advance(g, end)
    assert gone["p"] == {}
    g.r.src.counts["orders"], g.ids["orders"] = 1, "orders-2"
    g.r.src.latest, g.r.src.earliest = {("orders", 0): 2400}, {("orders", 0): 0}
    back = g.r.planner.latest_offsets(gone, None)
    assert [(x.start, x.end, x.exact) for x in g.r.planner.ranges(gone, back)] == [(0, 2400, True)]
    assert [(e.kind, e.action) for e in g.ledger.appended[-1][0]] == [(RECREATED, CONTINUE)]


def test_stop_holds_the_partition_with_an_error_while_other_topics_go_on():
    g = Guarded({"orders": 1, "refunds": 1}, policy="stop", stored={("orders", 0): 1999, ("refunds", 0): 9})
    g.r.src.latest = {("orders", 0): 2000, ("refunds", 0): 10}
    end = advance(g, g.r.planner.initial_offsets())
    g.ids["orders"] = "orders-2"
    g.r.src.latest = {("orders", 0): 2600, ("refunds", 0): 50}
    with capture_logs() as logs:
        nxt = g.r.planner.latest_offsets(end, None)
    assert [(x.topic, x.start, x.end) for x in g.r.planner.ranges(end, nxt)] == [("refunds", 10, 50)]
    [error] = [x for x in logs if x["log_level"] == "error"]
    assert error["action"] == STOP and error["topic"] == "orders" and "stopped" in error["event"]
    assert g.saved == [] and g.syncs == []
    assert g.ledger.state.topic_ids["orders"] == "orders-1", "the id it was copied under stays"
    # still stopped at the next plans, even once the new log passes the old position; never tailed
    later = g.r.planner.latest_offsets(nxt, None)
    assert [x.topic for x in g.r.planner.ranges(nxt, later)] == ["refunds"]
    assert [x.topic for x in g.r.planner.idle_ranges(nxt, later, [])] == ["refunds"]
    assert len(g.ledger.appended) == 2, "one event, not one per plan"


def test_a_stop_outlives_a_restart_and_the_policy_then_in_force_resolves_it():
    first = Guarded({"orders": 1}, policy="stop", stored={("orders", 0): 1999})
    first.r.src.latest = {("orders", 0): 2000}
    end = advance(first, first.r.planner.initial_offsets())
    first.r.src.latest = {("orders", 0): 10}
    advance(first, end)
    # restarted with the new log already past the old position: the ledger's stop still holds
    again = Guarded({"orders": 1}, policy="stop", ledger=first.ledger, stored={("orders", 0): 1999})
    again.r.src.latest = {("orders", 0): 3000}
    start = again.r.planner.initial_offsets()
    assert again.r.planner.ranges(start, again.r.planner.latest_offsets(start, None)) == []
    # restarted with continue: copied from the log start
    after = Guarded({"orders": 1}, policy="continue", ledger=first.ledger, stored={("orders", 0): 1999})
    after.r.src.latest, after.r.src.earliest = {("orders", 0): 3000}, {("orders", 0): 0}
    start = after.r.planner.initial_offsets()
    assert [(x.start, x.end) for x in after.r.planner.ranges(start, after.r.planner.latest_offsets(start, None))] \
        == [(0, 3000)]
    assert [e.action for e in first.ledger.state.entries] == [STOP, CONTINUE]


def test_recreate_deletes_the_remote_topic_and_mirrors_from_offset_zero():
    g = Guarded({"orders": 1}, policy="recreate", stored={("orders", 0): 1999})
    g.r.src.latest = {("orders", 0): 2000}
    g.r.planner.prepare_target()
    end = advance(g, g.r.planner.initial_offsets())
    made = []
    g.guard.recreate_remote = lambda topic: made.append(topic)
    g.ids["orders"] = "orders-2"
    g.r.src.latest, g.r.src.earliest = {("orders", 0): 700}, {("orders", 0): 0}
    nxt = g.r.planner.latest_offsets(end, None)
    assert g.r.dst.deleted == ["A.orders"] and made == ["orders"]
    assert [(x.start, x.end) for x in g.r.planner.ranges(end, nxt)] == [(0, 700)]
    assert g.syncs == [OffsetSync("orders", 0, 0, 0)]
    assert g.ledger.appended[-1][0][0].target_new == {"start": 0}


# -- the ledger's records ----------------------------------------------------------------------


def test_ledger_records_round_trip_and_a_stop_is_the_partitions_last_word():
    stop = LedgerEntry(TRUNCATED, "A->B", "t", 0, STOP, {"end": 10}, {"start": 0, "end": 3}, {}, {}, 5)
    gap = gap_entry("A->B", "t", 0, 3, 7)
    other = LedgerEntry(TRUNCATED, "A->C", "t", 0, CONTINUE, at_ms=6)
    records = [(0, e.key_bytes(), e.value_bytes()) for e in (stop, gap, other)]
    records.append((3, b'["topic-id","A->B","t"]', b'{"topic_id":"abc"}'))
    records.append((4, b"junk", b"junk"))
    state = parse(records, "A->B")
    assert state.entries == [stop, gap] and state.topic_ids == {"t": "abc"}
    assert state.last_of("t", 0) == stop, "a gap resolves nothing"
    assert gap.kind == GAP and gap.source_old == {"start": 3, "end": 7}


# -- partition counts ----------------------------------------------------------------------------


def shrinking(policy: str) -> tuple[Guarded, dict, list[dict]]:
    """A 3-partition topic mirrored, then re-created with 2; the plan after, and its log lines."""
    g = Guarded({"orders": 3}, policy=policy, stored={("orders", p): 999 for p in range(3)},
                extra="A->B.refresh.topics.interval.seconds = 0\n")
    g.guard.source_partitions = g.r.src.topics
    g.guard.recreate_remote = lambda topic: g.r.dst.counts.__setitem__(f"A.{topic}", g.r.src.counts[topic])
    g.r.src.latest = {("orders", p): 1000 for p in range(3)}
    g.r.planner.prepare_target()
    end = advance(g, g.r.planner.initial_offsets())
    g.r.src.counts["orders"], g.ids["orders"] = 2, "orders-2"
    g.r.src.latest, g.r.src.earliest = {("orders", p): 400 for p in range(2)}, {("orders", p): 0 for p in range(2)}
    g.r.dst.latest = {("A.orders", p): 1000 for p in range(3)}
    with capture_logs() as logs:
        nxt = g.r.planner.latest_offsets(end, None)
    return g, {"end": end, "next": nxt}, logs


def test_a_topic_recreated_with_fewer_partitions_is_not_continued_into_a_remote_topic_with_more():
    g, plan, logs = shrinking("continue")
    assert g.r.planner.ranges(plan["end"], plan["next"]) == []
    entries = g.ledger.appended[-1][0]
    assert [(e.partition, e.kind, e.action) for e in entries] == [(0, RECREATED, STOP), (1, RECREATED, STOP)]
    assert all(e.source_new["partitions"] == 2 and e.target_old["partitions"] == 3 for e in entries)
    errors = [x for x in logs if x["log_level"] == "error"]
    assert {x["partition"] for x in errors} == {0, 1}
    assert all("re-created with 2 partitions" in x["event"] and "A.orders has 3" in x["event"] for x in errors)
    assert g.saved == [] and g.syncs == [] and g.r.dst.deleted == []
    assert g.ledger.state.topic_ids["orders"] == "orders-1", "not taken up: its groups are not translated"


def test_recreate_gives_the_remote_topic_the_new_partition_count():
    g, plan, _ = shrinking("recreate")
    assert g.r.dst.deleted == ["A.orders"] and g.r.dst.counts["A.orders"] == 2
    assert [(x.partition, x.start, x.end) for x in g.r.planner.ranges(plan["end"], plan["next"])] == [
        (0, 0, 400), (1, 0, 400)]
