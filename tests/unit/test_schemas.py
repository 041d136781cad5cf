"""Issue 26, pure logic: wire-format frames, canonical matching, subject names, config and start checks."""

from __future__ import annotations

import random

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.config import load_text
from mm2py.errors import ConfigError, SchemaRegistryError
from mm2py.flowspec import FlowSpec
from mm2py.kafka import batches as rb
from mm2py.schemas import frames, inplace
from mm2py.schemas.canonical import NotAvro, fingerprint
from mm2py.schemas.check import check_schemas, problems_of
from mm2py.schemas.settings import SchemaSettings
from mm2py.schemas.subjects import Untranslatable, target_subject

ORDER = '{"type":"record","name":"Order","namespace":"s","fields":[{"name":"id","type":"long","doc":"the id"}]}'
SAME = '{ "namespace": "s", "name": "Order", "type": "record", "fields": [ {"type": "long", "name": "id"} ] }'
ADDR = '{"type":"record","name":"Addr","namespace":"s","fields":[{"name":"street","type":"string"}]}'
USES = '{"type":"record","name":"Person","namespace":"s","fields":[{"name":"home","type":"s.Addr"}]}'


def test_frames_read_and_rewrite_the_id_keeping_the_body() -> None:
    data = b"\x00\x00\x00\x01\x02body"
    assert frames.schema_id(data) == 258
    assert frames.with_id(data, 7) == b"\x00\x00\x00\x00\x07body"
    with pytest.raises(frames.FrameError, match="magic byte 1"):
        frames.schema_id(b"\x01\x00\x00\x00\x02")
    with pytest.raises(frames.FrameError, match="shorter"):
        frames.schema_id(b"\x00\x00")


def test_fingerprints_match_by_parsing_canonical_form() -> None:
    assert fingerprint(ORDER) == fingerprint(SAME)  # docs, attribute order and white space do not count
    assert fingerprint(ORDER) != fingerprint(ORDER.replace('"long"', '"int"'))
    assert fingerprint(USES, [ADDR]) != fingerprint(USES, [ADDR.replace("string", "bytes")])
    with pytest.raises(NotAvro):
        fingerprint('syntax = "proto3"; message M {}')


def test_topic_named_subjects_follow_the_remote_topic() -> None:
    assert target_subject("orders-value", "orders", "A.orders") == "A.orders-value"
    assert target_subject("orders-key", "orders", "A.orders") == "A.orders-key"
    assert target_subject("orders-shop.Order", "orders", "A.orders") == "A.orders-shop.Order"  # TopicRecordName
    assert target_subject("shop.Order", "orders", "A.orders") == "shop.Order"  # RecordNameStrategy keeps it
    assert target_subject("orders-value", "orders", "orders") == "orders-value"  # Identity policy


BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def test_registry_settings_are_per_cluster_and_reach_no_kafka_client() -> None:
    config = load_text(BASE + "A.schema.registry.url = http://ra:8081\nA.schema.registry.basic.auth.user.info = u:p\n"
                              "B.schema.registry.url = http://rb:8081\nA->B.schemas.mode = translate\n"
                              "A->B.schemas.on.error = dead-letter\n")
    flow = config.enabled_flows[0]
    assert dict(flow.source.schema_registry) == {"url": "http://ra:8081", "basic.auth.user.info": "u:p"}
    assert not any("schema" in k for k in (*flow.source.consumer, *flow.target.producer, *flow.source.client))
    settings = SchemaSettings.for_flow(FlowSpec.alone(flow))
    assert settings is not None and settings.translates and settings.on_error == "dead-letter"
    assert settings.dead_letter_topic == "mm2py-schemas-dead-letter.A.internal"
    # MM2's heartbeats (a key starting with a 0 byte that is no frame) pass as bytes
    assert not settings.carries_schemas("heartbeats") and not settings.carries_schemas("B.heartbeats")
    assert settings.carries_schemas("orders") and settings.carries_schemas("heartbeats-of-pumps")
    assert not problems_of(config.enabled_flows)


def test_a_mode_without_registries_is_refused_naming_the_keys() -> None:
    flows = load_text(BASE + "A->B.schemas.mode = translate\nA.schema.registry.url = http://ra:8081\n").enabled_flows
    with pytest.raises(ConfigError, match=r"B.schema.registry.url.*schemas.mode = translate"):
        check_schemas(flows)
    # preserve mirrors the registry's storage topic: the flow must select it; no registry is needed
    assert not problems_of(load_text(BASE + "schemas.mode = preserve\n").enabled_flows)
    narrow = load_text(BASE + "schemas.mode = preserve\nA->B.topics = orders\n").enabled_flows
    assert [(p.key, "'kafkasql-journal'" in p.message) for p in problems_of(narrow)] == [("A->B.topics", True)]
    assert not problems_of(load_text(BASE + "schemas.mode = preserve\nA->B.topics = orders, _schemas\n"
                                            "schemas.storage.topic = _schemas\n").enabled_flows)
    assert SchemaSettings.for_flow(FlowSpec.alone(load_text(BASE).enabled_flows[0])) is None  # off by default
    hashed = load_text(BASE + "A->B.schemas.mode = translate\nA.schema.registry.url = http://ra\n"
                              "B.schema.registry.url = http://rb\nA->B.partition.mismatch = hash\n").enabled_flows
    assert [p.key for p in problems_of(hashed)] == ["A->B.partition.mismatch"]


