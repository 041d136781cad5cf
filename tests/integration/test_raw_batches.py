"""Issue 6: batches cross as they are. The target holds the source's batches, still compressed
with the source's codec, their records section byte for byte the same; only the header fields
the mirror owns (base offset, producer id/epoch/sequence, CRC) differ."""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from tests.integration.mirror_helpers import mirror_once, properties
from tests.integration.target_checks import raw_batches
from tests.kafkautil import create_topic, produce

pytestmark = pytest.mark.integration

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


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


def test_batch_coalesce_bytes_writes_runs_of_small_batches_as_one_keeping_records_and_offsets(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    """Many partitions' worth of one-record batches: with batch.coalesce.bytes the target gets few
    batches, each with the source's codec, holding every record unchanged at the same offset."""
    from confluent_kafka import Producer

    from mm2py.checkpoint.task import load_syncs
    from tests.kafkautil import consume_all

    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 2)
    for p, codec in enumerate(("none", "lz4")):
        producer = Producer({"bootstrap.servers": cluster_a.bootstrap, "linger.ms": 0, "batch.num.messages": 1,
                             "compression.type": codec, "log_level": 0})
        for i in range(400):
            producer.produce(topic, key=b"k%d" % i, value=b"v-%d-%d " % (p, i) * 5, headers=[("h", b"%d" % i)],
                             partition=p)
            producer.poll(0)
        assert producer.flush(30) == 0
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topic, "batch.coalesce.bytes": "65536"}})
    mirror_once(spark, text, tmp_path)

    clusters = load_text(text).clusters
    for p, codec in enumerate(("none", "lz4")):
        source = raw_batches(clusters["A"], topic, p)
        target = raw_batches(clusters["B"], f"A.{topic}", p)
        assert sum(n for _, n, *_ in target) == 400
        assert len(source) >= 100, f"the source should hold small batches, got {len(source)}"
        assert len(target) <= len(source) // 10, f"{codec}: {len(source)} batches became {len(target)}"
        assert {c for c, *_ in target} == {CODECS[codec]}, f"{codec}: the source's codec kept"
    fields = ("partition", "offset", "key", "value", "headers", "timestamp")
    src, dst = consume_all(cluster_a.bootstrap, topic), consume_all(cluster_b.bootstrap, f"A.{topic}")
    assert {p: [tuple(getattr(r, f) for f in fields) for r in rs] for p, rs in dst.items()} == \
           {p: [tuple(getattr(r, f) for f in fields) for r in rs] for p, rs in src.items()}, \
           "every record, its key, value, headers, timestamp and offset as on the source"
    syncs = load_syncs(load_text(text).enabled_flows[0])
    assert [syncs.translate(topic, p, 137) for p in (0, 1)] == [137, 137], "offsets translate one for one"
