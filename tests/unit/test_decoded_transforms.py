"""Python transforms on decoded Avro values (``decoded = True``): decode, encode back, failures named, refusals."""

from __future__ import annotations

import io
import json

import pytest
from confluent_kafka.schema_registry import Schema
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from mm2py.config import load_text
from mm2py.schemas import decode as schema_decode
from mm2py.schemas import frames
from mm2py.schemas.settings import carries_schemas
from mm2py.transforms import LinkFailed, Record, TransformError, chain_for, check_flows
from mm2py.transforms.decoded import SourceRegistry

ORDER = ('{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},'
         '{"name":"email","type":"string"}]}')
MASK = {"transforms": "mask", "transforms.mask.type": "tests.plugins.MaskAvroField", "transforms.mask.field": "email"}
SOURCE = SourceRegistry("A", {"url": "http://reg-a:8081"})


class FakeRegistry:
    """The source registry: id 7 is ``ORDER``, id 8 a JSON schema, others unknown."""

    def schema(self, schema_id: int) -> Schema | None:
        return {7: Schema(ORDER, "AVRO"), 8: Schema("{}", "JSON")}.get(schema_id)

    def resolved_references(self, refs: list) -> list[str]:
        return []


@pytest.fixture(autouse=True)
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_decode, "registry_for", lambda alias, settings: FakeRegistry())


def framed(datum: dict, schema_id: int = 7) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(json.loads(ORDER)), datum)
    return frames.with_id(b"\0\0\0\0\0", schema_id) + out.getvalue()


def read(value: bytes) -> dict:
    return schemaless_reader(io.BytesIO(value[frames.PREFIX:]), parse_schema(json.loads(ORDER)), None)


def test_the_field_is_masked_and_written_back_with_the_same_schema_and_id() -> None:
    chain = chain_for(MASK, SOURCE)
    record = Record(3, 1000, b"key", framed({"id": 3, "email": "a@b.c"}), (("h", b"1"),))
    out = chain.apply("A.orders", record)
    assert out is not None and out.value is not None
    assert frames.schema_id(out.value) == 7 and read(out.value) == {"id": 3, "email": "***"}
    assert (out.offset, out.timestamp, out.key, out.headers) == (3, 1000, b"key", (("h", b"1"),))
    tombstone = Record(4, 1000, b"key", None, ())
    assert chain.apply("A.orders", tombstone) is tombstone, "a tombstone has no schema: it passes"


def test_an_id_carried_in_a_header_stays_there() -> None:
    body = framed({"id": 1, "email": "x"})[frames.PREFIX:]
    record = Record(0, 0, None, body, ((frames.VALUE_HEADER, frames.with_id(b"\0\0\0\0\0", 7)),))
    out = chain_for(MASK, SOURCE).apply("A.orders", record)
    assert out is not None and out.value is not None and out.headers == record.headers
    assert read(b"\0" * frames.PREFIX + out.value) == {"id": 1, "email": "***"}


@pytest.mark.parametrize(("value", "config", "why"), [
    (b"plain text", {}, "cannot decode the value: the value is not registry-framed Avro: magic byte 112"),
    (framed({"id": 1, "email": "x"}, 99), {}, "schema id 99 names no Avro schema in A's registry"),
    (framed({"id": 1, "email": "x"}, 8), {}, "schema id 8 names no Avro schema"),
    (framed({"id": 1, "email": "x"})[:6], {}, "does not decode with schema id 7"),
    (framed({"id": 1, "email": "x"}), {"transforms.mask.field": "phone"}, "raised KeyError"),
    (framed({"id": 1, "email": "x"}), {"transforms.mask.mask": ""}, None),
])
def test_what_is_not_avro_or_does_not_fit_fails_the_link_naming_why(value: bytes, config: dict,
                                                                     why: str | None) -> None:
    chain = chain_for({**MASK, **config}, SOURCE)
    record = Record(0, 0, None, value, ())
    if why is None:
        assert chain.apply("A.orders", record) is not None
        return
    with pytest.raises(LinkFailed, match=why) as failed:
        chain.apply("A.orders", record)
    assert failed.value.link == "mask" and failed.value.path == "tests.plugins.MaskAvroField"


