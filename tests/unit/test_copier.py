"""The copier's ordering and stall rules, on fakes of our RawClient interface (never a fake broker).

The fake source serves real RecordBatch v2 bytes; the fake target answers produce requests
only when the copier waits for them, so the tests see exactly what was in flight when.
"""

from __future__ import annotations

import struct
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.kafka import batches as rb
from mm2py.kafka.fetch_response import FetchedPartition
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings, ProducerState
from mm2py.source.copy.partition import PartitionCopy, Pending
from mm2py.source.copy.tail import TailWindow
from mm2py.source.copy.tail_commit import TailProgress
from mm2py.source.ranges import PartitionRange
from mm2py.types import TP
from tests.fakes.copy_path import Answer, FakeSource, FakeTarget, batch


def copier(logs: dict[TP, list[bytes]], ranges: list[PartitionRange], target: FakeTarget,
           producer: ProducerState | None = None) -> Copier:
    c = Copier(FakeSource(logs), target, ranges, CopySettings(offset_lag_max=1000),  # type: ignore[arg-type]
               CopyMode(producer=producer))
    c._target_leaders = lambda topics: {(r.target_topic, r.partition): 2 for r in ranges}  # type: ignore[method-assign]
    return c


def test_constructor_does_no_io() -> None:
    class Untouchable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the constructor called {name}")

    Copier(Untouchable(), Untouchable(), [PartitionRange("t", 0, 0, 10, "A.t")], CopySettings())  # type: ignore[arg-type]


def test_batches_land_in_source_order_with_exact_syncs() -> None:
    logs = {("t", 0): [batch(o, 10) for o in range(0, 100, 10)], ("t", 1): [batch(o, 5) for o in range(0, 50, 5)]}
    target = FakeTarget()
    results = copier(logs, [PartitionRange("t", 0, 0, 100, "A.t"), PartitionRange("t", 1, 0, 50, "A.t")],
                     target).run()
    assert target.logs[("A.t", 0)] == list(range(0, 100, 10))
    assert target.logs[("A.t", 1)] == list(range(0, 50, 5))
    by_partition = {r.partition: r for r in results}
    assert by_partition[0].next_offset == 100 and by_partition[0].records == 100
    assert by_partition[0].syncs == ((0, 0), (100, 100)), "one linear run: its start and its end"
    assert by_partition[1].next_offset == 50


def test_a_partitions_first_batch_is_alone_in_flight_until_answered() -> None:
    logs = {("t", 0): [batch(o, 1) for o in range(20)]}
    target = FakeTarget()
    copier(logs, [PartitionRange("t", 0, 0, 20, "A.t")], target).run()
    assert target.most_in_flight_before_first_answer[("A.t", 0)] == 1
    assert target.most_in_flight[("A.t", 0)] <= 5, "the broker keeps sequence state for 5 batches"
    assert target.logs[("A.t", 0)] == list(range(20))


def test_a_batch_larger_than_the_remote_topic_takes_stalls_only_its_partition() -> None:
    logs = {("t", 0): [batch(0, 5), batch(5, 5, value_size=5000), batch(10, 5)], ("t", 1): [batch(0, 5)]}
    target = FakeTarget()
    ranges = [PartitionRange("t", 0, 0, 15, "A.t", max_batch_bytes=2000), PartitionRange("t", 1, 0, 5, "A.t")]
    results = {r.partition: r for r in copier(logs, ranges, target).run()}
    assert target.logs[("A.t", 0)] == [0], "nothing after the refused batch reaches the target"
    assert results[0].next_offset == 5 and results[0].stall_offset == 5 and "too large" in results[0].stall_reason
    assert results[0].records == 5
    assert results[1].next_offset == 5 and results[1].stall_offset == -1


def test_a_batch_the_target_refuses_stalls_there_and_later_acks_do_not_count() -> None:
    logs = {("t", 0): [batch(o, 5) for o in range(0, 30, 5)]}
    target = FakeTarget(refuse={10})
    [result] = copier(logs, [PartitionRange("t", 0, 0, 30, "A.t")], target).run()
    assert result.next_offset == 10 and result.stall_offset == 10
    assert result.syncs[-1][0] <= 10, "no sync past the stall"
    assert result.records == 10


