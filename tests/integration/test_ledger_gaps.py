"""Issue 45: records deleted from the source before they were mirrored are a gap the ledger names,
and the completeness audit does not report them as missing.

The deleted records carry timestamps in minutes that the records kept after them share, so the
audit compares exactly the minutes the gap fell in (not only the source's oldest minute, which it
never compares)."""

from __future__ import annotations

import time

import pytest

from mm2py.audit.buckets import BUCKET_MS, AuditFinding
from mm2py.audit.runner import Auditor
from mm2py.config import load_text
from mm2py.stores.ledger import GAP, Ledger
from mm2py.stores.positions import PositionStore
from tests.integration.mirror_helpers import mirror_once, properties
from tests.integration.target_checks import assert_mirrored, delete_records
from tests.kafkautil import consume_all, create_topic, produce

pytestmark = pytest.mark.integration


def produce_minutes(bootstrap: str, topic: str, first: int, chunks: list[tuple[int, int]], base_ms: int) -> int:
    """One batch per (minute, records) chunk, each record stamped inside that minute; returns the next offset."""
    n = first
    for minute, size in chunks:
        produce(bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode(), None, base_ms + minute * BUCKET_MS + i - n)
                                   for i in range(n, n + size)], partition=0)
        n += size
    return n


def test_records_deleted_before_they_were_mirrored_are_in_the_ledger_and_not_missing_in_the_audit(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 1)
    now = int(time.time() * 1000)
    base = now - now % BUCKET_MS - 20 * BUCKET_MS  # minute 0, twenty minutes ago
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    end = produce_minutes(cluster_a.bootstrap, topic, 0, [(m, 100) for m in range(6)], base)  # [0, 600)
    mirror_once(spark, text, tmp_path)

    # while the flow is down: [600, 900) in minutes 7-9, then [900, 1200) in minutes 6-11; the
    # first 900 records are deleted, 300 of them never mirrored
    end = produce_minutes(cluster_a.bootstrap, topic, end, [(7, 100), (8, 100), (9, 100)], base)
    end = produce_minutes(cluster_a.bootstrap, topic, end, [(m, 50) for m in range(6, 12)], base)
    assert end == 1200
    before = consume_all(cluster_a.bootstrap, topic)[0]
    delete_records(cluster_a.bootstrap, {(topic, 0): 900})
    mirror_once(spark, text, tmp_path)

    target = consume_all(cluster_b.bootstrap, f"A.{topic}")[0]
    assert_mirrored([r for r in before if r.offset < 600 or r.offset >= 900], target, "partition 0")
    config = load_text(text)
    gaps = [(e.kind, e.action, e.source_old, e.source_new) for e in
            Ledger(config.clusters["B"], "A", "A->B").load().entries if e.topic == topic]
    assert gaps == [(GAP, "skipped", {"start": 600, "end": 900}, {"start": 900})], "the ledger names the gap"

    # a position left by a topic deleted since (other tests on these clusters leave such): not audited, no failure
    PositionStore(config.clusters["B"], "A").save({(f"{topic}-deleted", 0): 10})
    reports: list[list[AuditFinding]] = []
    auditor = Auditor(config.enabled_flows)
    for _ in range(2):
        auditor.round(lambda _flow, findings: reports.append(findings))
    assert len(reports) == 2, "every round reported (a failed round logs a warning and reports nothing)"
    for findings in reports:
        (finding,) = [f for f in findings if f.topic == f"A.{topic}"]
        # minutes 7-10 are compared (6 is the source's oldest, 11 its newest): the gap's minutes among them
        assert finding.buckets == 4, finding
        assert (finding.source_records, finding.target_records) == (200, 200), finding
        assert (finding.missing, finding.duplicates) == (0, 0), finding
