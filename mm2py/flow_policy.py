"""A flow's replication policy: ``replication.policy.class`` configured from its keys, with its routers.

``policy_for`` is the one place a flow's policy is built: where the flow's ``transforms`` hold
a ``RegexRouter`` (``mm2py.routing``) the policy's remote names go through it
(``RoutedPolicy``), so every part that names a remote topic names the routed one; the offset
syncs' and checkpoints' own topics are the policy's, never routed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mm2py.policy import ReplicationPolicy
from mm2py.policy_loader import load_policy
from mm2py.routing import Router, route, routers_of

if TYPE_CHECKING:
    from mm2py.config.model import ClusterConfig, FlowConfig


class RoutedPolicy(ReplicationPolicy):
    """``policy`` whose remote names go through ``routers``; everything else is ``policy``'s own."""

    def __init__(self, policy: ReplicationPolicy, routers: tuple[Router, ...]):
        self.policy = policy
        self.routers = routers
        self.separator = policy.separator
        self.internal_topic_separator_enabled = policy.internal_topic_separator_enabled

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return route(self.routers, self.policy.format_remote_topic(source_cluster_alias, topic))

    def unrouted(self, source_cluster_alias: str, topic: str) -> str:
        """The name the policy alone gives."""
        return self.policy.format_remote_topic(source_cluster_alias, topic)

    def topic_source(self, topic: str) -> str | None:
        return self.policy.topic_source(topic)

    def upstream_topic(self, topic: str) -> str | None:
        return self.policy.upstream_topic(topic)

    def original_topic(self, topic: str) -> str:
        return self.policy.original_topic(topic)

    def heartbeats_topic(self) -> str:
        return self.policy.heartbeats_topic()

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return self.policy.offset_syncs_topic(cluster_alias)

    def offset_syncs_history_topic(self, cluster_alias: str) -> str:
        return self.policy.offset_syncs_history_topic(cluster_alias)

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return self.policy.checkpoints_topic(cluster_alias)

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.policy.is_heartbeats_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return self.policy.is_checkpoints_topic(topic)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return self.policy.is_mm2_internal_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        return self.policy.is_internal_topic(topic)

    def is_cycle(self, topic: str, target_cluster_alias: str) -> bool:
        return self.policy.is_cycle(topic, target_cluster_alias)

    def __repr__(self) -> str:
        return f"RoutedPolicy({self.policy!r}, {[r.name for r in self.routers]})"


def policy_for(flow: FlowConfig) -> ReplicationPolicy:
    """The policy of one flow, configured from its keys (the source alias included, as MM2 does), with its routers."""
    policy = load_policy(
        flow.naming.replication_policy_class,
        separator=flow.naming.replication_policy_separator,
        internal_topic_separator_enabled=flow.naming.internal_topic_separator_enabled,
        source_cluster_alias=flow.source.alias,
    )
    routers = routers_of(flow.raw)
    return RoutedPolicy(policy, routers) if routers else policy


def offset_syncs_location(flow: FlowConfig) -> tuple[ClusterConfig, str]:
    """The cluster holding a flow's offset syncs (``offset-syncs.topic.location``) and the topic there.

    The cluster carries the settings of the clients that write and read the syncs (MM2's
    offset-syncs producer and consumer, ``mm2py.config.clients``).
    """
    return _syncs_location(flow, policy_for(flow))


def _syncs_location(flow: FlowConfig, policy: ReplicationPolicy) -> tuple[ClusterConfig, str]:
    if flow.checkpoints.offset_syncs_topic_location == "target":
        return flow.offset_syncs or flow.target, policy.offset_syncs_topic(flow.source.alias)
    return flow.offset_syncs or flow.source, policy.offset_syncs_topic(flow.target.alias)


def offset_syncs_history_location(flow: FlowConfig) -> tuple[ClusterConfig, str]:
    """The cluster and topic of the flow's offset-sync history: beside its syncs topic."""
    policy = policy_for(flow)
    cluster, _ = _syncs_location(flow, policy)
    alias = flow.source.alias if flow.checkpoints.offset_syncs_topic_location == "target" else flow.target.alias
    return cluster, policy.offset_syncs_history_topic(alias)
