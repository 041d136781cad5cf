"""The work one plan does grows with the partitions that moved, not with every partition of the flow.

Counted on the planner's fakes (tests/fakes/planning.py): source requests, ranges, lookups per topic.
"""

from __future__ import annotations

from mm2py.kafka.list_offsets import OffsetRequests
from tests.fakes.planning import rig

TOPICS, PARTITIONS = 200, 10


def steady(extra: str = ""):
    """A flow over 2,000 partitions where only topic t000 gets records; its first plan already made."""
    r = rig({f"t{i:03d}": PARTITIONS for i in range(TOPICS)}, extra=extra)
    start = r.planner.initial_offsets()
    end = r.planner.latest_offsets(start, None)
    r.planner.ranges(start, end)
    return r, end


def source_requests(r) -> list[tuple]:
    return [e for e in r.events if e[0] == "src"]


def test_a_steady_plan_asks_the_source_for_its_ends_once_for_every_partition_together():
    r, start = steady()
    for n in range(1, 4):
        r.src.latest.update({("t000", p): 10 * n for p in range(PARTITIONS)})
        r.tail.positions.update({("t000", p): 10 * (n - 1) - 1 for p in range(PARTITIONS) if n > 1})
        r.events.clear()
        end = r.planner.latest_offsets(start, None)
        planned = r.planner.ranges(start, end)
        asked = source_requests(r)
        assert [e[:3] for e in asked] == [("src", "list_offsets", "latest")], asked[:3]
        assert len(asked[0][3]) == TOPICS * PARTITIONS, "one request for all partitions, none per partition"
        assert sorted(x.key for x in planned) == [f"t000:{p}" for p in range(PARTITIONS)], "idle ones get no range"
        start = end


def test_idle_ranges_name_each_remote_topic_once_not_once_per_partition():
    r, start = steady()
    r.src.latest.update({("t000", p): 5 for p in range(PARTITIONS)})
    end = r.planner.latest_offsets(start, None)
    planned = r.planner.ranges(start, end)
    asked: list[str] = []
    remote_topic = r.catalogue.remote_topic

    def counted(topic: str) -> str:
        asked.append(topic)
        return remote_topic(topic)

    r.catalogue.remote_topic = counted  # type: ignore[method-assign]
    idle = r.planner.idle_ranges(start, end, planned)
    assert len(idle) == (TOPICS - 1) * PARTITIONS, "every idle partition is still tailed"
    assert {x.target_topic for x in idle if x.topic == "t001"} == {"A.t001"}
    assert len(asked) == TOPICS - 1 and len(set(asked)) == TOPICS - 1


def test_the_same_partitions_reuse_the_listoffsets_request_built_for_them():
    requests = OffsetRequests()
    tps = [(f"t{i:03d}", p) for i in range(TOPICS) for p in range(PARTITIONS)]
    first = requests.request(1, list(tps), -1)
    assert requests.request(1, list(tps), -1) is first
    assert requests.request(1, tps[:-1], -1) is not first, "other partitions: a request of their own"
    assert requests.request(2, tps[:-1], -1) is not requests.request(1, tps[:-1], -1)
    assert requests.request(1, tps[:-1], -2) is not requests.request(1, tps[:-1], -1)
    request = requests.request(1, [("a", 0), ("a", 1), ("b", 3)], -1)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics] == [("a", [0, 1]), ("b", [3])]


def test_a_first_plan_takes_the_log_starts_its_sizing_read_instead_of_asking_again():
    r = rig({f"t{i:03d}": PARTITIONS for i in range(TOPICS)}, stored={("t000", 0): 41})
    r.src.earliest.update({("t001", p): 7 for p in range(PARTITIONS)})
    start = r.planner.initial_offsets()
    earliest = [e for e in source_requests(r) if e[1] == "list_offsets" and e[2] == "earliest"]
    assert len(earliest) == 1, "the sizing's listing, not one more for the starts"
    assert start["p"]["t000:0"] == 42 and start["p"]["t001:3"] == 7 and start["p"]["t002:0"] == 0
    assert r.catalogue.take_log_starts() == {}, "handed over once"


def test_latest_as_the_reset_still_asks_the_source_for_its_ends():
    r = rig({"t": 2}, extra="A->B.consumer.auto.offset.reset = latest\n")
    r.src.earliest.update({("t", 0): 3, ("t", 1): 3})
    r.src.latest.update({("t", 0): 50, ("t", 1): 60})
    assert r.planner.initial_offsets()["p"] == {"t:0": 50, "t:1": 60}