def test_partition_copy_counts_and_stall_drop_queued_batches_after_it() -> None:
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 100, "A.t"))
    for base in (0, 10, 20, 30):
        part.enqueue((b"x" * 8,), Pending(base, 10, 8), rebuilt=False)
    part.stall(20, 5000, "batch too large")
    assert [b.first for _, b in part.queue] == [0, 10] and part.queued_bytes == 16 and part.records == 20
    result = part.result()
    assert part.done and result.next_offset == 20 and result.stall_offset == 20


def test_rebuilt_batches_sync_at_every_gap() -> None:
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 100, "A.t"))
    part.enqueue((b"x",), Pending.rebuilt([0, 1, 5, 6], 1), rebuilt=True)
    part.send_next()
    part.acked(0, lag_max=1000)
    assert part.syncs == [(0, 0), (5, 2)] and part.run_next == (7, 4)


# -- fetch settings from the flow (max.partition.fetch.bytes, client.rack, max.in.flight) --------------


class LimitedSource(FakeSource):
    """As a broker under max.partition.fetch.bytes: a larger batch comes whole only to the first
    partition of a request with data (KIP-74); behind another partition's data it is cut short."""

    def __init__(self, logs: dict[TP, list[bytes]]):
        super().__init__(logs)
        self.requests: list[list[TP]] = []
        self.cut: list[tuple[int, TP]] = []  # (request number, partition) answered with part of a batch

    def fetch(self, node: int, positions: dict[TP, int], *, partition_max_bytes: int, **_: object) -> Answer:
        self.requests.append(list(positions))
        out, data_before = {}, False
        for tp, offset in positions.items():
            held = [b for b in self.logs[tp] if next(rb.split_batches(b)).next_offset > offset]
            data = held[0] if held else b""
            if data_before and len(data) > partition_max_bytes:
                data = data[:partition_max_bytes]
                self.cut.append((len(self.requests) - 1, tp))
            data_before = data_before or bool(data)
            out[tp] = FetchedPartition(0, 1000, 1000, 0, (), data)
        return Answer(out, is_done=True)


def test_a_batch_larger_than_max_partition_fetch_bytes_behind_other_data_is_asked_first_next() -> None:
    small = [batch(o, 2) for o in range(0, 40, 2)]
    logs = {("t", 0): small, ("t", 1): small, ("t", 2): small, ("t", 3): [batch(0, 3, value_size=3000), batch(3, 1)]}
    source, target = LimitedSource(logs), FakeTarget()
    ranges = [PartitionRange("t", p, 0, 40, "A.t") for p in range(3)] + [PartitionRange("t", 3, 0, 4, "A.t")]
    c = Copier(source, target, ranges, CopySettings(partition_max_bytes=1000))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {(r.target_topic, r.partition): 2 for r in ranges}  # type: ignore[method-assign]
    c.run()
    assert target.logs[("A.t", 3)] == [0, 3] and target.logs[("A.t", 0)] == list(range(0, 40, 2))
    assert source.cut, "the big batch came cut behind partition 0's data at least once"
    for request, tp in source.cut:
        later = next(r for r in source.requests[request + 1:] if tp in r)
        assert later[0] == tp, "a partition answered with part of a batch leads the next request"


class RackSource(FakeSource):
    """Leader 1 names replica 3 (client.rack); replica 3 is behind once, then serves."""

    def __init__(self, logs: dict[TP, list[bytes]], behind_once: bool = False):
        super().__init__(logs)
        self.asked: list[int] = []
        self.behind = behind_once

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        self.asked.append(node)
        if node == 1:
            return Answer({tp: FetchedPartition(0, 1000, 1000, 0, (), b"", 3) for tp in positions}, is_done=True)
        if self.behind:
            self.behind = False
            return Answer({tp: FetchedPartition(0, 0, 0, 0, (), b"") for tp in positions}, is_done=True)
        return super().fetch(node, positions, **kw)


def test_with_client_rack_partitions_are_fetched_from_the_replica_the_leader_names() -> None:
    logs = {("t", 0): [batch(o, 5) for o in range(0, 20, 5)]}
    for behind in (False, True):
        source, target = RackSource(logs, behind_once=behind), FakeTarget()
        ranges = [PartitionRange("t", 0, 0, 20, "A.t")]
        c = Copier(source, target, ranges, CopySettings())  # type: ignore[arg-type]
        c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
        c.run()
        assert target.logs[("A.t", 0)] == [0, 5, 10, 15]
        # a replica behind the range's end sends the partition back to its leader (no data loss error)
        assert source.asked[:2] == [1, 3] and source.asked.count(1) == (2 if behind else 1)


