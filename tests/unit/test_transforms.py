"""MM2's connector transforms: the chain's keys, Connect's rules, the built-ins, and refusals."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.config import load_text
from mm2py.engine.supervisor import Verdict, classify
from mm2py.errors import TransformFailedError, from_task_failure
from mm2py.kafka import batches as rb
from mm2py.kafka.batches import Record
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import LinkFailed, TransformError, chain_for, check_flows, transform_keys

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."


def rec(offset: int, value: bytes | None = b"v", headers: tuple = ()) -> Record:
    return Record(offset, 1000 + offset, b"k", value, headers)


def test_filter_with_a_header_predicate_drops_only_matching_records() -> None:
    chain = chain_for({"transforms": "drop", "transforms.drop.type": T + "Filter",
                       "transforms.drop.predicate": "test", "predicates": "test",
                       "predicates.test.type": P + "HasHeaderKey", "predicates.test.name": "test-record"})
    assert chain.apply("A.t", rec(0, headers=(("test-record", b"1"),))) is None
    kept = rec(1, headers=(("other", b"1"),))
    assert chain.apply("A.t", kept) == kept


def test_negate_inverts_the_predicate_and_tombstones_are_a_predicate() -> None:
    chain = chain_for({"transforms": "keep_tombstones", "transforms.keep_tombstones.type": T + "Filter",
                       "transforms.keep_tombstones.predicate": "dead", "transforms.keep_tombstones.negate": "true",
                       "predicates": "dead", "predicates.dead.type": P + "RecordIsTombstone"})
    assert chain.apply("A.t", rec(0)) is None
    assert chain.apply("A.t", rec(1, value=None)) is not None


def test_links_run_in_order_and_topic_predicates_match_the_remote_name_whole() -> None:
    raw = {"transforms": "strip,drop", "transforms.strip.type": T + "DropHeaders",
           "transforms.strip.headers": "secret, trace", "transforms.drop.type": T + "Filter",
           "transforms.drop.predicate": "audit", "predicates": "audit",
           "predicates.audit.type": P + "TopicNameMatches", "predicates.audit.pattern": "A\\.audit.*"}
    chain = chain_for(raw)
    out = chain.apply("A.orders", rec(0, headers=(("secret", b"s"), ("id", b"1"), ("trace", None))))
    assert out is not None and out.headers == (("id", b"1"),)
    assert chain.apply("A.audit-log", rec(1)) is None
    assert chain.apply("B.A.audit", rec(2)) is not None, "the pattern matches the whole name"
    # per topic, a link whose topic predicate cannot hold is left out
    assert [link.name for link in chain.for_topic("A.orders").links] == ["strip"]
    assert [link.name for link in chain.for_topic("A.audit").links] == ["strip", "drop"]


def test_insert_header_appends_a_header_without_a_value_after_any_of_that_name() -> None:
    chain = chain_for({"transforms": "tag", "transforms.tag.type": T + "InsertHeader",
                       "transforms.tag.header": "id", "transforms.tag.value.literal": " null "})
    out = chain.apply("A.t", rec(0, headers=(("id", b"1"), ("x", b"2"))))
    assert out is not None and out.headers == (("id", b"1"), ("x", b"2"), ("id", None))
    assert chain.apply("A.t", rec(1)).headers == (("id", None),)  # type: ignore[union-attr]


@pytest.mark.parametrize(("raw", "key", "why"), [
    ({"transforms": "r", "transforms.r.type": T + "TimestampRouter", "transforms.r.timestamp.format": "EEE"},
     "transforms.r.timestamp.format", "not translated"),
    ({"transforms": "m", "transforms.m.type": T + "MaskField$Value"}, "transforms.m.type", "needs a schema"),
    ({"transforms": "x", "transforms.x.type": "org.apache.kafka.acme.Scrub"}, "transforms.x.type",
     "refuses any other class"),
    ({"transforms": "x"}, "transforms.x.type", "missing"),
    ({"transforms": "f", "transforms.f.type": T + "Filter", "transforms.f.predicate": "p"},
     "transforms.f.predicate", "not listed"),
    ({"predicates": "p", "predicates.p.type": P + "Nope"}, "predicates.p.type", "TopicNameMatches"),
    ({"transforms": "d", "transforms.d.type": T + "DropHeaders"}, "transforms.d.headers", "required"),
    ({"transforms": "i", "transforms.i.type": T + "InsertHeader", "transforms.i.value.literal": "null"},
     "transforms.i.header", "required"),
    ({"transforms": "i", "transforms.i.type": T + "InsertHeader", "transforms.i.header": "h"},
     "transforms.i.value.literal", "required"),
    # MM2's header converter refuses the typed value Connect parses any other literal into
    ({"transforms": "i", "transforms.i.type": T + "InsertHeader", "transforms.i.header": "h",
      "transforms.i.value.literal": "mirrored"}, "transforms.i.value.literal", "ByteArrayConverter"),
    ({"transforms": "i", "transforms.i.type": T + "InsertHeader", "transforms.i.header": "h",
      "transforms.i.value.literal": "NULL"}, "transforms.i.value.literal", "ByteArrayConverter"),
])
def test_what_cannot_be_honoured_is_refused_naming_the_key(raw: dict, key: str, why: str) -> None:
    with pytest.raises(TransformError) as e:
        chain_for(raw)
    assert e.value.key == key and why in str(e.value), str(e.value)


def test_a_file_with_transforms_loads_them_per_flow_and_refuses_at_start() -> None:
    text = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "A->B.enabled = true\ntransforms = strip\ntransforms.strip.type = " + T + "DropHeaders\n"
            "transforms.strip.headers = secret\nA->B.transforms.strip.headers = pii\n")
    config = load_text(text)
    assert "transforms.strip.headers" not in " ".join(config.unknown_keys)
    [flow] = config.enabled_flows
    assert dict(transform_keys(flow.raw))["transforms.strip.headers"] == "pii", "the flow's key wins"
    check_flows([flow], lambda f: False)
    bad = load_text(text + "A->B.transforms = strip, route\nA->B.transforms.route.type = " + T + "TimeRouter\n")
    with pytest.raises(TransformError):
        chain_for(bad.enabled_flows[0].raw)
    with pytest.raises(Exception, match="transforms.route.type.*flow A->B"):
        check_flows(bad.enabled_flows, lambda f: False)
    with pytest.raises(Exception, match="identity cycle"):
        check_flows([flow], lambda f: True)


def header_batch(base_offset: int, marks: list[bool]) -> bytes:
    """A batch of ``len(marks)`` records from ``base_offset``; marked ones carry the header ``drop``."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, mark in enumerate(marks):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v%d" % (base_offset + i),
                       headers=[("drop", b"1")] if mark else [("keep", b"1")])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def test_dropped_records_leave_offset_gaps_that_the_syncs_follow() -> None:
    chain = chain_for({"transforms": "f", "transforms.f.type": T + "Filter", "transforms.f.predicate": "p",
                       "predicates": "p", "predicates.p.type": P + "HasHeaderKey", "predicates.p.name": "drop"})
    writer = TransformingWriter(chain)
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 10, "A.t"))
    buf = header_batch(0, [False, False, True, True, False, False, False, True, False, False])
    [view] = rb.split_batches(buf)
    writer.enqueue(part, buf, view, None)
    [(_payload, pending)] = part.queue
    assert pending.offsets == (0, 1, 4, 5, 6, 8, 9) and part.dropped == 3
    assert part.result().transformed == (("f", 10, 7, 3, 0),), "10 reached the Filter, 7 passed"
    part.send_next()
    part.acked(500, lag_max=1000)
    # each gap breaks the run: a consumer committed at a dropped record resumes at the next kept one
    assert part.syncs == [(0, 500), (4, 502), (8, 505)] and part.run_next == (10, 507)


