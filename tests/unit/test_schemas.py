"""Issue 26, pure logic: wire-format frames, canonical matching, subject names, config and start checks."""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.errors import ConfigError, SchemaRegistryError
from mm2py.schemas import frames
from mm2py.schemas.canonical import NotAvro, fingerprint
from mm2py.schemas.check import check_schemas, problems_of
from mm2py.schemas.settings import SchemaSettings
from mm2py.schemas.subjects import target_subject

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
    settings = SchemaSettings.for_flow(flow)
    assert settings is not None and settings.translates and settings.on_error == "dead-letter"
    assert settings.dead_letter_topic == "mm2py-schemas-dead-letter.A.internal"
    assert not problems_of(config.enabled_flows)


def test_a_mode_without_registries_is_refused_naming_the_keys() -> None:
    flows = load_text(BASE + "A->B.schemas.mode = translate\nA.schema.registry.url = http://ra:8081\n").enabled_flows
    with pytest.raises(ConfigError, match=r"B.schema.registry.url.*schemas.mode = translate"):
        check_schemas(flows)
    preserve = load_text(BASE + "schemas.mode = preserve\n").enabled_flows
    assert [p.key for p in problems_of(preserve)] == ["A->B.schemas.mode", "A.schema.registry.url",
                                                       "B.schema.registry.url"]
    assert SchemaSettings.for_flow(load_text(BASE).enabled_flows[0]) is None  # off by default


def test_bad_values_are_refused() -> None:
    with pytest.raises(ConfigError, match="schemas.on.error"):
        load_text(BASE + "A->B.schemas.on.error = ignore\n")


def test_a_registry_that_does_not_answer_is_refused_at_start() -> None:
    flows = load_text(BASE + "A->B.schemas.mode = translate\nA.schema.registry.url = http://127.0.0.1:1\n"
                             "B.schema.registry.url = http://127.0.0.1:1\n").enabled_flows
    with pytest.raises(SchemaRegistryError, match=r"http://127.0.0.1:1 did not answer.*\[cluster=A\]"):
        check_schemas(flows)