def test_max_in_flight_per_partition_follows_the_producer_setting() -> None:
    logs = {("t", 0): [batch(o, 1) for o in range(20)]}
    target = FakeTarget()
    ranges = [PartitionRange("t", 0, 0, 20, "A.t")]
    c = Copier(FakeSource(logs), target, ranges, CopySettings(max_in_flight_per_partition=1))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
    c.run()
    assert target.most_in_flight[("A.t", 0)] == 1 and target.logs[("A.t", 0)] == list(range(20))


def test_transactional_batches_carry_the_bit_and_open_one_request_per_broker_at_a_time() -> None:
    logs = {("t", p): [batch(o, 2) for o in range(0, 20, 2)] for p in range(3)}
    target = FakeTarget()
    ranges = [PartitionRange("t", p, 0, 20, "A.t") for p in range(3)]
    results = copier(logs, ranges, target, ProducerState(42, 3, "mm2py-A->B-0")).run()
    assert {r.next_offset for r in results} == {20}
    assert all(a & rb.ATTR_TRANSACTIONAL for a in target.attributes)
    assert {txn for txn, _, _ in target.requests} == {"mm2py-A->B-0"}
    # the leader adds a request's new partitions to the transaction: never two such requests at once
    opening = [i for i, (_, _, new) in enumerate(target.requests) if new]
    assert opening == [0], target.requests[:3]
    for p in range(3):
        assert target.logs[("A.t", p)] == list(range(0, 20, 2))


def test_idempotent_batches_clear_the_transactional_bit() -> None:
    logs = {("t", 0): [batch(0, 2)]}
    target = FakeTarget()
    copier(logs, [PartitionRange("t", 0, 0, 2, "A.t")], target).run()
    assert not any(a & rb.ATTR_TRANSACTIONAL for a in target.attributes)
    assert target.requests[0][0] is None


class WholeSource(FakeSource):
    """Answers a fetch with every batch from the one holding the offset on, as a broker does up to its limits."""

    def fetch(self, node: int, positions: dict[TP, int], **_: object) -> Answer:
        out = {}
        for tp, offset in positions.items():
            held = [b for b in self.logs[tp] if next(rb.split_batches(b)).next_offset > offset]
            out[tp] = FetchedPartition(0, 1000, 1000, 0, (), b"".join(held))
        return Answer(out, is_done=True)


def coalescing(logs: dict[TP, list[bytes]], ranges: list[PartitionRange], target: FakeTarget,
               limit: int) -> Copier:
    c = Copier(WholeSource(logs), target, ranges, CopySettings(offset_lag_max=1000, coalesce_bytes=limit))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {(r.target_topic, r.partition): 2 for r in ranges}  # type: ignore[method-assign]
    return c


def test_runs_of_small_batches_are_written_as_one_with_every_record_and_exact_syncs() -> None:
    # 30 one-record batches, a large one that stays as it is, then 10 more small ones
    log = [batch(o, 1) for o in range(30)] + [batch(30, 5, value_size=3000)] + [batch(o, 1) for o in range(35, 45)]
    target = FakeTarget()
    written: list[list[tuple[int, bytes | None]]] = []
    produce = target.produce

    def keep(node: int, batches: dict, **kw: object) -> Answer:
        for pieces in batches.values():
            raw = b"".join(bytes(p) for p in pieces)
            written.append([(r.timestamp, r.value) for r in rb.decode(raw, next(rb.split_batches(raw)))])
        return produce(node, batches, **kw)
    target.produce = keep  # type: ignore[method-assign]
    (result,) = coalescing({("t", 0): log}, [PartitionRange("t", 0, 0, 45, "A.t")], target, 16 << 10).run()
    assert [len(b) for b in written] == [30, 5, 10], "two runs merged, the large batch alone between them"
    assert [ts - 1000 for b in written for ts, _ in b] == list(range(45)), "every record once, in source order"
    assert result.records == 45 and result.next_offset == 45 and result.rebuilt == 2
    assert result.syncs == ((0, 0), (45, 45)), "offsets map one for one: one linear run"