def test_a_topic_no_link_touches_keeps_the_raw_batch() -> None:
    chain = chain_for({"transforms": "f", "transforms.f.type": T + "Filter", "transforms.f.predicate": "p",
                       "predicates": "p", "predicates.p.type": P + "TopicNameMatches", "predicates.p.pattern": "A.x"})
    writer = TransformingWriter(chain)
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 3, "A.t"))
    buf = header_batch(0, [True, True, True])
    [view] = rb.split_batches(buf)
    writer.enqueue(part, buf, view, None)
    [(_payload, pending)] = part.queue
    assert pending.offsets is None and part.rebuilt == 0 and part.dropped == 0


MASK = "tests.plugins.MaskDigits"


def test_a_python_transform_is_built_from_its_keys_and_runs_in_the_chain() -> None:
    raw = {"transforms": "mask, strip", "transforms.mask.type": MASK, "transforms.mask.keep": "2",
           "transforms.mask.by": " mm2py ", "transforms.mask.predicate": "orders", "transforms.mask.negate": "false",
           "transforms.strip.type": T + "DropHeaders", "transforms.strip.headers": "secret",
           "predicates": "orders", "predicates.orders.type": P + "TopicNameMatches", "predicates.orders.pattern": "A.o"}
    chain = chain_for(raw)
    card = rec(7, value=b"card 4111-2222", headers=(("secret", b"s"),))
    assert chain.apply("A.o", card) == Record(7, 1007, b"k", b"card ****-**22", (("masked-by", b"mm2py"),))
    assert chain.apply("A.o", rec(8, value=b"DROP 1")) is None
    assert chain.apply("A.o", rec(9, value=None)) is None
    assert chain.apply("A.x", card) == Record(7, 1007, b"k", b"card 4111-2222", ()), "its predicate held only"
    # the class gets the link's own keys, strings, the chain's keys left out
    seen: list[dict[str, str]] = []
    Recording.seen = seen
    chain_for({**raw, "transforms.mask.type": f"{__name__}.Recording"})
    assert seen == [{"keep": "2", "by": "mm2py"}]


