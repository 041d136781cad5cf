"""``sync.topic.deletes.enabled``: delete remote topics whose source topic was deleted (MM2 never does).

Only topics this flow writes are candidates: a topic on the target whose name the policy
traces to this flow's source cluster (``format_remote_topic(source, upstream) == name``),
whose upstream topic this flow would mirror, and which is gone from the source. A policy that
keeps names (Identity) cannot tell a remote topic from a local one of the same name, so it
deletes nothing. Topics deleted while mm2py was down are found too: the target is the record.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2py.config.filters import TopicFilterInterface
from mm2py.policy import ReplicationPolicy


def orphaned_remote_topics(
    policy: ReplicationPolicy,
    source_alias: str,
    target_alias: str,
    topic_filter: TopicFilterInterface,
    source_topics: Iterable[str],
    target_topics: Iterable[str],
    heartbeats_replication_enabled: bool = True,
) -> list[str]:
    """Remote topics of this flow on the target whose source topic no longer exists."""
    on_source = set(source_topics)
    out = []
    for name in sorted(target_topics):
        if policy.topic_source(name) != source_alias:
            continue
        upstream = policy.upstream_topic(name)
        if upstream is None or upstream == name or upstream in on_source:
            continue
        if policy.format_remote_topic(source_alias, upstream) != name:
            continue
        if policy.should_replicate_topic(upstream, target_alias, topic_filter, heartbeats_replication_enabled):
            out.append(name)
    return out
