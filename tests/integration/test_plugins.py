"""User classes in real flows: topic, group and config property filters, and a replication policy.

Each class lives in ``tests/plugins.py`` and is named by its dotted path, as an operator names a
module of their own. Each selects what MM2's default would not: a ``*.internal`` topic (kept home by
the default ``topics.exclude``), a ``console-consumer-*`` group (kept home by the default
``groups.exclude``), and remote names of the user's making. Flows use aliases no other test uses,
so the internal topics they create are their own.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mm2py.checkpoint.task import load_checkpoints, run_checkpoints
from mm2py.config import load_text
from mm2py.config.filters import GroupFilter, TopicFilter, group_filter_for, topic_filter_for
from mm2py.kafka.admin import Admin
from tests.integration.mirror_helpers import Replicator, mirror_once, properties, wait_for
from tests.kafkautil import commit_offsets, consume_all, create_topic, end_offsets, list_topics, produce
from tests.plugins import PrefixGroups, SuffixTopics

pytestmark = pytest.mark.integration


def aliases() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:6]
    return f"P{suffix}", f"Q{suffix}"


def records(prefix: str, count: int) -> list[tuple[bytes, bytes, None, None]]:
    return [(f"k{i}".encode(), f"{prefix}-{i}".encode(), None, None) for i in range(count)]



def values(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """Each partition's (key, value) pairs in offset order."""
    return {p: [(r.key, r.value) for r in rs] for p, rs in consume_all(bootstrap, topic).items()}


def test_user_topic_and_config_property_filters_mirror_what_the_defaults_would_not(
        spark, cluster_a, cluster_b, unique_name, tmp_path: Path):
    src, dst = aliases()
    audit, orders = f"{unique_name}.internal", f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, audit, 2, {"retention.ms": "987654321", "max.compaction.lag.ms": "123456789"})
    create_topic(cluster_a.bootstrap, orders, 1)
    produce(cluster_a.bootstrap, audit, records("audit", 300))
    produce(cluster_a.bootstrap, orders, records("orders", 50))
    text = properties({src: cluster_a.bootstrap, dst: cluster_b.bootstrap}, {f"{src}->{dst}": {
        "topic.filter.class": "tests.plugins.SuffixTopics",
        "filter.topic.suffix": audit,  # this test's topic only: the clusters are shared
        "config.property.filter.class": "tests.plugins.NoRetention",
    }})
    flow = load_text(text).enabled_flows[0]
    assert isinstance(topic_filter_for(flow), SuffixTopics)
    # what MM2's DefaultTopicFilter would do with this flow's keys
    assert not TopicFilter().should_replicate_topic(audit) and TopicFilter().should_replicate_topic(orders)

    mirror_once(spark, text, tmp_path)

    remote = f"{src}.{audit}"
    on_target = list_topics(cluster_b.bootstrap)
    assert remote in on_target and f"{src}.{orders}" not in on_target
    assert end_offsets(cluster_b.bootstrap, remote) == end_offsets(cluster_a.bootstrap, audit)
    assert values(cluster_b.bootstrap, remote) == values(cluster_a.bootstrap, audit)
    # the user's config property filter: every config but retention.*
    configs = {e.name: e.value for e in Admin(flow.target).topic_configs([remote])[remote]}
    assert configs["max.compaction.lag.ms"] == "123456789"
    assert configs["retention.ms"] != "987654321"


def test_user_group_filter_checkpoints_a_console_consumer_group(
        spark, cluster_a, cluster_b, unique_name, tmp_path: Path):
    src, dst = aliases()
    topic = f"{unique_name}-t"
    console, app = f"console-consumer-{uuid.uuid4().hex[:8]}", f"{unique_name}-app"
    create_topic(cluster_a.bootstrap, topic, 2)
    produce(cluster_a.bootstrap, topic, records("v", 200), partition=0)
    produce(cluster_a.bootstrap, topic, records("w", 100), partition=1)
    commit_offsets(cluster_a.bootstrap, console, {(topic, 0): 120, (topic, 1): 30})
    commit_offsets(cluster_a.bootstrap, app, {(topic, 0): 10})
    text = properties({src: cluster_a.bootstrap, dst: cluster_b.bootstrap}, {f"{src}->{dst}": {
        "topics": topic,
        "group.filter.class": "tests.plugins.PrefixGroups",
        "filter.group.prefix": console,  # this test's group only
    }})
    flow = load_text(text).enabled_flows[0]
    assert isinstance(group_filter_for(flow), PrefixGroups)
    assert not GroupFilter().should_replicate_group(console)  # MM2's default groups.exclude

    mirror_once(spark, text, tmp_path)
    report = run_checkpoints(flow)

    remote = f"{src}.{topic}"
    assert {cp.consumer_group_id for cp in report.emitted} == {console}
    checkpoints = {(g, t, p): cp.downstream_offset for (g, t, p), cp in load_checkpoints(flow).items()}
    assert checkpoints == {(console, remote, 0): 120, (console, remote, 1): 30}


def test_user_policy_and_filters_in_the_running_replicator(cluster_a, cluster_b, unique_name, tmp_path: Path):
    """``connect-mirror-maker`` as operators run it, with every class of the user's: a separate process."""
    src, dst = aliases()
    audit = f"{unique_name}.internal"
    console = f"console-consumer-{uuid.uuid4().hex[:8]}"
    create_topic(cluster_a.bootstrap, audit, 1)
    produce(cluster_a.bootstrap, audit, records("audit", 500), partition=0)
    commit_offsets(cluster_a.bootstrap, console, {(audit, 0): 321})
    text = properties({src: cluster_a.bootstrap, dst: cluster_b.bootstrap}, {f"{src}->{dst}": {
        "replication.policy.class": "tests.plugins.FromSuffix",
        "topic.filter.class": "tests.plugins.SuffixTopics",
        "filter.topic.suffix": audit,
        "group.filter.class": "tests.plugins.PrefixGroups",
        "filter.group.prefix": console,
    }}, extra="emit.checkpoints.interval.seconds = 1\nrefresh.topics.interval.seconds = 2\n"
              "refresh.groups.interval.seconds = 2\n")
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(text)
    flow = load_text(text).enabled_flows[0]
    remote = f"{audit}-from-{src}"  # FromSuffix's name, not DefaultReplicationPolicy's f"{src}.{audit}"

    rep = Replicator(config_path, tmp_path / "replicator.log").start()
    try:
        wait_for(lambda: remote in list_topics(cluster_b.bootstrap)
                 and end_offsets(cluster_b.bootstrap, remote) == {0: 500}, 120, f"{remote} mirrored", rep)

        def checkpointed() -> bool:
            return {k: cp.downstream_offset for k, cp in load_checkpoints(flow).items()} == {(console, remote, 0): 321}

        wait_for(checkpointed, 90, f"the checkpoint of {console} on {remote}", rep)
    finally:
        assert rep.stop() == 0, rep.tail()
    assert values(cluster_b.bootstrap, remote) == values(cluster_a.bootstrap, audit)
    assert f"{src}.{audit}" not in list_topics(cluster_b.bootstrap)