def test_without_batch_coalesce_bytes_every_batch_goes_as_it_came() -> None:
    log = [batch(o, 1) for o in range(20)]
    target = FakeTarget()
    (result,) = coalescing({("t", 0): log}, [PartitionRange("t", 0, 0, 20, "A.t")], target, 0).run()
    assert target.logs[("A.t", 0)] == list(range(20)) and result.rebuilt == 0


def test_a_run_is_cut_at_its_limit_and_at_the_remote_topics_max_batch_bytes() -> None:
    log = [batch(o, 1, value_size=200) for o in range(40)]  # ~270 bytes each
    target = FakeTarget()
    (result,) = coalescing({("t", 0): log}, [PartitionRange("t", 0, 0, 40, "A.t", max_batch_bytes=4000)], target,
                           1 << 20).run()
    firsts = target.logs[("A.t", 0)]
    assert len(firsts) > 1 and firsts == sorted(firsts) and result.records == 40
    assert result.syncs == ((0, 0), (40, 40))


# -- provenance (identity cycles): batches first written on the target stay behind ------------------


def batch_of(base_offset: int, n: int, producer_id: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                        producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1000 + base_offset + i, key=b"k", value=b"v", headers=[])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


class StampTarget(FakeTarget):
    """Also keeps each batch's (producer id, epoch, base sequence, first source offset), in send order."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[tuple[int, int, int, int]] = []
        self.alone: list[bool] = []  # per batch: nothing else of its partition was in flight when sent

    def produce(self, node: int, batches: dict[TP, tuple], **kw: object) -> Answer:
        for tp, pieces in batches.items():
            raw = b"".join(bytes(p) for p in pieces)
            pid, epoch, seq = struct.unpack_from(">qhi", raw, 43)
            view = next(rb.split_batches(raw))
            self.stamps.append((pid, epoch, seq, view.max_timestamp - 1000 - view.record_count + 1))
            self.alone.append(self.unanswered.get(tp, 0) == 0)
        return super().produce(node, batches, **kw)  # type: ignore[arg-type]


def test_provenance_leaves_home_batches_out_and_stamps_each_origin_with_its_own_producer() -> None:
    from mm2py.source.provenance import Provenance

    # A's own producers (-1, 50), batches B wrote (900: origin B, the target) and batches of C (901)
    log = [batch_of(0, 5, -1), batch_of(5, 5, 50), batch_of(10, 5, 900), batch_of(15, 5, 901),
           batch_of(20, 5, 901), batch_of(25, 5, -1), batch_of(30, 5, 900), batch_of(35, 5, 50)]
    target = StampTarget()
    asked: list[str] = []

    def producer_for(origin: str) -> tuple[int, int]:
        asked.append(origin)
        return {"A": (7, 3), "C": (8, 1)}[origin]

    c = Copier(FakeSource({("t", 0): log}), target, [PartitionRange("t", 0, 0, 40, "t")],  # type: ignore[arg-type]
               CopySettings(offset_lag_max=1000),
               CopyMode(provenance=Provenance("A", "B", {900: "B", 901: "C"}), producer_for=producer_for))
    c._target_leaders = lambda topics: {("t", 0): 2}  # type: ignore[method-assign]
    [result] = c.run()
    assert sorted(asked) == ["A", "C"], "one producer per origin per task, got at first need"
    assert target.logs[("t", 0)] == [0, 5, 15, 20, 25, 35], "B's own batches never go back to B"
    assert result.went_home == 10 and result.records == 30 and result.next_offset == 40
    # each producer id has its own sequences, from 0, in source order
    assert [(p, e, s) for p, e, s, _ in target.stamps] == [(7, 3, 0), (7, 3, 5), (8, 1, 0), (8, 1, 5), (7, 3, 10),
                                                           (7, 3, 15)]
    # a producer id's first batch in the partition goes alone (the broker takes any sequence from it)
    assert target.alone[0] and target.alone[2]
    # the offset mapping breaks where a batch stayed behind: every mirrored offset translates exactly
    assert result.syncs == ((0, 0), (15, 10), (35, 25), (40, 30))


def test_a_break_with_skipped_records_and_others_records_between_keeps_the_run_length() -> None:
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 100, "t"))
    for batch_ in (Pending(0, 2, 10), Pending(4, 1, 10)):  # source 2-3 stayed behind; the target took
        part.enqueue((b"x" * 10,), batch_, rebuilt=False)  # a record of its own at 4 meanwhile
        part.send_next()
    part.acked(2, 1000)
    part.acked(5, 1000)
    assert part.result().syncs == ((0, 2), (2, 5), (4, 5), (5, 6))


class ArrivingSource(FakeSource):
    """A source whose partition grows while the copier runs: one batch appears every few fetches."""

    def __init__(self, logs: dict[TP, list[bytes]], arriving: dict[TP, list[bytes]], every: int = 3):
        super().__init__(logs)
        self.arriving = arriving
        self.every = every
        self.fetches = 0

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        self.fetches += 1
        if self.fetches % self.every == 0:
            for tp, waiting in self.arriving.items():
                if waiting:
                    self.logs[tp].append(waiting.pop(0))
        return super().fetch(node, positions, **kw)


def tailing_copier(source: FakeSource, ranges: list[PartitionRange], target: FakeTarget,
                   tail_until: float | None) -> Copier:
    tail = TailWindow(tail_until) if tail_until is not None else None
    c = Copier(source, target, ranges, CopySettings(offset_lag_max=1000), CopyMode(tail=tail))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {(r.target_topic, r.partition): 2 for r in ranges}  # type: ignore[method-assign]
    return c


def test_a_tailing_copy_takes_what_arrives_after_its_range_until_its_time_is_up() -> None:
    tp = ("t", 0)
    source = ArrivingSource({tp: [batch(o, 10) for o in range(0, 30, 10)]},
                            {tp: [batch(o, 10) for o in range(30, 80, 10)]})
    target = FakeTarget()
    results = tailing_copier(source, [PartitionRange("t", 0, 0, 30, "A.t")], target, time.monotonic() + 0.3).run()
    # every batch that arrived went on past the planned end, in order, with one linear run of syncs
    assert target.logs[("A.t", 0)] == list(range(0, 80, 10))
    (result,) = results
    assert (result.end, result.next_offset, result.records, result.tailed) == (30, 80, 80, 50)
    assert result.syncs == ((0, 0), (80, 80))
    assert not source.arriving[tp]


def test_without_a_tail_the_copy_ends_at_its_planned_end() -> None:
    tp = ("t", 0)
    source = ArrivingSource({tp: [batch(o, 10) for o in range(0, 30, 10)]},
                            {tp: [batch(o, 10) for o in range(30, 80, 10)]}, every=1)
    target = FakeTarget()
    (result,) = tailing_copier(source, [PartitionRange("t", 0, 0, 30, "A.t")], target, None).run()
    assert target.logs[("A.t", 0)] == [0, 10, 20] and result.next_offset == 30


def test_a_tail_never_cuts_a_planned_range_short() -> None:
    tp = ("t", 0)
    source = FakeSource({tp: [batch(o, 10) for o in range(0, 100, 10)]})
    target = FakeTarget()
    # the tail's time is up before the copy starts: the range is still copied whole, and no more
    (result,) = tailing_copier(source, [PartitionRange("t", 0, 0, 50, "A.t")], target, time.monotonic() - 1).run()
    assert target.logs[("A.t", 0)] == [0, 10, 20, 30, 40] and result.next_offset == 50


class DeletingSource(ArrivingSource):
    """The partition's topic is deleted once the copy is past its range: every later fetch errs."""

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        answer = super().fetch(node, positions, **kw)
        if self.fetches > 4:
            answer.value = {tp: FetchedPartition(3, -1, -1, -1, (), b"") for tp in positions}
        return answer


