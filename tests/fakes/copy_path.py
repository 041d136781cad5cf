"""The copy path's clients as fakes: a source serving real RecordBatch v2 bytes, targets that
answer produce requests only when the copier waits for them, one with a broker's idempotence."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.errors import KafkaError
from mm2py.kafka import batches as rb
from mm2py.kafka.fetch_response import FetchedPartition
from mm2py.kafka.wire import ProducedPartition
from mm2py.types import TP

MESSAGE_TOO_LARGE = 10
OUT_OF_ORDER_SEQUENCE = 45


def batch(base_offset: int, n: int, value_size: int = 20) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1000 + base_offset + i, key=b"k", value=b"v" * value_size, headers=[])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


@dataclass
class Answer:
    """A fake future: done once the copier waits for it."""

    value: object
    is_done: bool = False


class FakeSource:
    alias = "A"

    def __init__(self, logs: dict[TP, list[bytes]]):
        self.logs = logs

    def leaders(self, topics: set[str]) -> dict[TP, int]:
        return {tp: 1 for tp in self.logs if tp[0] in topics}

    def pin_topic_ids(self, ids: dict[str, str]) -> None:
        self.pinned = dict(ids)

    def recreated(self, topic: str) -> str | None:
        return None

    def fetch(self, node: int, positions: dict[TP, int], **_: object) -> Answer:
        out = {}
        for tp, offset in positions.items():
            # as a broker does: from the batch holding ``offset``, one batch per fetch
            held = [b for b in self.logs[tp] if next(rb.split_batches(b)).next_offset > offset]
            out[tp] = FetchedPartition(0, 1000, 1000, 0, (), held[0] if held else b"")
        return Answer(out, is_done=True)

    def wait(self, future: Answer) -> object:
        future.is_done = True
        return future.value

    def fetched(self, response: dict) -> dict:
        return response

    def log_start_offset(self, node: int, tp: TP) -> int:
        return 0


@dataclass
class FakeTarget:
    alias = "B"
    refuse: set[int] = field(default_factory=set)  # first source offsets of batches to refuse as too large
    logs: dict[TP, list[int]] = field(default_factory=dict)  # first source offset of each batch written
    unanswered: dict[TP, int] = field(default_factory=dict)
    most_in_flight_before_first_answer: dict[TP, int] = field(default_factory=dict)
    most_in_flight: dict[TP, int] = field(default_factory=dict)
    answered: set[TP] = field(default_factory=set)
    next_offset: dict[TP, int] = field(default_factory=dict)
    refused: set[TP] = field(default_factory=set)  # as a broker's sequence check: nothing after a refusal
    requests: list[tuple[str | None, tuple[TP, ...], frozenset[TP]]] = field(default_factory=list)
    attributes: list[int] = field(default_factory=list)

    def leaders(self, topics: set[str]) -> dict[TP, int]:
        return {}  # filled per produce: every partition on node 2

    def init_producer_id(self) -> tuple[int, int]:
        return 7, 0

    def produce(self, node: int, batches: dict[TP, tuple], *, timeout_ms: int,
                transactional_id: str | None = None) -> Answer:
        answers = {}
        # (transactional id, partitions, partitions not answered yet when it was sent)
        self.requests.append((transactional_id, tuple(batches), frozenset(tp for tp in batches
                                                                         if tp not in self.answered)))
        for tp, pieces in batches.items():
            raw = b"".join(bytes(p) for p in pieces)
            view = next(rb.split_batches(raw))
            self.attributes.append(view.attributes)
            first = view.max_timestamp - 1000 - view.record_count + 1  # source offsets are in the timestamps
            self.unanswered[tp] = self.unanswered.get(tp, 0) + 1
            seen = self.unanswered[tp]
            self.most_in_flight[tp] = max(self.most_in_flight.get(tp, 0), seen)
            if tp not in self.answered:
                self.most_in_flight_before_first_answer[tp] = max(
                    self.most_in_flight_before_first_answer.get(tp, 0), seen)
            if first in self.refuse:
                self.refused.add(tp)
                answers[tp] = (tp, ProducedPartition(MESSAGE_TOO_LARGE, -1, "too large"), None)
            elif tp in self.refused:
                answers[tp] = (tp, ProducedPartition(OUT_OF_ORDER_SEQUENCE, -1, None), None)
            else:
                base = self.next_offset.get(tp, 0)
                self.next_offset[tp] = base + view.record_count
                answers[tp] = (tp, ProducedPartition(0, base, None), first)
        return Answer(answers)

    def wait(self, future: Answer) -> object:
        future.is_done = True
        out = {}
        for tp, result, first in future.value.values():
            self.unanswered[tp] -= 1
            self.answered.add(tp)
            if first is not None:
                self.logs.setdefault(tp, []).append(first)
            out[tp] = result
        return out

    def produced(self, response: dict) -> dict:
        return response


NOT_LEADER = 6
REQUEST_TIMED_OUT = 7


class IdempotentTarget:
    """One broker per partition's leader; ``refuse`` maps a sequence to (error code, times, written anyway)."""

    alias = "B"

    def __init__(self, refuse: dict[int, tuple[int, int, bool]] | None = None, *, down_once: bool = False):
        self.refuse = dict(refuse or {})
        self.down_once = down_once
        self.log: dict[TP, list[tuple[int, int]]] = {}  # (sequence, record count) per batch written
        self.offsets: dict[tuple[TP, int], int] = {}  # (tp, sequence) -> base offset written at
        self.leader_lookups = 0
        self.sent: list[int] = []

    def leaders(self, topics: set[str]) -> dict[TP, int]:
        self.leader_lookups += 1
        return {("A.t", 0): 2}

    def init_producer_id(self) -> tuple[int, int]:
        return 7, 0

    def produce(self, node: int, batches: dict[TP, tuple], **_: object) -> Answer:
        if self.down_once:
            self.down_once = False
            raise KafkaError("broker 2 not reachable", cluster="B", retriable=True)
        answers = {}
        for tp, pieces in batches.items():
            raw = b"".join(bytes(p) for p in pieces)
            seq, count = struct.unpack_from(">i", raw, 53)[0], struct.unpack_from(">i", raw, 57)[0]
            self.sent.append(seq)
            written = self.log.setdefault(tp, [])
            expected = sum(n for _, n in written)
            if (tp, seq) in self.offsets:  # a duplicate of a batch written: its offset again
                answers[tp] = ProducedPartition(0, self.offsets[(tp, seq)], None)
                continue
            if seq != expected:
                answers[tp] = ProducedPartition(OUT_OF_ORDER_SEQUENCE, -1, None)
                continue
            code, times, write_anyway = self.refuse.get(seq, (0, 0, False))
            if times:
                self.refuse[seq] = (code, times - 1, write_anyway)
                if write_anyway:
                    self.offsets[(tp, seq)] = expected
                    written.append((seq, count))
                answers[tp] = ProducedPartition(code, -1, "refused")
                continue
            self.offsets[(tp, seq)] = expected
            written.append((seq, count))
            answers[tp] = ProducedPartition(0, expected, None)
        return Answer(answers)

    def wait(self, future: Answer) -> object:
        future.is_done = True
        return future.value

    def produced(self, response: dict) -> dict:
        return response