def test_bad_values_are_refused() -> None:
    with pytest.raises(ConfigError, match="schemas.on.error"):
        load_text(BASE + "A->B.schemas.on.error = ignore\n")


def test_a_registry_that_does_not_answer_is_refused_at_start() -> None:
    flows = load_text(BASE + "A->B.schemas.mode = translate\nA.schema.registry.url = http://127.0.0.1:1\n"
                             "B.schema.registry.url = http://127.0.0.1:1\n").enabled_flows
    with pytest.raises(SchemaRegistryError, match=r"http://127.0.0.1:1 did not answer.*\[cluster=A\]"):
        check_schemas(flows)


def _batch(records: list[tuple], codec: int) -> tuple[bytes, rb.BatchView]:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for delta, (key, value, headers) in enumerate(records):
        builder.append(delta, timestamp=1_700_000_000_000 + delta, key=key, value=value, headers=headers)
    buf = bytes(builder.build())
    return buf, next(rb.split_batches(buf))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_ids_are_rewritten_in_place_and_nothing_else_changes(codec: int) -> None:
    ids = {7: 107, 8: 108, 9: 109}

    def mapped(source: bytes) -> bytes:
        target = ids.get(int.from_bytes(source, "big"))
        if target is None:
            raise Untranslatable(f"schema id {int.from_bytes(source, 'big')} is unknown")
        return target.to_bytes(4, "big")

    def frame(schema_id: int, body: bytes) -> bytes:
        return b"\x00" + schema_id.to_bytes(4, "big") + body

    long_body = bytes(range(256)) * 3  # lengths past one varint byte
    records = [
        (b"plain-key", frame(7, b"v0"), []),
        (frame(8, b"k1"), frame(7, long_body), [("trace", b"abc")]),
        (None, None, []),  # a tombstone
        (b"raw-key", b"raw-value", [(frames.VALUE_HEADER, frame(9, b"")), ("x", None)]),
    ]
    buf, view = _batch(records, codec)
    out, out_view = inplace.rewritten_batch(buf, view, mapped)
    assert out_view.record_count == 4 and out_view.size == len(out) and rb.codec_of(out, out_view) == codec
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in rb.decode(out, out_view)]
    assert got == [
        (0, 1_700_000_000_000, b"plain-key", frame(107, b"v0"), ()),
        (1, 1_700_000_000_001, frame(108, b"k1"), frame(107, long_body), (("trace", b"abc"),)),
        (2, 1_700_000_000_002, None, None, ()),
        (3, 1_700_000_000_003, b"raw-key", b"raw-value", ((frames.VALUE_HEADER, frame(109, b"")), ("x", None))),
    ]
    for bad, why in ((frame(5, b"v"), "unknown"), (b"\x01\x00\x00\x00\x07v", "magic byte 1"), (b"\x00", "shorter")):
        buf, view = _batch([(None, frame(7, b"ok"), []), (None, bad, [])], codec)
        with pytest.raises(Untranslatable, match=why):
            inplace.rewritten_batch(buf, view, mapped)


def test_untranslatable_records_are_counted_per_partition_and_action() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from mm2py.metrics import Metrics
    from mm2py.source.ranges import RangeResult

    flow = load_text(BASE).enabled_flows[0]
    m = Metrics(process=False)
    m.observe_batch(flow, [RangeResult("orders", 0, 0, 10, 10, records=7, schema_dead_lettered=3),
                           RangeResult("orders", 1, 0, 4, 4, records=0, schema_dead_lettered=4)])
    m.observe_batch(flow, [RangeResult("orders", 0, 10, 12, 12, records=2, schema_passed=2)])
    got = {(s.labels["partition"], s.labels["action"]): s.value
           for f in text_string_to_metric_families(generate_latest(m.registry).decode())
           for s in f.samples if s.name == "mm2py_schema_untranslatable_records"}
    assert got == {("0", "dead-letter"): 3, ("0", "pass"): 2, ("1", "dead-letter"): 4}
    packed = RangeResult.unpack(RangeResult.pack([RangeResult("orders", 0, 10, 12, 12, schema_passed=2)])[0])
    assert packed[0].schema_passed == 2  # the row Spark carries back keeps the counts


def test_status_shows_what_schemas_on_error_did() -> None:
    from mm2py.ops.replicator import parse_health
    from mm2py.ops.status import FlowStatus
    from mm2py.ops.status_view import render

    text = ('mm2py_flow_state{source="A",target="B",state="running"} 1\n'
            'mm2py_schema_untranslatable_records{source="A",target="B",topic="A.o",partition="0",action="pass"} 2\n'
            'mm2py_schema_untranslatable_records{source="A",target="B",topic="A.o",partition="1",action="pass"} 3\n'
            'mm2py_schema_untranslatable_records{source="A",target="B",topic="A.o",partition="1",'
            'action="dead-letter"} 4\n')
    health = parse_health(text)["A->B"]
    assert health.schema_errors == (("dead-letter", 4), ("pass", 5))
    out = render([FlowStatus("A->B", replicator_state="running", replicator_since=0.0,
                             replicator_schema_errors=health.schema_errors)])
    assert "flow A->B: schemas: untranslatable records 4 dead-lettered, 5 written as they were" in out


