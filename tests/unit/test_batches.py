"""Record batch splitting, patching and rebuilding, on batches built by kafka-python."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch

from mm2py.kafka import batches as rb
from tests.fakes.batches import GZIP, LZ4, NONE, build


def test_split_leaves_out_a_partial_trailing_batch():
    a, b = build(0, 10), build(10, 5, GZIP)
    views = list(rb.split_batches(a + b[:-3]))
    assert [(v.base_offset, v.record_count, v.last_offset) for v in views] == [(0, 10, 9)]
    views = list(rb.split_batches(a + b))
    assert [(v.base_offset, v.next_offset, v.size) for v in views] == [(0, 10, len(a)), (10, 15, len(b))]


def test_patch_keeps_compressed_payload_and_fixes_crc():
    raw = build(500, 20, LZ4, pid=77, txn=True)
    view = next(rb.split_batches(raw))
    assert view.is_transactional and view.passes_unchanged
    head, body = rb.patch_for_target(raw, view, producer_id=9, epoch=3, sequence=40)
    assert len(head) == 61 and bytes(body) == raw[61:], "records payload must stay byte-identical"
    out = head + bytes(body)
    assert struct.unpack_from(">q", out, 0)[0] == 0
    assert struct.unpack_from(">qhi", out, 43) == (9, 3, 40)
    assert not struct.unpack_from(">h", out, 21)[0] & rb.ATTR_TRANSACTIONAL
    assert struct.unpack_from(">h", out, 21)[0] & rb.ATTR_CODEC_MASK == LZ4
    assert struct.unpack_from(">I", out, 17)[0] == crc32c.crc32c(out[21:])
    batch = DefaultRecordBatch(out)
    assert batch.validate_crc()
    assert [r.key for r in batch] == [b"k%d" % i for i in range(20)]


def test_verify_crc_detects_corruption():
    raw = bytearray(build(0, 3))
    raw[-1] ^= 0xFF
    with pytest.raises(rb.CorruptBatchError):
        rb.verify_crc(bytes(raw), next(rb.split_batches(bytes(raw))))


def test_compacted_batch_is_not_passed_unchanged_and_rebuilds_contiguously():
    raw = build(100, 3, GZIP, offsets=[0, 4, 9])
    view = next(rb.split_batches(raw))
    assert not view.contiguous and not view.passes_unchanged
    recs = rb.decode(raw, view)
    assert [r.offset for r in recs] == [100, 104, 109]
    out = rb.rebuild(recs, rb.codec_of(raw, view), producer_id=5, epoch=0, sequence=7)
    rebuilt = next(rb.split_batches(out))
    assert rebuilt.contiguous and rebuilt.record_count == 3 and rb.codec_of(out, rebuilt) == GZIP
    decoded = rb.decode(out, rebuilt)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in recs
    ]
    assert struct.unpack_from(">qhi", out, 43) == (5, 0, 7)


def test_rebuild_of_nothing_is_none():
    assert rb.rebuild([], NONE, 1, 0, 0) is None