def test_a_tailing_partition_that_errs_ends_its_tail_where_it_stands() -> None:
    tp = ("t", 0)
    source = DeletingSource({tp: [batch(o, 10) for o in range(0, 30, 10)]},
                            {tp: [batch(o, 10) for o in range(30, 80, 10)]}, every=1)
    target = FakeTarget()
    (result,) = tailing_copier(source, [PartitionRange("t", 0, 0, 30, "A.t")], target, time.monotonic() + 60).run()
    assert result.next_offset == len(target.logs[("A.t", 0)]) * 10 and result.next_offset >= 30


def test_a_partition_planned_empty_copies_only_what_its_tail_sees_arrive() -> None:
    busy, idle = ("t", 0), ("t", 1)
    source = ArrivingSource({busy: [batch(o, 10) for o in range(0, 30, 10)], idle: [batch(0, 10)]},
                            {busy: [], idle: [batch(o, 10) for o in range(10, 40, 10)]})
    target = FakeTarget()
    ranges = [PartitionRange("t", 0, 0, 30, "A.t"), PartitionRange("t", 1, 10, 10, "A.t", exact=True)]
    results = {r.partition: r for r in tailing_copier(source, ranges, target, time.monotonic() + 0.3).run()}
    assert target.logs[("A.t", 1)] == [10, 20, 30], "from its start on, nothing before it"
    assert (results[1].start, results[1].end, results[1].next_offset, results[1].tailed) == (10, 10, 40, 30)
    # without a tail, a partition planned empty is done at once
    (none,) = tailing_copier(FakeSource({idle: [batch(0, 10)]}), [PartitionRange("t", 1, 10, 10, "A.t")],
                             FakeTarget(), None).run()
    assert (none.next_offset, none.records) == (10, 0)