@pytest.mark.parametrize(("path", "why"), [
    ("tests.no_such_module.Mask", "cannot import module 'tests.no_such_module'"),
    ("tests.plugins.NoSuchClass", "module 'tests.plugins' has no 'NoSuchClass'"),
    ("io.confluent.connect.transforms.Drop$Value", "needs a Python port"),
    (f"{__name__}.MASK", "not a class"),
    ("Scrub", "not a Python class path"),
])
def test_a_python_transform_that_does_not_load_is_refused_naming_key_and_path(path: str, why: str) -> None:
    with pytest.raises(TransformError) as e:
        chain_for({"transforms": "x", "transforms.x.type": path})
    assert e.value.key == "transforms.x.type" and why in str(e.value) and path in str(e.value), str(e.value)


def test_a_python_transform_whose_constructor_refuses_its_keys_is_refused_at_start() -> None:
    with pytest.raises(TransformError, match=r"transforms.mask.type.*MaskDigits.*ValueError"):
        chain_for({"transforms": "mask", "transforms.mask.type": MASK, "transforms.mask.keep": "four"})


def test_a_python_transform_that_raises_or_returns_no_record_fails_the_copy_naming_the_record() -> None:
    chain = chain_for({"transforms": "mask", "transforms.mask.type": MASK, "transforms.mask.fail.offset": "3"})
    with pytest.raises(LinkFailed, match="'mask' .tests.plugins.MaskDigits. raised ValueError"):
        chain.apply("A.t", rec(3))
    writer = TransformingWriter(chain, flow="A->B")
    part = PartitionCopy.of(PartitionRange("t", 2, 0, 10, "A.t"))
    buf = header_batch(0, [False] * 5)
    [view] = rb.split_batches(buf)
    with pytest.raises(TransformFailedError) as e:
        writer.enqueue(part, buf, view, None)
    text = str(e.value)
    assert text == ("flow A->B: transform 'mask' (tests.plugins.MaskDigits) raised ValueError: cannot mask b'v3' "
                    "on the record at topic t partition 2 offset 3 (remote topic A.t)")
    assert not part.queue and isinstance(e.value.__cause__, ValueError)
    # across Spark: the class and its words come back, and the flow stops rather than waits
    back = from_task_failure("flow A->B", f"Traceback ...\nmm2py.errors.TransformFailedError: {text}\n")
    assert isinstance(back, TransformFailedError) and "offset 3" in str(back)
    assert classify(back, ever_ran=True) is Verdict.FATAL


