"""Issue 5: ``mm2py status`` on real clusters, before and after mirroring."""

from __future__ import annotations

import json
import time

import pytest

from mm2py.cli import main
from mm2py.config import load_text
from mm2py.heartbeat.emitter import emit_heartbeat
from mm2py.ops.status import flow_status
from tests.integration.mirror_helpers import mirror_once, properties
from tests.kafkautil import create_topic, produce

pytestmark = pytest.mark.integration


def test_status_lag_before_and_after_mirroring(spark, cluster_a, cluster_b, unique_name, tmp_path, capsys):
    topic = f"{unique_name}-t"
    create_topic(cluster_a.bootstrap, topic, 2)
    old = int(time.time() * 1000) - 30_000
    produce(cluster_a.bootstrap, topic, [(b"k%d" % i, b"v", None, old) for i in range(50)], partition=0)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    flow = load_text(text).enabled_flows[0]

    before = flow_status(flow)
    [row] = [t for t in before.topics if t.topic == topic]
    assert (row.partitions, row.source_end, row.mirrored, row.lag_records) == (2, 50, 0, 50)
    assert row.lag_seconds >= 29, "the oldest unmirrored record is 30 s old"

    mirror_once(spark, text, tmp_path)
    emit_heartbeat(flow)
    after = flow_status(flow)
    [row] = [t for t in after.topics if t.topic == topic]
    assert (row.remote_topic, row.source_end, row.mirrored, row.lag_records, row.lag_seconds) == (
        f"A.{topic}", 50, 50, 0, 0.0)
    assert after.last_heartbeat_age_s is not None and after.last_heartbeat_age_s < 30

    produce(cluster_a.bootstrap, topic, [(b"late", b"v", None, None)] * 7, partition=1)
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    capsys.readouterr()  # the flow's log lines so far
    assert main(["status", str(config), "--json"]) == 0
    [reported] = json.loads(capsys.readouterr().out)
    [row] = [t for t in reported["topics"] if t["topic"] == topic]
    assert (row["source_end"], row["mirrored"], row["lag_records"]) == (57, 50, 7)
    assert main(["status", str(config)]) == 0
    table = capsys.readouterr().out
    assert "flow A->B" in table and f"A.{topic}" in table


def test_status_names_an_unreachable_cluster(tmp_path, capsys):
    config = tmp_path / "mm2.properties"
    config.write_text(properties({"A": "127.0.0.1:1", "B": "127.0.0.1:2"}, {"A->B": {}},
                                 "admin.timeout.ms = 3000\n"))
    started = time.monotonic()
    assert main(["status", str(config)]) == 1
    out = capsys.readouterr().out
    assert "flow A->B: UNAVAILABLE" in out and "127.0.0.1:1" in out and "[cluster=A]" in out
    assert time.monotonic() - started < 30, "within admin.timeout.ms, not a hang"