def test_fetches_go_in_a_session_only_once_every_partition_of_the_broker_tails() -> None:
    """Planned data is owed, so it is asked for in full requests; tails need only what moved (KIP-227)."""
    tps = [("t", 0), ("t", 1)]

    class Recording(ArrivingSource):
        def __init__(self, *a: object, **k: object):
            super().__init__(*a, **k)  # type: ignore[arg-type]
            self.kinds: list[tuple[bool, frozenset[TP]]] = []

        def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
            self.kinds.append((bool(kw.get("session")), frozenset(positions)))
            return super().fetch(node, positions, **kw)

    source = Recording({tps[0]: [batch(o, 10) for o in range(0, 30, 10)], tps[1]: [batch(0, 10)]},
                       {tps[1]: [batch(10, 10)]})
    target = FakeTarget()
    results = tailing_copier(source, [PartitionRange("t", 0, 0, 30, "A.t"), PartitionRange("t", 1, 0, 10, "A.t")],
                             target, time.monotonic() + 0.3).run()
    assert [r.next_offset for r in results] == [30, 20]
    first_session = next(i for i, (session, _) in enumerate(source.kinds) if session)
    assert not any(session for session, _ in source.kinds[:first_session])
    assert all(session for session, _ in source.kinds[first_session:]), "tails stay in the session"
    assert first_session >= 2, "partition 0 still owed batches 10 and 20 when partition 1 began to tail"


# -- the batch straddling a range's start (issue 45) -----------------------------------------------


