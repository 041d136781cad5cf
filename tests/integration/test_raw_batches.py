"""Issue 6: batches cross as they are. The target holds the source's batches, still compressed
with the source's codec, their records section byte for byte the same; only the header fields
the mirror owns (base offset, producer id/epoch/sequence, CRC) differ."""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.kafka import batches as rb
from mm2py.kafka.wire import RawClient
from tests.integration.mirror_helpers import mirror_once, properties
from tests.kafkautil import create_topic, produce

pytestmark = pytest.mark.integration

# v2 batch header: the records section starts at byte 61; the mirror rewrites baseOffset (0-7),
# partitionLeaderEpoch (12-15), CRC (17-20) and producerId/epoch/baseSequence (43-56)
RECORDS_AT = 61
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def raw_batches(cluster, topic: str, partition: int) -> list[tuple[int, int, bytes, bytes]]:  # noqa: ANN001
    """(codec, record count, header bytes 21-43, records section) of every batch, read with a raw Fetch."""
    client = RawClient(cluster, client_id="raw-batches-test")
    try:
        node = client.leaders({topic})[(topic, partition)]
        out: list[tuple[int, int, bytes, bytes]] = []
        offset = 0
        while True:
            response = client.wait(client.fetch(node, {(topic, partition): offset}, partition_max_bytes=8 << 20,
                                                max_bytes=8 << 20, max_wait_ms=10))
            data = RawClient.fetched(response)[(topic, partition)]
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


def test_compressed_batches_arrive_with_the_source_codec_and_records_untouched(spark, cluster_a, cluster_b,
                                                                               unique_name, tmp_path):
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, len(CODECS))
    for p, codec in enumerate(CODECS):
        for chunk in range(3):  # a few batches per partition
            produce(cluster_a.bootstrap, topic,
                    [(b"k%d" % i, b"value-%d-%d " % (chunk, i) * 20, [("h", b"x")], None) for i in range(500)],
                    partition=p, compression=None if codec == "none" else codec)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    mirror_once(spark, text, tmp_path)

    clusters = load_text(text).clusters
    for p, codec in enumerate(CODECS):
        source = raw_batches(clusters["A"], topic, p)
        target = raw_batches(clusters["B"], f"A.{topic}", p)
        assert {c for c, *_ in source} == {CODECS[codec]}, f"the source partition {p} is {codec}"
        assert [c for c, *_ in target] == [c for c, *_ in source], f"{codec}: same codec, batch for batch"
        assert target == source, f"{codec}: the records sections are byte for byte the source's"