class Recording:
    seen: list[dict[str, str]] = []

    def __init__(self, config: dict[str, str]) -> None:
        self.seen.append(config)

    def __call__(self, topic: str, record: Record) -> Record:
        return record


class Wrong:
    def __init__(self, config: dict[str, str]) -> None:
        self.what = config["what"]

    def __call__(self, topic: str, record: Record) -> object:
        return {"str": "text", "value": replace(record, value="text"),
                "headers": replace(record, headers=[("h", b"")])}[self.what]


@pytest.mark.parametrize("what", ["str", "value", "headers"])
def test_a_python_transform_returning_what_is_not_a_record_fails(what: str) -> None:
    chain = chain_for({"transforms": "w", "transforms.w.type": f"{__name__}.Wrong", "transforms.w.what": what})
    with pytest.raises(LinkFailed, match="'w' .*Wrong. returned"):
        chain.apply("A.t", rec(0))


def test_records_dropped_before_a_copys_first_kept_one_translate_to_it() -> None:
    """The partition's first copy: a group committed inside the leading dropped stretch resumes at
    the first kept record, as everywhere else across a gap; a whole batch dropped included."""
    from mm2py.checkpoint.translation import SyncIndex
    from mm2py.formats import OffsetSync

    chain = chain_for({"transforms": "f", "transforms.f.type": T + "Filter", "transforms.f.predicate": "p",
                       "predicates": "p", "predicates.p.type": P + "HasHeaderKey", "predicates.p.name": "drop"})
    writer = TransformingWriter(chain)
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 20, "A.t"))
    for base, marks in ((0, [True] * 5), (5, [True, True, False, False, True, False, False, True, True, True]),
                        (15, [True, False, False, False, True])):
        buf = header_batch(base, marks)
        [view] = rb.split_batches(buf)
        writer.enqueue(part, buf, view, None)
    assert len(part.queue) == 2, "the batch of dropped records only is not written"
    downstream = 0
    while part.queue:
        part.send_next()
        count = part.in_flight[0].count
        part.acked(downstream, lag_max=1000)
        downstream += count
    index = SyncIndex()
    for up, down in part.result().syncs:
        index.add(OffsetSync("t", 0, up, down))
    kept = [7, 8, 10, 11, 16, 17, 18]  # landed at 0..6
    for u in range(0, 21):
        expected = next((i for i, k in enumerate(kept) if k >= u), len(kept))
        assert index.translate("t", 0, u) == expected, (u, part.syncs)


def test_a_chain_counts_per_link_records_in_out_dropped_and_failed() -> None:
    chain = chain_for({"transforms": "strip,drop", "transforms.strip.type": T + "DropHeaders",
                       "transforms.strip.headers": "x", "transforms.drop.type": T + "Filter",
                       "transforms.drop.predicate": "dead", "predicates": "dead",
                       "predicates.dead.type": P + "RecordIsTombstone"})
    counts: dict[str, list[int]] = {}
    tallies = chain.tallies(counts)
    for i in range(10):
        chain.apply("A.t", rec(i, value=None if i % 5 == 0 else b"v"), tallies)
    # every record reaches the Filter; it drops the two tombstones its predicate holds on
    assert counts == {"strip": [10, 10, 0, 0], "drop": [10, 8, 2, 0]}
