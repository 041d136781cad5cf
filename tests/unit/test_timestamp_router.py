"""Connect's TimestampRouter in mm2py: the date format, the window names, the writer, and what is refused."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.config import load_text
from mm2py.errors import ConfigError
from mm2py.kafka import batches as rb
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.time_routing import TimeRoutingWriter, WindowOutput
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import TransformError, chain_for, check_flows
from mm2py.transforms.timestamp_router import date_format, format_utc, timestamp_router_of

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
TR = T + "TimestampRouter"
TS = 1700000000123  # 2023-11-14T22:13:20.123Z


@pytest.mark.parametrize(("pattern", "out"), [
    ("yyyyMMdd", "20231114"),
    ("yyyyMMddHH", "2023111422"),
    ("yy-MM-dd_HH.mm.ss.SSS", "23-11-14_22.13.20.123"),
    ("yyyy'T'HH''", "2023T22'"),
    ("'week'-dd", "week-14"),
])
def test_simple_date_format_letters_translate_in_utc(pattern: str, out: str) -> None:
    assert format_utc(date_format(pattern, "k"), TS) == out


@pytest.mark.parametrize(("pattern", "why"), [
    ("yyyyMMM", "'MMM' is not translated"), ("EEE", "'EEE'"), ("yyyy'x", "closing quote"), ("hh", "'hh'"),
])
def test_a_pattern_that_cannot_be_translated_is_refused_naming_the_key(pattern: str, why: str) -> None:
    with pytest.raises(TransformError) as e:
        date_format(pattern, "transforms.r.timestamp.format")
    assert e.value.key == "transforms.r.timestamp.format" and why in str(e.value)


def test_the_defaults_are_connects_and_window_names_map_back() -> None:
    router = timestamp_router_of({"transforms": "r", "transforms.r.type": TR})
    assert router is not None and router.window("A.orders", TS) == "A.orders-20231114"
    assert router.pattern("A.orders") == "A.orders-${timestamp}"
    remote_of = router.windows_of()
    assert remote_of("A.orders-20231114") == "A.orders"
    assert remote_of("A.orders") is None and remote_of("A.orders-2023111") is None


@pytest.mark.parametrize(("extra", "key", "why"), [
    ({"transforms.r.topic.format": "${timestamp}"}, "transforms.r.topic.format", "${topic} once"),
    ({"transforms.r.topic.format": "${topic}:${timestamp}"}, "transforms.r.topic.format", "topic name"),
    ({"transforms.r.timestamp.format": "yyyy-MM-dd HH"}, "transforms.r.timestamp.format", "legal"),
    ({"transforms": "r, s", "transforms.s.type": TR}, "transforms.s.type", "one per flow"),
    ({"transforms": "r, s", "transforms.s.type": T + "RegexRouter", "transforms.s.regex": "x",
      "transforms.s.replacement": "y"}, "transforms.s.type", "before the TimestampRouter"),
    ({"transforms.r.predicate": "h", "predicates": "h", "predicates.h.type": P + "HasHeaderKey",
      "predicates.h.name": "x"}, "transforms.r.predicate", "topic alone"),
])
def test_what_a_router_cannot_honour_is_refused_naming_the_key(extra: dict, key: str, why: str) -> None:
    with pytest.raises(TransformError) as e:
        chain_for({"transforms": "r", "transforms.r.type": TR, **extra})
    assert e.value.key == key and why in str(e.value), str(e.value)


FILE = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
        "transforms = r\ntransforms.r.type = " + TR + "\n")


def test_start_refuses_a_router_with_exactly_once_translate_or_on_a_cycle() -> None:
    [flow] = load_text(FILE).enabled_flows
    check_flows([flow], lambda f: False)
    for changed, why in [(replace(flow, delivery=replace(flow.delivery, exactly_once="required")), "exactly-once"),
                         (replace(flow, schemas=replace(flow.schemas, mode="translate")), "translate")]:
        with pytest.raises(ConfigError, match=f"transforms.r.type.*{why}.*flow A->B"):
            check_flows([changed], lambda f: False)
    both = load_text(FILE + "B->A.enabled = true\n").enabled_flows
    with pytest.raises(ConfigError, match="TimestampRouter on a flow of a cycle"):
        check_flows(both, lambda f: False)


class Sent:
    """A ``RecordSender`` and ``WindowTopics`` stand-in: what would be produced, and which topics made."""

    def __init__(self) -> None:
        self.records: list[tuple[str, int, int, bytes | None]] = []
        self.made: list[tuple[str, str]] = []
        self.started = self.settled = False

    def start(self) -> None:
        self.started = True

    def send(self, topic: str, partition: int, rec: rb.Record) -> None:
        self.records.append((topic, partition, rec.offset, rec.value))

    def settle(self, what: str) -> None:
        self.settled = True

    def ensure(self, window: str, remote: str) -> None:
        if (window, remote) not in self.made:
            self.made.append((window, remote))


HOUR = 3600_000


def batch(base_offset: int, stamps: list[int], drop: set[int]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, ts in enumerate(stamps):
        builder.append(i, timestamp=ts, key=b"k", value=b"v%d" % (base_offset + i),
                       headers=[("drop", b"1")] if i in drop else [])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def test_records_go_in_order_to_their_window_same_partition_and_later_links_see_the_window() -> None:
    raw = {"transforms": "f, r, g", "transforms.f.type": T + "Filter", "transforms.f.predicate": "h",
           "transforms.r.type": TR, "transforms.r.topic.format": "${topic}-${timestamp}",
           "transforms.r.timestamp.format": "yyyyMMddHH",
           "transforms.g.type": T + "Filter", "transforms.g.predicate": "w",
           "predicates": "h, w", "predicates.h.type": P + "HasHeaderKey", "predicates.h.name": "drop",
           "predicates.w.type": P + "TopicNameMatches", "predicates.w.pattern": r"A\.t-2023111423"}
    chain, router = chain_for(raw), timestamp_router_of(raw)
    assert router is not None and router.position == 1
    sent = Sent()
    output = WindowOutput(sent, sent)  # type: ignore[arg-type]
    writer = TimeRoutingWriter(chain, router, output, TransformingWriter(chain))
    writer.start()
    part = PartitionCopy.of(PartitionRange("t", 2, 10, 16, "A.t"))
    base = 1700000000000 - 1700000000000 % HOUR  # 2023-11-14T22:00Z
    buf = batch(10, [base, base + 1, base + HOUR, base + 2, base + HOUR + 5, base + 2 * HOUR], drop={1})
    [view] = rb.split_batches(buf)
    writer.enqueue(part, buf, view, None)
    writer.settle()
    # offset 11 dropped before the router; the window 23 is filtered by the link after it (it sees that name)
    assert sent.records == [("A.t-2023111422", 2, 10, b"v10"), ("A.t-2023111422", 2, 13, b"v13"),
                            ("A.t-2023111500", 2, 15, b"v15")]
    assert [w for w, _ in sent.made] == ["A.t-2023111422", "A.t-2023111500"] and sent.started and sent.settled
    assert part.records == 3 and part.dropped == 3 and not part.queue, "nothing through the produce window"
    assert part.result().syncs == (), "no offset syncs: a source offset has no single remote offset"
    # a link whose topic predicate cannot hold on a window is left out there, and counts nothing
    assert {n: (i, o, d, f) for n, i, o, d, f in part.result().transformed} == {
        "f": (6, 5, 1, 0), "r": (5, 5, 0, 0), "g": (2, 0, 2, 0)}


def test_failover_and_failback_refuse_time_routed_topics_naming_router_and_topic() -> None:
    from mm2py.errors import Mm2pyError
    from mm2py.ops.failover import refuse_time_routed

    [flow] = load_text(FILE + "transforms.r.predicate = o\npredicates = o\npredicates.o.type = " + P
                       + "TopicNameMatches\npredicates.o.pattern = A\\\\.orders\n").enabled_flows
    refuse_time_routed(flow, ["A.audit"])  # not routed: its syncs translate it
    with pytest.raises(Mm2pyError, match=r"TimestampRouter 'r' \(transforms.r.type\).*A\.orders.*no offset syncs"):
        refuse_time_routed(flow, ["A.audit", "A.orders"])
    refuse_time_routed(flow, ["A.orders", "local"], windows=True)  # failback: no window topic committed
    with pytest.raises(Mm2pyError, match=r"A\.orders-20231114"):
        refuse_time_routed(flow, ["A.orders-20231114", "A.audit-20231114"], windows=True)


class FakeAdmin:
    """The target's admin as ``WindowTopics`` uses it: one remote topic of 3 partitions, 1 broker."""

    alias = "B"

    def __init__(self) -> None:
        self.created: list[tuple] = []

    def topics(self) -> dict[str, int]:
        return {"A.t": 3}

    def topic_configs(self, topics: list[str]) -> dict:
        from mm2py.kafka.resources import TopicConfigEntry
        return {"A.t": [TopicConfigEntry("retention.ms", "123", False), TopicConfigEntry("segment.ms", "9", True),
                        TopicConfigEntry("log.dirs", "/x", False, static_broker=True)]}

    def broker_count(self) -> int:
        return 1

    def create_topics(self, specs: list[tuple]) -> dict[str, bool]:
        self.created += specs
        return {specs[0][0]: False}  # another task made it first: taken as it is


