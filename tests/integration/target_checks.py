"""What integration tests read back after a run: the replicator's log lines, the records and raw
batches on the target, and the source records a test deletes; shared so no test imports another."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mm2py.config.model import FlowConfig
from mm2py.kafka import batches as rb
from mm2py.kafka.wire import RawClient
from mm2py.ops.digest import digest_ranges
from mm2py.ops.verify import audit_one, plan_audit
from tests.kafkautil import Record, compare

# the Connect worker's own topics, for Apache MM2 on single-broker clusters (mm2py accepts them)
MM2_WORKER = """
offset.storage.replication.factor = 1
config.storage.replication.factor = 1
status.storage.replication.factor = 1
"""
# v2 batch header: the records section starts at byte 61; the mirror rewrites baseOffset (0-7),
# partitionLeaderEpoch (12-15), CRC (17-20) and producerId/epoch/baseSequence (43-56)
RECORDS_AT = 61


def lines_with(log: Path, text: str) -> list[str]:
    """Log lines holding ``text``: JSON from the driver, console lines from Spark's source runner."""
    return [line for line in log.read_text(errors="replace").splitlines() if text in line]


def partitions_named(lines: list[str], topic: str) -> set[int]:
    """The partitions that lines about ``topic`` name (``partition=N`` or ``"partition": N``)."""
    out = set()
    for line in lines:
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("topic") == topic:
                out.add(event["partition"])
            continue
        if f"topic={topic} " in line + " ":
            out |= {int(p) for p in re.findall(r"partition=(\d+) ", line + " ")}
    return out


def mirrored_in_order(target: str, remote: str, acked: dict[int, list[bytes]]) -> tuple[int, int]:
    """(missing, duplicates) of acknowledged records on the target; asserts per-partition order."""
    found = compare(target, remote, acked)
    assert not found.out_of_order, f"partitions {found.out_of_order} out of source order on the target"
    return found.missing, found.duplicates


def all_there(target: str, remote: str, acked: dict[int, list[bytes]]) -> bool:
    try:
        return mirrored_in_order(target, remote, acked)[0] == 0
    except Exception:  # the target may still be restarting
        return False


def fields(rec: Record) -> tuple:
    return rec.key, rec.value, rec.headers, rec.timestamp


def assert_mirrored(expected: list[Record], got: list[Record], where: str) -> None:
    """``got`` holds ``expected`` record for record, in order: key, value, headers, timestamp."""
    assert len(got) == len(expected), f"{where}: {len(expected)} records expected, {len(got)} on the target"
    for i, (a, b) in enumerate(zip(expected, got, strict=True)):
        assert fields(a) == fields(b), f"{where}: record {i} (source offset {a.offset}) differs"


def delete_records(bootstrap: str, before: dict[tuple[str, int], int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    for future in admin.delete_records([TopicPartition(t, p, o) for (t, p), o in before.items()]).values():
        future.result(30)


def raw_batches(cluster, topic: str, partition: int) -> list[tuple[int, int, bytes, bytes]]:
    """(codec, record count, header bytes 21-43, records section) of every batch, read with a raw Fetch."""
    client = RawClient(cluster, client_id="raw-batches-test")
    try:
        node = client.leaders({topic})[(topic, partition)]
        out: list[tuple[int, int, bytes, bytes]] = []
        offset = 0
        while True:
            response = client.wait(client.fetch(node, {(topic, partition): offset}, partition_max_bytes=8 << 20,
                                                max_bytes=8 << 20, max_wait_ms=10))
            data = client.fetched(response)[(topic, partition)]
            buf = bytes(data.records)
            views = [v for v in rb.split_batches(buf) if v.next_offset > offset]
            if not views:
                return out
            for v in views:
                batch = buf[v.start:v.start + v.size]
                # attributes, lastOffsetDelta, timestamps: kept; producer fields are the mirror's own
                out.append((rb.codec_of(buf, v), v.record_count, batch[21:43], batch[RECORDS_AT:]))
                offset = v.next_offset
    finally:
        client.close()


def verify_left_out(flow: FlowConfig, topics: Collection[str]) -> tuple[list, dict[str, int]]:
    """``mm2py verify``'s checks of ``flow``'s ``topics`` (run here, without Spark): the partitions that
    differ, and per source topic the records its transform chain left out (dropped, or failed under
    tolerance all).

    Only the test's own topics: ``heartbeats`` is mirrored by every flow, and the flows of earlier tests
    on the same clusters, under the same flow name and positions, copied it with their own chains.
    """
    results = [audit_one(r) for r in plan_audit(flow) if r.topic in topics]
    left_out: dict[str, int] = {}
    for a in results:
        left_out[a.check.topic] = left_out.get(a.check.topic, 0) + a.check.source.dropped
    return [a.check for a in results if not a.check.ok], left_out


def assert_verify_replays(flow: FlowConfig, left_out: dict[str, int]) -> None:
    """``mm2py verify`` finds every partition of ``flow``'s topics in ``left_out`` equal, ``left_out``
    records counted apart per topic.

    A range of a topic with records left out, digested without the chain, differs from the target:
    what verify compares is the replay.
    """
    differing, got = verify_left_out(flow, left_out)
    assert not differing, differing
    assert {t: got.get(t, 0) for t in left_out} == left_out, got
    first = next(r for r in plan_audit(flow) if r.source[1] > r.source[0] and left_out.get(r.topic))
    plain = digest_ranges(flow.source, first.topic, {first.partition: first.source})[first.partition]
    assert plain != audit_one(first).check.target, "without the replay the source differs from the target"
