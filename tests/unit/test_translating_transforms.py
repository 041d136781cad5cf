"""A translate flow's writer with a transform chain: the chain first, then the kept records' ids translated."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest

from mm2py.config.model import ClusterConfig
from mm2py.kafka import batches as rb
from mm2py.schemas.settings import SchemaSettings
from mm2py.schemas.subjects import Untranslatable
from mm2py.source.copy import translating_writer
from mm2py.source.copy.dead_letters import DeadLetters
from mm2py.source.copy.partition import PartitionCopy
from mm2py.source.copy.translating_writer import TranslatingWriter
from mm2py.source.ranges import PartitionRange
from mm2py.transforms import chain_for
from mm2py.transforms.tolerance import ErrorPolicy
from tests.fakes.batches import build

MASK = {"transforms": "mask", "transforms.mask.type": "tests.plugins.MaskDigits", "transforms.mask.by": "x",
        "transforms.mask.fail.offset": "3"}
SCHEMAS = SchemaSettings("translate", "dead-letter", "dlq", "A", "B", {"url": "http://a"}, {"url": "http://b"},
                         keys="raw")


class FakeTranslator:
    """Values prefixed ``T:`` as a translated id would be; what it saw kept; offset 6 untranslatable."""

    def __init__(self) -> None:
        self.seen: list[rb.Record] = []

    def record(self, rec: rb.Record, topic: str, remote_topic: str, keys: bool = True) -> rb.Record:
        self.seen.append(rec)
        if rec.offset == 6:
            raise Untranslatable("schema id 9 is unknown to the source registry")
        return replace(rec, value=b"T:" + (rec.value or b""))


@pytest.fixture
def translator(monkeypatch: pytest.MonkeyPatch) -> FakeTranslator:
    fake = FakeTranslator()
    monkeypatch.setattr(translating_writer, "translator_for", lambda schemas: fake)
    return fake


def _writer(coalesce: int = 0) -> TranslatingWriter:
    letters = partial(DeadLetters, ClusterConfig("B", "b:9092"), client_id="t")
    writer = TranslatingWriter(coalesce, schemas=SCHEMAS, letters=letters, chain=chain_for(MASK),
                               errors=ErrorPolicy(tolerate=True))
    writer.schema_dead_letters.send = lambda rec, headers: None  # type: ignore[method-assign]
    return writer


def test_the_chain_runs_first_then_the_kept_records_are_translated(translator: FakeTranslator) -> None:
    writer = _writer()
    part = PartitionCopy.of(PartitionRange("t", 0, 0, 10, "A.t"))
    buf = build(0, 10)
    [view] = rb.split_batches(buf)
    writer.enqueue(part, buf, view, None)
    # offset 3: the transform failed (tolerated); offset 6: untranslatable, dead-lettered
    assert [r.offset for r in translator.seen] == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert all(("masked-by", b"x") in r.headers for r in translator.seen), "translation sees what the chain made"
    [(payload, pending)] = part.queue
    assert pending.offsets == (0, 1, 2, 4, 5, 7, 8, 9) and part.dropped == 2
    assert part.result().transformed == (("mask", 10, 9, 0, 1),)
    assert writer.dead_lettered == {("t", 0): 1}
    data = b"".join(bytes(p) for p in payload)
    [out] = rb.split_batches(data)
    assert [r.value for r in rb.decode(data, out)] == [b"T:" + b"v" * 50] * 8


def test_topics_carrying_ids_are_never_coalesced_and_heartbeats_are_not_translated(
        translator: FakeTranslator) -> None:
    writer = _writer(coalesce=1 << 20)
    assert writer.small_run(PartitionRange("t", 0, 0, 10, "A.t")) is None
    part = PartitionCopy.of(PartitionRange("heartbeats", 0, 0, 10, "A.heartbeats"))
    buf = build(0, 4)
    [view] = rb.split_batches(buf)
    writer.enqueue(part, buf, view, None)
    assert translator.seen == [], "heartbeats are MM2's bytes, never translated"
    [(payload, _pending)] = part.queue
    data = b"".join(bytes(p) for p in payload)
    [out] = rb.split_batches(data)
    assert [r.value for r in rb.decode(data, out)] == [b"v" * 50] * 3, "the chain ran (offset 3 failed)"
