"""Formatting of ``mm2py status``: the table, rates and time left, and the JSON shape (no broker)."""

from __future__ import annotations

import json

from mm2py.ops.status import FlowStatus, TopicStatus
from mm2py.ops.status_view import rates_between, render


def _flow(mirrored: int, end: int = 1000) -> FlowStatus:
    return FlowStatus("A->B", [TopicStatus("orders", "A.orders", 3, end, mirrored, end - mirrored,
                                           0.0 if mirrored == end else 4.5, ((0, end - mirrored, 4.5),))],
                      last_checkpoint_age_s=2.0, last_heartbeat_age_s=None)


def test_table_has_flow_summary_and_topic_rows() -> None:
    text = render([_flow(400)])
    assert "flow A->B   lag 600 records, 4.5s   last checkpoint 2.0s ago   last heartbeat never" in text
    [row] = [line for line in text.splitlines() if "A.orders" in line]
    assert row.split() == ["orders", "A.orders", "3", "1,000", "400", "600", "4.5"]


def test_rates_and_time_left_from_two_snapshots() -> None:
    rates = rates_between([_flow(400)], [_flow(700)], 2.0)
    assert rates == {("A->B", "orders"): 150.0}
    [row] = [line for line in render([_flow(700)], rates).splitlines() if "A.orders" in line]
    assert row.split()[-2:] == ["150", "2s"], "300 records left at 150/s"
    [done] = [line for line in render([_flow(1000)], {("A->B", "orders"): 0.0}).splitlines() if "A.orders" in line]
    assert done.endswith("caught up")


def test_unreachable_flow_and_json_shape() -> None:
    assert render([FlowStatus("A->B", error="cluster A (127.0.0.1:1) unreachable")]) == \
        "flow A->B: UNAVAILABLE: cluster A (127.0.0.1:1) unreachable"
    out = json.loads(json.dumps(_flow(400).to_json()))
    assert (out["flow"], out["lag_records"], out["lag_seconds"]) == ("A->B", 600, 4.5)
    assert out["topics"][0] | {"partition_lags": None} == {
        "topic": "orders", "remote_topic": "A.orders", "partitions": 3, "source_end": 1000, "mirrored": 400,
        "lag_records": 600, "lag_seconds": 4.5, "partition_lags": None}


def test_live_next_maps_the_targets_end_through_the_newest_sync() -> None:
    from mm2py.ops.live_positions import live_next

    # position 99 recorded; the newest sync says source 100 lands at target 500; the target holds 540
    assert live_next(100, (100, 500), 540, 1000) == 140
    # gaps in the source (compaction, markers) make the mapped offset a lower bound: never past the source's end
    assert live_next(100, (100, 500), 2000, 1000) == 1000
    # a target behind the sync (re-created) or a sync older than the position: the position stands
    assert live_next(100, (100, 500), 400, 1000) == 100
    assert live_next(300, (100, 500), 540, 1000) == 300
    # a source whose end is below the position (truncated): the position stands, lag is clamped at 0 by status
    assert live_next(100, (100, 500), 540, 50) == 100


def test_live_positions_keep_the_recorded_ones_where_the_target_cannot_be_read(monkeypatch) -> None:
    import structlog

    from mm2py.config.model import ClusterConfig, FlowConfig
    from mm2py.errors import KafkaError
    from mm2py.ops import live_positions

    class Refused:
        def __init__(self, *_args: object, **_kwargs: object) -> None:
            pass

        def topics(self) -> dict[str, int]:
            raise KafkaError("Topic authorization failed", cluster="B")

    monkeypatch.setattr(live_positions, "Admin", Refused)
    flow = FlowConfig(source=ClusterConfig("A", "a:9092"), target=ClusterConfig("B", "b:9092"))
    with structlog.testing.capture_logs() as logs:
        for _ in range(2):
            assert live_positions.live_nexts(flow, {"orders": 2}, {("orders", 0): 9}, {("orders", 0): 50}) == {
                ("orders", 0): 10, ("orders", 1): 0}
    [warned] = [e for e in logs if e["log_level"] == "warning"]
    assert warned["flow"] == "A->B" and "authorization" in warned["error"], "logged once, naming the flow"


def test_a_sync_tail_reads_on_from_where_it_ended_and_afresh_when_the_topic_went_back() -> None:
    from mm2py.formats import OffsetSync
    from mm2py.ops.live_positions import SYNCS_TAIL, SyncTail

    tail = SyncTail()
    assert tail.starts({0: (0, 50_000), 1: (0, 10)}) == {0: 50_000 - SYNCS_TAIL, 1: 0}, "first read: the tail"
    for up, down in ((5, 100), (7, 103)):
        sync = OffsetSync("orders", 0, up, down)
        tail.take(sync.key_bytes(), sync.value_bytes())
    tail.take(b"not", b"a sync")  # another tool's record: ignored
    tail.reached = {0: 50_000, 1: 10}
    assert tail.newest == {("orders", 0): (7, 103)}, "the newest in offset order wins"
    assert tail.starts({0: (0, 50_100), 1: (0, 10)}) == {0: 50_000, 1: 10}, "then on from where it ended"
    assert tail.newest == {("orders", 0): (7, 103)}
    assert tail.starts({0: (0, 40), 1: (0, 10)}) == {0: 0, 1: 0}, "an end gone back: read afresh"
    assert tail.newest == {}, "and what was read from the old log is dropped"