class WrongType:
    decoded = True

    def __init__(self, config: dict[str, str]) -> None:
        self.give = config["give"]

    def __call__(self, topic: str, record: Record, value: dict) -> object:
        return {"id": "not a long", "email": "x"} if self.give == "misfit" else [value]


@pytest.mark.parametrize(("give", "why"), [("misfit", "does not fit its writer schema"),
                                           ("list", "returned list, not a dict")])
def test_a_return_that_does_not_fit_the_schema_fails_the_link(give: str, why: str) -> None:
    chain = chain_for({"transforms": "w", "transforms.w.type": f"{__name__}.WrongType", "transforms.w.give": give},
                      SOURCE)
    with pytest.raises(LinkFailed, match=why):
        chain.apply("A.orders", Record(0, 0, None, framed({"id": 1, "email": "x"}), ()))


def test_decoded_is_refused_without_a_translate_flow_naming_the_key() -> None:
    with pytest.raises(TransformError, match="only a flow with schemas.mode = translate has") as refused:
        chain_for(MASK)
    assert refused.value.key == "transforms.mask.type"
    text = "\n".join(["clusters = A, B", "A.bootstrap.servers = a:9092", "B.bootstrap.servers = b:9092",
                      "A->B.enabled = true", *(f"A->B.{k} = {v}" for k, v in MASK.items())]) + "\n"
    with pytest.raises(Exception, match="transforms.mask.type"):
        check_flows(load_text(text).enabled_flows, lambda flow: False)
    translate = text + ("A.schema.registry.url = http://reg-a:8081\nB.schema.registry.url = http://reg-b:8081\n"
                        "A->B.schemas.mode = translate\n")
    check_flows(load_text(translate).enabled_flows, lambda flow: False)  # runs: transforms with translate


ARROW = {"transforms": "mask", "transforms.mask.type": "tests.plugins.MaskAvroFieldArrow"}


def test_an_arrow_batch_gets_the_values_as_a_struct_column_and_writes_them_back() -> None:
    chain = chain_for(ARROW, SOURCE)
    records = [Record(0, 0, b"k0", framed({"id": 0, "email": "a@b"}), ()), Record(1, 0, b"k1", None, ()),
               Record(2, 0, b"k2", b"not framed", ()), Record(3, 0, b"k3", framed({"id": 3, "email": "c@d"}), ())]
    out = chain.run("A.orders", records)
    assert isinstance(out[0], Record) and out[0].value is not None and read(out[0].value) == {"id": 0, "email": "***"}
    assert out[1] == records[1], "a tombstone stays one"
    assert isinstance(out[2], LinkFailed) and "offset 2" in out[2].reason and "not registry-framed" in out[2].reason
    assert isinstance(out[3], Record) and out[3].value is not None and read(out[3].value)["email"] == "***"
    assert frames.schema_id(out[3].value) == 7 and out[3].key == b"k3"


@pytest.mark.parametrize("transforms", [MASK, ARROW])
def test_heartbeats_pass_a_decoded_link_untouched_as_they_pass_translation(transforms: dict) -> None:
    """MM2 mirrors heartbeats through every transform; their binary records are never schema-framed."""
    chain = chain_for(transforms, SourceRegistry("A", {"url": "http://reg-a:8081"}, carries_schemas))
    beat = Record(5, 0, b"\0\0\0\1A\0\0\0\1B", b"\0\0\0\0\1\xa2%\x81\x85Z", ())
    assert [chain.apply(t, beat) for t in ("heartbeats", "A.heartbeats")] == [beat, beat]
    assert chain.run("A.heartbeats", [beat]) == [beat]
    masked = chain.apply("A.orders", Record(6, 0, None, framed({"id": 6, "email": "e"}), ()))
    assert masked is not None and masked.value is not None and read(masked.value)["email"] == "***"


class PandasDecoded:
    batch_format = "pandas"
    decoded = True

    def __init__(self, config: dict[str, str]) -> None:
        pass

    def __call__(self, topic: str, batch: object) -> object:
        return batch


def test_decoded_pandas_batches_are_refused_naming_the_key() -> None:
    with pytest.raises(TransformError, match="decoded = True takes batch_format = 'arrow'") as refused:
        chain_for({"transforms": "p", "transforms.p.type": f"{__name__}.PandasDecoded"}, SOURCE)
    assert refused.value.key == "transforms.p.type"
