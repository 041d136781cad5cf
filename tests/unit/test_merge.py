"""Small batches merged into one (mm2py.kafka.merge): records byte for byte, header and CRC right."""

from __future__ import annotations

import random
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mm2py.kafka import batches as rb
from mm2py.kafka.merge import merged_batch


def small_batch(base_offset: int, base_ts: int, n: int, codec: int, rng: random.Random) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=7,
                                        producer_epoch=1, base_sequence=0, batch_size=1 << 30)
    for i in range(n):
        builder.append(i, timestamp=base_ts + rng.randint(-5, 500), key=None if i % 3 == 0 else b"k%d" % i,
                       value=b"a" * rng.randint(60, 300), headers=[("h", b"v"), ("n", None)] if i % 2 else [])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def run_of(codec: int, batches: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    buf, offset = b"", 100
    for k in range(batches):
        n = rng.randint(1, 5)
        buf += small_batch(offset, 1_700_000_000_000 + 1000 * k - 300 * (k % 2), n, codec, rng)
        offset += n
    return buf


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_merged_batch_holds_every_record_as_it_was_in_source_order(codec: int) -> None:
    buf = run_of(codec, 8)
    views = list(rb.split_batches(buf))
    assert {v.attributes & rb.ATTR_CODEC_MASK for v in views} == {codec}
    want = [r for v in views for r in rb.decode(buf, v)]
    out = merged_batch(buf, views, producer_id=99, epoch=3, sequence=42)
    (view,) = rb.split_batches(out)
    rb.verify_crc(out, view)
    got = rb.decode(out, view)
    assert [(r.timestamp, r.key, r.value, r.headers) for r in got] == \
        [(r.timestamp, r.key, r.value, r.headers) for r in want]
    assert [r.offset for r in got] == list(range(len(want))), "offset deltas 0, 1, 2... as the target assigns"
    assert view.record_count == len(want) and view.contiguous and view.passes_unchanged
    assert view.attributes & rb.ATTR_CODEC_MASK == codec, "the batches' codec is kept"
    assert view.max_timestamp == max(r.timestamp for r in want)
    assert (view.producer_id, struct.unpack_from(">hi", out, 51)) == (99, (3, 42))


def test_transactional_merge_sets_the_bit() -> None:
    buf = run_of(0, 3)
    out = merged_batch(buf, list(rb.split_batches(buf)), 5, 0, 0, transactional=True)
    assert next(rb.split_batches(out)).is_transactional


def test_a_section_short_of_its_record_count_is_refused_naming_the_offset() -> None:
    buf = bytearray(run_of(0, 2))
    first = next(rb.split_batches(bytes(buf)))
    struct.pack_into(">i", buf, first.start + 57, first.record_count + 1)  # claims one record more
    with pytest.raises(rb.CorruptBatchError, match=f"offset {first.base_offset}"):
        merged_batch(bytes(buf), list(rb.split_batches(bytes(buf))), 5, 0, 0)