class KeepingTarget(FakeTarget):
    """Also keeps the (source offset, value) of every record written, per partition, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.records: dict[TP, list[tuple[int, bytes | None]]] = {}

    def produce(self, node: int, batches: dict[TP, tuple], **kw: object) -> Answer:
        for tp, pieces in batches.items():
            raw = b"".join(bytes(p) for p in pieces)
            view = next(rb.split_batches(raw))
            # the fake source writes each record's offset into its timestamp (1000 + offset)
            self.records.setdefault(tp, []).extend((rec.timestamp - 1000, rec.value) for rec in rb.decode(raw, view))
        return super().produce(node, batches, **kw)  # type: ignore[arg-type]


class DeletedSource(FakeSource):
    """A source whose log start DeleteRecords moved to ``log_start``: fetches below it are out of range."""

    def __init__(self, logs: dict[TP, list[bytes]], log_start: int):
        super().__init__(logs)
        self.log_start = log_start

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        below = {tp for tp, offset in positions.items() if offset < self.log_start}
        answer = super().fetch(node, {tp: o for tp, o in positions.items() if tp not in below}, **kw)
        answer.value.update({tp: FetchedPartition(1, 1000, 1000, self.log_start, (), b"") for tp in below})
        return answer

    def log_start_offset(self, node: int, tp: TP) -> int:
        return self.log_start


class RecreatedSource(FakeSource):
    """A source whose topic was re-created under a planned range: its new log ends at ``log_end``, below it."""

    def __init__(self, logs: dict[TP, list[bytes]], log_end: int):
        super().__init__(logs)
        self.log_end = log_end

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        return Answer({tp: FetchedPartition(1, self.log_end, self.log_end, 0, (), b"") for tp in positions},
                      is_done=True)

    def list_offsets(self, tps: list[TP], spec: str = "latest") -> dict[TP, int]:
        return {tp: self.log_end if spec == "latest" else 0 for tp in tps}


def test_a_log_gone_back_under_a_planned_range_stalls_the_partition_where_it_stood() -> None:
    """Out of range with the log start below the offset is a leader move, unless the log now ends
    below it (issue 45): fetching again would never end; the planner finds the reset next."""
    target, result = straddled(RecreatedSource({("t", 0): []}, 600), PartitionRange("t", 0, 2000, 2500, "A.t"))
    assert (result.next_offset, result.stall_offset, result.records) == (2000, 2000, 0)
    assert "re-created" in result.stall_reason and result.lost_start == -1


class RecreatedUnderTheCopy(FakeSource):
    """A topic re-created after ``serves`` answers: fetched by its planned id, the broker answers
    UNKNOWN_TOPIC_ID, and metadata looked up after that names the new id."""

    NEW_ID = "00000000-0000-0000-0000-000000000002"

    def __init__(self, logs: dict[TP, list[bytes]], serves: int):
        super().__init__(logs)
        self.serves, self.lookups, self.fetches, self.new_id_seen = serves, 0, 0, False

    def leaders(self, topics: set[str]) -> dict[TP, int]:
        self.lookups += 1
        self.new_id_seen = self.fetches > self.serves
        return super().leaders(topics)

    def fetch(self, node: int, positions: dict[TP, int], **kw: object) -> Answer:
        self.fetches += 1
        if self.fetches <= self.serves:
            return super().fetch(node, positions, **kw)
        return Answer({tp: FetchedPartition(100, -1, -1, -1, (), b"") for tp in positions}, is_done=True)

    def recreated(self, topic: str) -> str | None:
        return self.NEW_ID if self.new_id_seen and self.pinned.get(topic) else None


def test_a_topic_re_created_under_the_copy_stalls_it_where_it_stood_and_nothing_new_is_read() -> None:
    planned_id = "00000000-0000-0000-0000-000000000001"
    logs = {("t", 0): [batch(o, 10) for o in range(0, 100, 10)]}
    source = RecreatedUnderTheCopy(logs, serves=2)
    target, result = straddled(source, PartitionRange("t", 0, 0, 100, "A.t", topic_id=planned_id))
    assert source.pinned == {"t": planned_id}, "fetched by the id it was planned with"
    assert target.logs[("A.t", 0)] == [0, 10], "the two batches read before the re-creation, nothing after"
    assert (result.next_offset, result.stall_offset) == (20, 20)
    assert "re-created" in result.stall_reason and RecreatedUnderTheCopy.NEW_ID in result.stall_reason
    assert source.lookups == 2, "one lookup at the start, one after the unknown id: no loop"


def test_a_topic_re_created_between_the_plan_and_the_start_is_not_read_at_all() -> None:
    source = RecreatedUnderTheCopy({("t", 0): [batch(0, 10)]}, serves=0)
    source.fetches = 1  # the metadata at the start names the new id already
    target, result = straddled(source, PartitionRange("t", 0, 0, 10, "A.t", topic_id="1" * 32))
    assert target.logs == {} and (result.next_offset, result.stall_offset) == (0, 0)
    assert source.fetches == 1, "stalled at its start: never fetched"


def straddled(source: FakeSource, r: PartitionRange) -> tuple[KeepingTarget, object]:
    target = KeepingTarget()
    c = Copier(source, target, [r], CopySettings(offset_lag_max=1000))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {(r.target_topic, r.partition): 2}  # type: ignore[method-assign]
    [result] = c.run()
    return target, result


def test_the_batch_straddling_an_exact_start_is_copied_from_the_start_with_exact_syncs() -> None:
    """A flow's first range from a log start DeleteRecords moved inside a batch: nothing after it is lost."""
    logs = {("t", 0): [batch(0, 10), batch(10, 10), batch(20, 10)]}
    target, result = straddled(FakeSource(logs), PartitionRange("t", 0, 5, 30, "A.t", exact=True))
    assert [o for o, _ in target.records[("A.t", 0)]] == list(range(5, 30)), "records 5-9 of the first batch too"
    assert target.logs[("A.t", 0)] == [5, 10, 20]
    assert result.records == 25 and result.rebuilt == 1 and result.next_offset == 30 and result.lost_start == -1
    assert result.syncs == ((5, 0), (30, 25)), "source 5 is target 0: one linear run"