def test_window_topics_take_the_remote_topics_partitions_and_set_configs_once() -> None:
    from mm2py.errors import KafkaError
    from mm2py.source.copy.window_topics import WindowTopics

    admin = FakeAdmin()
    topics = WindowTopics(admin, replication_factor=3)  # type: ignore[arg-type]
    topics.ensure("A.t-2023111422", "A.t")
    topics.ensure("A.t-2023111422", "A.t")
    assert admin.created == [("A.t-2023111422", 3, 1, {"retention.ms": "123"})], "rf capped by the brokers"
    with pytest.raises(KafkaError, match="remote topic is missing") as e:
        topics.ensure("A.gone-2023111422", "A.gone")
    assert e.value.topic == "A.gone"


def test_a_copy_task_builds_the_time_routing_writer_from_the_flows_keys_without_io() -> None:
    from mm2py.source.copy.copy_settings import CopySettings
    from mm2py.source.copy.task import CopySpec, TaskRun, _time_router
    from mm2py.transforms import transform_keys
    from mm2py.transforms.tolerance import error_policy

    [flow] = load_text(FILE + "transforms = f, r\ntransforms.f.type = " + T + "Filter\n"
                       "errors.tolerance = all\nerrors.deadletterqueue.topic.name = dlq\n").enabled_flows
    spec = CopySpec(flow.source, flow.target, CopySettings.for_flow(flow), transforms=transform_keys(flow.raw),
                    errors=error_policy(flow.raw), replication_factor=2)
    router = timestamp_router_of(dict(spec.transforms))
    assert router is not None
    writer = _time_router(spec, TaskRun("task-1"), router)
    assert [link.name for link in writer.before.links] == ["f"] and writer.after.links == ()
    assert writer.dead_letters is not None and writer.dead_letters.topic == "dlq" and writer.flow == "A->B"
    assert writer.output.topics.replication_factor == 2 and writer.output.sender.producer is None, "no I/O yet"


