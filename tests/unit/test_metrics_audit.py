"""The completeness audit: batch headers counted per minute, compared bucket by bucket."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.audit.buckets import BUCKET_MS, compare
from mm2py.audit.scanner import PartitionCounts, scan
from mm2py.kafka.batches import split_batches
from mm2py.kafka.fetch_response import FetchedPartition
from mm2py.transforms import LinkFailed, chain_for

T0 = 1_700_000_040_000 - 1_700_000_040_000 % BUCKET_MS  # a minute's start


def batch(base_offset: int, n: int, ts: int, *, control: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=ts, key=b"k", value=b"v", headers=[])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    if control:  # a transaction marker: control and transactional bits (the CRC is not checked here)
        struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | 0x30)
    return bytes(buf)


class FakeLog:
    """One partition's batches, served as a broker serves a fetch (from the batch holding the offset)."""

    def __init__(self, batches: list[tuple[int, int, int]], log_start: int = 0, control_at: int | None = None):
        self.alias = "X"
        self.batches = batches  # (base offset, records, timestamp)
        self.log_start = log_start
        self.control_at = control_at
        self.fetches = 0

    @property
    def end(self) -> int:
        base, n, _ = self.batches[-1]
        return base + n

    def fetch(self, node, positions, **kw):
        (tp, offset), = positions.items()
        self.fetches += 1
        if offset < self.log_start or offset > self.end:
            return FetchedPartition(1, self.end, self.end, self.log_start, (), b"")
        data = b"".join(batch(b, n, ts, control=(b == self.control_at)) for b, n, ts in self.batches
                        if b + n > offset and b + n > self.log_start)
        return FetchedPartition(0, self.end, self.end, self.log_start, (), data)

    def wait(self, future):
        return future

    @staticmethod
    def fetched(response):
        return {("t", 0): response}


def test_counts_per_minute_incrementally_up_to_the_limit_and_without_control_batches():
    log = FakeLog([(0, 10, T0 + 5), (10, 5, T0 + 61_000), (15, 1, T0 + 62_000), (16, 4, T0 + 125_000)], control_at=15)
    counts = PartitionCounts()
    scan(log, 1, ("t", 0), counts, 0, 12)  # a range owns the batches whose base offset lies in it
    assert counts.counts == {T0: 10, T0 + BUCKET_MS: 5} and counts.next_offset == 15
    scan(log, 1, ("t", 0), counts, 0, lambda lso: lso)
    assert counts.counts == {T0: 10, T0 + BUCKET_MS: 5, T0 + 2 * BUCKET_MS: 4}  # the marker is not a record
    fetches = log.fetches
    scan(log, 1, ("t", 0), counts, 0, lambda lso: lso)
    assert log.fetches == fetches + 1  # nothing new: one look, no re-count


def test_records_deleted_from_the_front_are_counted_no_more():
    log = FakeLog([(0, 10, T0 + 5), (10, 10, T0 + 61_000), (20, 10, T0 + 125_000)])
    counts = PartitionCounts()
    scan(log, 1, ("t", 0), counts, 0, 30)
    assert sum(counts.counts.values()) == 30
    log.log_start = 14  # DeleteRecords inside the second batch
    scan(log, 1, ("t", 0), counts, 14, 30)
    assert counts.counts == {T0 + BUCKET_MS: 6, T0 + 2 * BUCKET_MS: 10}


def test_compare_reports_missing_and_duplicates_only_in_settled_whole_buckets():
    m = BUCKET_MS
    source = {T0: 7, T0 + m: 10, T0 + 2 * m: 10, T0 + 3 * m: 10, T0 + 4 * m: 3}
    target = {T0: 4, T0 + m: 10, T0 + 2 * m: 6, T0 + 3 * m: 12, T0 + 4 * m: 1}
    f = compare("A->B", "A.t", 0, source, target, oldest_source_bucket=T0, newest_source_bucket=T0 + 4 * m)
    # the oldest bucket (cut by retention anywhere) and the newest (in flight) are left out
    assert (f.buckets, f.missing, f.duplicates, f.source_records, f.target_records) == (3, 4, 2, 30, 28)
    assert f.differing == ((T0 + 2 * m, 10, 6), (T0 + 3 * m, 10, 12))
    # what the remote topic's retention may have removed is not audited
    g = compare("A->B", "A.t", 0, source, target, oldest_source_bucket=T0, newest_source_bucket=T0 + 4 * m,
                retention_floor_ms=T0 + 2 * m + 5)
    assert (g.buckets, g.missing) == (1, 0)


