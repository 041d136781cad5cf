"""Issue 45: failover of a group across a source log truncated below the flow's position.

A truncation leaves the topic id as it was, so only the log end tells: the flow's position is past
the log's end. The flow's recorded position standing past the log end stands in here for an
unclean leader election (which needs a three-broker source): the flow sees exactly that. Before the
flow takes the truncation up, a failover of a group of the partition is refused with the reason
(the syncs are of the old log); after it, the group's offset translates to the copy of the record
it would read next on A.
"""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.kafka.admin import Admin
from mm2py.ops.failover import plan_failover
from mm2py.ops.refusals import TRUNCATED_REASON
from mm2py.stores.ledger import TRUNCATED, Ledger
from mm2py.stores.positions import PositionStore
from tests.integration.mirror_helpers import mirror_once, properties
from tests.kafkautil import commit_offsets, consume_all, create_topic, produce

pytestmark = pytest.mark.integration

MIRRORED, POSITION, NEW = 1000, 1499, 200


def test_failover_across_a_truncation_is_refused_until_taken_up_then_exact(
        spark, cluster_a, cluster_b, unique_name, tmp_path):
    topic, group = unique_name, f"{unique_name}-g"
    create_topic(cluster_a.bootstrap, topic, 1)
    produce(cluster_a.bootstrap, topic, [(f"k{n}".encode(), f"a-{n}".encode(), None, None) for n in range(MIRRORED)],
            partition=0)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    config = load_text(text)
    mirror_once(spark, text, tmp_path)
    # the flow had copied up to 1499 when the log was cut back to 1000 records
    store = PositionStore(config.clusters["B"], "A")
    store.ensure_topic(Admin(config.clusters["B"]), replication_factor=1)
    store.save({(topic, 0): POSITION})
    store.close()
    commit_offsets(cluster_a.bootstrap, group, {(topic, 0): 300})

    [row] = plan_failover(config, group, "A", "B").partitions
    reason = TRUNCATED_REASON.format(topic=topic, partition=0, end=MIRRORED, position=POSITION + 1, offset=300)
    assert (row.target_offset, row.how) == (None, f"refused: {reason}")

    produce(cluster_a.bootstrap, topic, [(f"k{n}".encode(), f"b-{n}".encode(), None, None)
                                         for n in range(MIRRORED, MIRRORED + NEW)], partition=0)
    mirror_once(spark, text, tmp_path)

    source = consume_all(cluster_a.bootstrap, topic)[0]
    target = consume_all(cluster_b.bootstrap, f"A.{topic}")[0]
    # the first copy, then the log as it stands now, again from its start, in order
    assert [(r.key, r.value) for r in target] == [(r.key, r.value) for r in source[:MIRRORED] + source]
    [entry] = [e for e in Ledger(config.clusters["B"], "A", "A->B").load().entries if e.topic == topic]
    assert (entry.kind, entry.action, entry.source_old["end"], entry.target_new["start"]) == (
        TRUNCATED, "continue", POSITION + 1, MIRRORED)

    for committed in (300, MIRRORED + 100):
        commit_offsets(cluster_a.bootstrap, group, {(topic, 0): committed})
        [row] = plan_failover(config, group, "A", "B").partitions
        assert row.how == "syncs" and row.target_offset is not None, row
        on_b = target[row.target_offset]
        assert (on_b.key, on_b.value) == (source[committed].key, source[committed].value), "the record it reads next"