def test_raw_keys_stay_untouched_even_when_they_look_framed() -> None:
    long_key = (42).to_bytes(8, "big")  # Kafka's LongSerializer: starts with a 0 byte, no frame
    buf, view = _batch([(long_key, b"\x00\x00\x00\x00\x07v", [])], 3)
    seen: list[bytes] = []

    def mapped(source: bytes) -> bytes:
        seen.append(source)
        return (107).to_bytes(4, "big")

    out, out_view = inplace.rewritten_batch(buf, view, mapped, keys=False)
    [rec] = rb.decode(out, out_view)
    assert rec.key == long_key and rec.value == b"\x00\x00\x00\x00\x6bv" and seen == [b"\x00\x00\x00\x07"]
    out, out_view = inplace.rewritten_batch(buf, view, mapped, keys=True)  # schemas.keys = framed
    assert rb.decode(out, out_view)[0].key != long_key


def _random_records(rng: random.Random, kind: str, count: int) -> list[tuple]:
    """Records of every shape the id rewrite meets: raw, framed and null keys and values, long
    bodies (multi-byte varints), id headers and other headers, values that are no frame."""
    def frame(schema_id: int, body: bytes) -> bytes:
        return b"\x00" + schema_id.to_bytes(4, "big") + body

    out = []
    for _ in range(count):
        body = rng.randbytes(rng.choice([0, 3, 60, 200, 1000]))
        key = rng.choice([None, b"k%d" % rng.randrange(100_000), frame(rng.choice([7, 8]), body[:20]),
                          (42).to_bytes(8, "big"), b"\x00\x00"])
        value = frame(rng.choice([7] if kind == "one id" else [7, 8, 9]), body)
        headers: list = []
        if kind == "bad" and rng.random() < 0.05:
            value = rng.choice([None, b"\x01abcdef", b"\x00ab", frame(5, b"x")])
        if kind == "headers" and rng.random() < 0.1:
            headers = rng.choice([[("x", b"y")], [(frames.VALUE_HEADER, frame(8, b""))]])
        out.append((key, value, headers))
    return out


def test_the_array_walk_finds_the_ids_the_record_walk_finds() -> None:
    """Batches of VECTOR_MIN records or more are read by ``_id_positions`` (numpy), smaller ones and
    those it does not take record by record: both give the same bytes, or the same error."""
    rng = random.Random(26)
    ids = {7: 107, 8: 8, 9: 109}  # 8 maps to itself

    def mapped(source: bytes) -> bytes:
        target = ids.get(int.from_bytes(source, "big"))
        if target is None:
            raise Untranslatable(f"schema id {int.from_bytes(source, 'big')} is unknown")
        return target.to_bytes(4, "big")

    def outcome(data: bytes, count: int, keys: bool, walk: str) -> object:
        try:
            if walk == "records":
                out = bytearray(data)
                inplace.rewrite_records(out, count, mapped, keys)
                return bytes(out)
            if inplace._id_positions(bytearray(data), count, keys) is None:
                return None
            out = bytearray(data)
            changed = inplace._rewrite_section(out, count, mapped, keys)
            assert changed == (out != data)
            return bytes(out)
        except Untranslatable as e:
            return str(e)

    taken = 0
    for trial in range(120):
        kind = ("one id", "mixed", "bad", "headers")[trial % 4]
        count = rng.choice([inplace.VECTOR_MIN, 100, 700])
        keys = trial % 3 != 0
        buf, view = _batch(_random_records(rng, kind, count), 0)
        data, count = buf[rb.HEADER_SIZE:], view.record_count
        by_array = outcome(data, count, keys, "array")
        if by_array is not None:
            taken += 1
            assert by_array == outcome(data, count, keys, "records"), (trial, kind, keys)
    assert taken >= 60  # the array walk took the batches without headers or bad values


def test_a_batch_whose_ids_all_map_to_themselves_passes_as_the_source_wrote_it() -> None:
    records = [(b"k%d" % i, b"\x00\x00\x00\x00\x07" + b"v" * (i + 40), []) for i in range(200)]
    for count in (3, 200):  # the record walk and the array walk
        buf, view = _batch(records[:count], 3)
        out, out_view = inplace.rewritten_batch(buf, view, lambda source: source)
        assert out is buf and out_view is view
        out, out_view = inplace.rewritten_batch(buf, view, lambda source: b"\x00\x00\x00\x08")
        assert out is not buf and rb.codec_of(out, out_view) == rb.codec_of(buf, view)
        assert [r.value[:5] for r in rb.decode(out, out_view)] == [b"\x00\x00\x00\x00\x08"] * count
