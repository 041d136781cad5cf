"""A copy task planned for a topic that is deleted and created again before or while it runs.

The new log may already reach past the copy's position: fetched by name, its records would be
copied as if they continued the old log. The task fetches the topic id it was planned with, so
the broker refuses it, and the partition stalls where it stood for the planner's reset guard.
"""

from __future__ import annotations

import time

import pytest

from mm2py.config.model import ClusterConfig
from mm2py.kafka.admin import Admin
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import CopyMode
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.tail import TailWindow
from mm2py.source.ranges import PartitionRange, RangeResult
from tests.kafkautil import TS0, consume_all, create_topic, delete_topic, end_offsets, list_topics, produce, wait_until

pytestmark = pytest.mark.integration


def recreate(bootstrap: str, topic: str, label: bytes, records: int) -> str:
    """Delete ``topic``, create it again with ``records`` records valued ``label-i``; its new id."""
    delete_topic(bootstrap, topic)
    wait_until(lambda: topic not in list_topics(bootstrap), timeout=60, message=f"{topic} deleted")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(b"k", label + b"-%d" % i, [], TS0 + i) for i in range(records)], partition=0)
    return Admin(ClusterConfig("A", bootstrap)).topic_ids([topic])[topic]


def copy(source: str, target: str, r: PartitionRange, tail_s: float) -> RangeResult:
    src = RawClient(ClusterConfig("A", source), client_id="recreated-src")
    dst = RawClient(ClusterConfig("B", target), client_id="recreated-dst", role="producer")
    try:
        [result] = Copier(src, dst, [r], CopySettings(),
                          CopyMode(tail=TailWindow(time.monotonic() + tail_s))).run()
        return result
    finally:
        src.close()
        dst.close()


@pytest.mark.parametrize("planned", ["owed", "tailing"])
def test_a_copy_planned_for_a_topic_never_reads_the_one_re_created_under_its_name(cluster_a, cluster_b,
                                                                                unique_name, planned):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(cluster_a.bootstrap, topic, 1)
    create_topic(cluster_b.bootstrap, remote, 1)
    produce(cluster_a.bootstrap, topic, [(b"k", b"old-%d" % i, [], TS0 + i) for i in range(1000)], partition=0)
    planned_id = Admin(ClusterConfig("A", cluster_a.bootstrap)).topic_ids([topic])[topic]
    # the plan: the old log's records 500-999 still owed, or every record copied and the partition tailing
    start, end = (500, 1000) if planned == "owed" else (1000, 1000)
    new_id = recreate(cluster_a.bootstrap, topic, b"new", 2000)
    assert new_id != planned_id and end_offsets(cluster_a.bootstrap, topic) == {0: 2000}, \
        "the new log reaches past the planned position: a copy by name would read it"

    result = copy(cluster_a.bootstrap, cluster_b.bootstrap, PartitionRange(topic, 0, start, end, remote, exact=True,
                                                                           topic_id=planned_id), tail_s=3)

    assert consume_all(cluster_b.bootstrap, remote, timeout=5).get(0, []) == [], \
        "nothing of the new log reached the remote topic"
    assert (result.next_offset, result.stall_offset, result.records) == (start, start, 0)
    assert "re-created" in result.stall_reason and new_id in result.stall_reason, result.stall_reason

    # the next plan, made after the reset guard accepted the new id, copies the new log
    again = copy(cluster_a.bootstrap, cluster_b.bootstrap, PartitionRange(topic, 0, 0, 2000, remote, exact=True,
                                                                          topic_id=new_id), tail_s=0)
    assert (again.next_offset, again.stall_offset, again.records) == (2000, -1, 2000)
    assert [r.value for r in consume_all(cluster_b.bootstrap, remote)[0]] == [b"new-%d" % i for i in range(2000)]