def test_retention_on_both_sides_stays_quiet_and_target_truncation_does_not():
    m = BUCKET_MS
    full = {T0 + i * m: 10 for i in range(6)}
    # both sides lost the first two minutes and part of the third, at different offsets
    src = {T0 + 2 * m: 4, **{T0 + i * m: 10 for i in range(3, 6)}}
    dst = {T0 + 2 * m: 7, **{T0 + i * m: 10 for i in range(3, 6)}}
    quiet = compare("A->B", "A.t", 0, src, dst, oldest_source_bucket=T0 + 2 * m, newest_source_bucket=T0 + 5 * m)
    assert (quiet.missing, quiet.duplicates, quiet.buckets) == (0, 0, 2)
    # DeleteRecords on the target only, while the source keeps everything
    cut = {T0 + 3 * m: 5, T0 + 4 * m: 10, T0 + 5 * m: 10}
    loud = compare("A->B", "A.t", 0, full, cut, oldest_source_bucket=T0, newest_source_bucket=T0 + 5 * m)
    assert loud.missing == 10 + 10 + 5


def test_a_long_log_is_counted_over_several_rounds():
    log = FakeLog([(0, 10, T0 + 5), (10, 10, T0 + 61_000), (20, 10, T0 + 125_000)])
    counts = PartitionCounts()
    original = log.fetch

    def one_batch(node, positions, **kw):  # a broker answering one batch per fetch
        part = original(node, positions, **kw)
        first = next(iter(split_batches(part.records)), None)
        return part if first is None else FetchedPartition(0, part.high_watermark, part.last_stable_offset,
                                                           part.log_start_offset, (), part.records[:first.size])
    log.fetch = one_batch
    assert not scan(log, 1, ("t", 0), counts, 0, 30, max_fetches=2)
    assert counts.next_offset == 20
    assert scan(log, 1, ("t", 0), counts, 0, 30, max_fetches=2)
    assert sum(counts.counts.values()) == 30


def test_records_a_transform_dropped_are_counted_dropped_never_missing():
    # a Filter on the whole topic: the target holds nothing of these three minutes, and should not
    chain = chain_for({"transforms": "drop", "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter"})
    log = FakeLog([(0, 10, T0 + 5), (10, 10, T0 + 61_000), (20, 10, T0 + 125_000)], log_start=3)
    counts = PartitionCounts()
    scan(log, 1, ("t", 0), counts, 3, 30, chain=chain, remote_topic="A.t")
    assert counts.counts == {} and counts.dropped == {T0: 7, T0 + BUCKET_MS: 10, T0 + 2 * BUCKET_MS: 10}
    assert (counts.oldest, counts.newest) == (T0, T0 + 2 * BUCKET_MS)
    f = compare("A->B", "A.t", 0, counts.counts, {}, oldest_source_bucket=counts.oldest,
                newest_source_bucket=counts.newest, dropped=counts.dropped)
    assert (f.buckets, f.missing, f.dropped, f.source_records) == (1, 0, 10, 0)


@pytest.mark.parametrize("mask", ["tests.plugins.MaskDigits", "tests.plugins.MaskDigitsArrow"])
def test_records_a_transform_failed_on_are_counted_failed_never_missing(mask: str):
    """errors.tolerance = all: a record a transform raised on is left out like a dropped one and
    counted as failed; without tolerance the audit round fails as the flow does. A batch transform
    gets each source batch whole and fails exactly the records it fails on alone, as in the copy."""
    raw = {"transforms": "mask", "transforms.mask.type": mask, "transforms.mask.drop": "none",
           "transforms.mask.fail.offset": "4,12,13"}
    chain = chain_for(raw)
    log = FakeLog([(0, 10, T0 + 5), (10, 10, T0 + 61_000), (20, 10, T0 + 125_000)], log_start=0)
    counts = PartitionCounts()
    scan(log, 1, ("t", 0), counts, 0, 30, chain=chain, remote_topic="A.t", tolerate=True)
    assert counts.failed == {T0: 1, T0 + BUCKET_MS: 2} and counts.dropped == {}
    assert counts.counts == {T0: 9, T0 + BUCKET_MS: 8, T0 + 2 * BUCKET_MS: 10}
    # the target holds what the chain kept: nothing missing, the two failed records reported apart
    f = compare("A->B", "A.t", 0, counts.counts, {T0 + BUCKET_MS: 8}, oldest_source_bucket=counts.oldest,
                newest_source_bucket=counts.newest, dropped=counts.dropped, failed=counts.failed)
    assert (f.buckets, f.missing, f.failed, f.dropped) == (1, 0, 2, 0)
    with pytest.raises(LinkFailed, match="offset|cannot mask"):
        scan(log, 1, ("t", 0), PartitionCounts(), 0, 30, chain=chain, remote_topic="A.t")
