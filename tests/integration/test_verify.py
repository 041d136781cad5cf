"""Issue 5: ``mm2py verify`` passes on a faithful mirror and catches a corrupted and a missing record."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from mm2py.cli import main
from mm2py.config import load_text
from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError
from mm2py.ops.digest import digest_ranges
from mm2py.ops.verify import plan_audit, run_audit
from tests.integration.mirror_helpers import mirror_once, properties
from tests.kafkautil import TS0, consume_all, create_topic, delete_topic, produce, wait_until

pytestmark = pytest.mark.integration


def mirrored(spark, cluster_a, cluster_b, unique_name, tmp_path, headers=None):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 3)
    for p in range(3):
        produce(cluster_a.bootstrap, topic,
                [(b"k%d" % i, b"v%d-%d" % (p, i), headers, TS0 + i) for i in range(40)], partition=p)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}},
                      "emit.checkpoints.enabled = false\n")
    mirror_once(spark, text, tmp_path)
    return topic, text


def by_partition(results):
    return {a.check.partition: a for a in results}


def test_verify_passes_on_the_mirror(spark, cluster_a, cluster_b, unique_name, tmp_path, capsys):
    topic, text = mirrored(spark, cluster_a, cluster_b, unique_name, tmp_path, headers=[("h", b"x")])
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    capsys.readouterr()  # the flow's log lines so far
    assert main(["verify", str(config), "--topics", f"{topic}"]) == 0
    out = capsys.readouterr().out
    assert "3 partitions audited, 0 with differences" in out
    assert out.count(" ok") == 3 and "40" in out


def test_verify_catches_a_corrupted_and_a_missing_record(spark, cluster_a, cluster_b, unique_name, tmp_path,
                                                         capsys):
    topic, text = mirrored(spark, cluster_a, cluster_b, unique_name, tmp_path)
    remote = f"A.{topic}"
    copy = consume_all(cluster_b.bootstrap, remote)
    # rewrite the remote topic as it was, except one value changed on partition 1, one record left out on 2
    delete_topic(cluster_b.bootstrap, remote)
    wait_until(lambda: _recreated(cluster_b.bootstrap, remote), 60, message="remote topic recreated")
    for p, records in copy.items():
        rows = [(r.key, r.value, list(r.headers) or None, r.timestamp) for r in records]
        if p == 1:
            rows[17] = (rows[17][0], b"tampered", rows[17][2], rows[17][3])
        if p == 2:
            rows.pop()
        produce(cluster_b.bootstrap, remote, rows, partition=p)
    results = by_partition(run_audit(spark, plan_audit(load_text(text).enabled_flows[0], topic)))
    assert results[0].check.ok
    assert not results[1].check.ok and results[1].check.source.count == results[1].check.target.count == 40
    assert not results[2].check.ok and (results[2].check.source.count, results[2].check.target.count) == (40, 39)
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    capsys.readouterr()
    # only this test's topic: A.heartbeats on the shared clusters also holds other tests' flows
    assert main(["verify", str(config), "--topics", topic]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT" in out and "MISSING" in out and "2 with differences" in out


def _recreated(bootstrap: str, topic: str) -> bool:
    try:
        create_topic(bootstrap, topic, 3)
        return True
    except Exception:  # still being deleted
        return False


def test_verify_fails_fast_on_records_deleted_after_planning(cluster_a, unique_name):
    # the range [0, 10) was planned, then retention (here: DeleteRecords) took it: the read must
    # say so at once, not jump to the log's end and wait for offsets that will never come
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 1)
    produce(cluster_a.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, None, TS0 + i) for i in range(10)], partition=0)
    admin = AdminClient({"bootstrap.servers": cluster_a.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 10)]).values():
        future.result(30)
    started = time.monotonic()
    with pytest.raises(KafkaError, match=r"records in \[0, 10\) are no longer in the log") as caught:
        digest_ranges(ClusterConfig("A", cluster_a.bootstrap), topic, {0: (0, 10)}, timeout=60)
    assert (caught.value.topic, caught.value.partition, caught.value.offset) == (topic, 0, 0)
    assert time.monotonic() - started < 30
