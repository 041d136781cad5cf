"""The provenance registry's records and the producer ids a worker keeps per origin."""

from __future__ import annotations

import pickle

import pytest

from mm2py.source.provenance import (
    MAX_EPOCH,
    REGISTRY_TOPIC,
    ProducerIds,
    Provenance,
    ProvenanceError,
    parse_registration,
    registration,
)


class Writes:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes]] = []

    def write(self, topic: str, records: list[tuple[bytes, bytes]]) -> int:
        self.records += [(topic, k, v) for k, v in records]
        return len(records)


def test_a_registration_reads_back_as_its_producer_id_and_origin() -> None:
    key, value = registration(123456789012, "A", "A->B")
    assert key == b"123456789012"
    assert parse_registration(key, value) == (123456789012, "A")
    assert parse_registration(key, None) is None
    with pytest.raises(ProvenanceError, match=REGISTRY_TOPIC):
        parse_registration(b"x", b"{}")


def test_origin_is_the_registered_one_else_the_source() -> None:
    p = Provenance("A", "B", {5: "B", 6: "C"})
    assert p.origin_of(5) == "B" and p.goes_home(5)
    assert p.origin_of(6) == "C" and not p.goes_home(6)
    assert p.origin_of(-1) == "A" and p.origin_of(7) == "A"
    assert pickle.loads(pickle.dumps(p)) == p


def test_a_worker_keeps_one_id_per_origin_and_takes_its_next_epoch_per_task() -> None:
    got = iter([(100, 0), (200, 0), (300, 0)])
    writes = Writes()
    ids = ProducerIds("A->B", lambda: next(got), writes)  # type: ignore[arg-type]
    assert ids.for_task("A") == (100, 0)
    assert ids.for_task("A") == (100, 1)
    assert ids.for_task("C") == (200, 0)
    assert ids.for_task("A") == (100, 2)
    # registered once each, before first use
    assert [parse_registration(k, v) for _, k, v in writes.records] == [(100, "A"), (200, "C")]
    ids.kept["A"].epoch = MAX_EPOCH - 1
    assert ids.for_task("A") == (300, 0), "a spent epoch takes a new id, registered too"
    assert parse_registration(*writes.records[-1][1:]) == (300, "A")


def test_a_registration_that_fails_is_not_taken_as_done() -> None:
    class Failing(Writes):
        def write(self, topic: str, records: list[tuple[bytes, bytes]]) -> int:
            raise ProvenanceError("down")

    ids = ProducerIds("A->B", lambda: (1, 0), Failing())  # type: ignore[arg-type]
    with pytest.raises(ProvenanceError):
        ids.for_task("A")
    assert 1 not in ids.registered