def test_a_copier_with_the_router_finishes_its_ranges_with_every_record_routed_and_no_syncs() -> None:
    from mm2py.source.copy.copier import Copier
    from mm2py.source.copy.copy_mode import CopyMode
    from mm2py.source.copy.copy_settings import CopySettings
    from tests.fakes.copy_path import FakeSource, FakeTarget

    raw = {"transforms": "r", "transforms.r.type": TR, "transforms.r.timestamp.format": "yyyyMMddHH"}
    chain, router = chain_for(raw), timestamp_router_of(raw)
    assert router is not None
    base = 1700000000000 - 1700000000000 % HOUR
    logs = {("t", p): [batch(o, [base + (o // 5 % 2) * HOUR + i for i in range(5)], set()) for o in range(0, 20, 5)]
            for p in (0, 1)}
    sent, target = Sent(), FakeTarget()
    writer = TimeRoutingWriter(chain, router, WindowOutput(sent, sent), TransformingWriter(chain))  # type: ignore[arg-type]
    ranges = [PartitionRange("t", p, 0, 20, "A.t") for p in (0, 1)]
    c = Copier(FakeSource(logs), target, ranges, CopySettings(), CopyMode(writer=writer))  # type: ignore[arg-type]
    c._target_leaders = lambda topics: {("A.t", p): 2 for p in (0, 1)}  # type: ignore[method-assign]
    results = c.run()
    assert {r.partition: (r.next_offset, r.records, r.syncs) for r in results} == {0: (20, 20, ()), 1: (20, 20, ())}
    assert not target.logs, "nothing through the produce window"
    for p in (0, 1):
        got = [(w, o) for w, part, o, _ in sent.records if part == p]
        assert [o for _, o in got] == list(range(20)), "source order per partition"
        assert {w for w, o in got if o // 5 % 2} == {"A.t-2023111423"} and \
            {w for w, o in got if not o // 5 % 2} == {"A.t-2023111422"}
    assert sent.settled, "settled before the results (the copier records progress after settle)"