def test_the_batch_straddling_a_boundary_start_is_left_to_the_range_before() -> None:
    """Consecutive ranges of one run: the range before copied the straddling batch whole."""
    logs = {("t", 0): [batch(0, 10), batch(10, 10), batch(20, 10)]}
    target, result = straddled(FakeSource(logs), PartitionRange("t", 0, 5, 30, "A.t"))
    assert [o for o, _ in target.records[("A.t", 0)]] == list(range(10, 30)), "no record twice"
    assert result.records == 20 and result.rebuilt == 0 and result.syncs == ((10, 0), (30, 20))


def test_a_log_start_moved_inside_a_batch_past_the_range_start_is_copied_from_there_and_reported() -> None:
    """DeleteRecords mid-flow, past where the copy stood: the rest of the batch holding the new log
    start is copied, and only the records deleted before being read count as lost."""
    logs = {("t", 0): [batch(0, 10), batch(10, 10), batch(20, 10), batch(30, 10)]}
    for exact in (False, True):
        target, result = straddled(DeletedSource(logs, 25), PartitionRange("t", 0, 10, 40, "A.t", exact=exact))
        assert [o for o, _ in target.records[("A.t", 0)]] == list(range(25, 40))
        assert (result.lost_start, result.lost_end) == (10, 25)
        assert result.records == 15 and result.next_offset == 40
        assert result.syncs == ((25, 0), (40, 15))


def test_a_first_range_below_a_log_start_inside_a_batch_loses_nothing_after_it() -> None:
    """Planned from an older log start, then DeleteRecords moved it inside a batch: the skip copies
    the rest of that batch, whatever the range's start was."""
    logs = {("t", 0): [batch(0, 10), batch(10, 10)]}
    target, result = straddled(DeletedSource(logs, 4), PartitionRange("t", 0, 0, 20, "A.t", exact=True))
    assert [o for o, _ in target.records[("A.t", 0)]] == list(range(4, 20))
    assert (result.lost_start, result.lost_end) == (0, 4) and result.syncs == ((4, 0), (20, 16))


def test_aborted_records_below_an_exact_start_do_not_count_as_dropped() -> None:
    producer = 5
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer,
                                        producer_epoch=0, base_sequence=0, batch_size=1 << 20)
    for i in range(10):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v", headers=[])
    log = [bytes(builder.build()), batch(10, 10)]
    source = FakeSource({("t", 0): log})
    fetch = source.fetch

    def fetch_aborted(node: int, positions: dict[TP, int], **kw: object) -> Answer:
        answer = fetch(node, positions, **kw)
        answer.value = {tp: FetchedPartition(d.error_code, d.high_watermark, d.last_stable_offset,
                                             d.log_start_offset, ((producer, 0),), d.records)
                        for tp, d in answer.value.items()}
        return answer

    source.fetch = fetch_aborted  # type: ignore[method-assign]
    target, result = straddled(source, PartitionRange("t", 0, 6, 20, "A.t", exact=True))
    assert result.dropped == 4, "records 6-9 of the aborted batch, not the 6 before the start"
    assert [o for o, _ in target.records[("A.t", 0)]] == list(range(10, 20))


def test_a_copy_that_does_not_tail_records_its_progress_at_its_end() -> None:
    tp = ("t", 0)
    source = ArrivingSource({tp: [batch(o, 10) for o in range(0, 30, 10)]}, {tp: []})
    target = FakeTarget()
    saved: list[dict] = []

    class Sink:
        def write_syncs(self, syncs: object, history: object) -> None:
            pass

        def save_positions(self, positions: dict, epochs: object = None) -> None:
            saved.append(dict(positions))

    window = TailWindow(time.monotonic(), progress=TailProgress(Sink(), 60.0))  # no tail: closed at once
    c = Copier(source, target, [PartitionRange("t", 0, 0, 30, "A.t")], CopySettings(), CopyMode(tail=window))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {("A.t", 0): 2}  # type: ignore[method-assign]
    (result,) = c.run()
    assert (result.next_offset, result.tailed) == (30, 0)
    assert saved == [{tp: 29}], "the positions are durable before the micro-batch commits"
