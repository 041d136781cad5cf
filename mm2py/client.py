"""What a consumer needs to move between clusters: MM2's MirrorClient and RemoteClusterUtils.

``MirrorClient`` looks at one cluster: which remote and heartbeat topics it holds, where its
data came from, and the translated offsets checkpoints recorded there. It reads MM2's topics,
so it works the same against clusters fed by Apache MirrorMaker 2.
"""

from __future__ import annotations

from mm2py.config.model import ClusterConfig, MirrorMakerConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.formats import Checkpoint
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import read_all
from mm2py.policy import ReplicationPolicy
from mm2py.policy_loader import load_policy
from mm2py.types import TP


class MirrorClient:
    """Replication facts as seen from ``cluster`` (MM2's MirrorClient)."""

    def __init__(self, cluster: ClusterConfig, policy: ReplicationPolicy, timeout_ms: int = 60000):
        self.cluster = cluster
        self.policy = policy
        self.timeout_ms = timeout_ms
        self.admin = Admin(cluster, timeout_ms=timeout_ms)

    @classmethod
    def for_cluster(cls, config: MirrorMakerConfig, alias: str) -> MirrorClient:
        if alias not in config.clusters:
            raise ConfigError(ConfigProblem("clusters", f"no cluster {alias!r} (known: {', '.join(config.clusters)})"))
        flow = next((f for f in config.flows if alias in (f.target.alias, f.source.alias)), None)
        policy = load_policy(
            flow.naming.replication_policy_class if flow else "DefaultReplicationPolicy",
            separator=flow.naming.replication_policy_separator if flow else ".",
            internal_topic_separator_enabled=flow.naming.internal_topic_separator_enabled if flow else True,
            source_cluster_alias=flow.source.alias if flow else None,
        )
        return cls(config.clusters[alias], policy, flow.admin_timeout_ms if flow else 60000)

    def topics(self) -> list[str]:
        return sorted(self.admin.topics())

    def heartbeat_topics(self) -> list[str]:
        return [t for t in self.topics() if self.policy.is_heartbeats_topic(t)]

    def checkpoint_topics(self) -> list[str]:
        return [t for t in self.topics() if self.policy.is_checkpoints_topic(t)]

    def remote_topics(self, source: str | None = None) -> list[str]:
        out = []
        for t in self.topics():
            if self.policy.is_internal_topic(t) or self.policy.is_heartbeats_topic(t):
                continue
            origin = self.policy.topic_source(t)
            if origin is not None and (source is None or origin == source):
                out.append(t)
        return out

    def _hops(self, topic: str) -> list[str]:
        chain: list[str] = []
        seen = {topic}
        while (src := self.policy.topic_source(topic)) is not None:
            chain.append(src)
            upstream = self.policy.upstream_topic(topic)
            if upstream is None or upstream in seen:
                break
            seen.add(upstream)
            topic = upstream
        return chain

    def upstream_clusters(self) -> set[str]:
        """Every cluster whose heartbeats reach this one, directly or through others."""
        return {alias for t in self.heartbeat_topics() for alias in self._hops(t)}

    def replication_hops(self, upstream_alias: str) -> int:
        """Fewest hops from ``upstream_alias`` to here, by heartbeat topics; -1 if none."""
        hops = [chain.index(upstream_alias) + 1 for t in self.heartbeat_topics()
                if upstream_alias in (chain := self._hops(t))]
        return min(hops) if hops else -1

    def remote_consumer_offsets(self, group: str, remote_alias: str) -> dict[TP, int]:
        """Offsets of ``group`` translated onto this cluster, from ``{remote}.checkpoints.internal``."""
        topic = self.policy.checkpoints_topic(remote_alias)
        out: dict[TP, int] = {}
        for _offset, key, value in read_all(self.cluster, topic, self.timeout_ms / 1000):
            if key is None or value is None:
                continue
            cp = Checkpoint.from_record(key, value)
            if cp.consumer_group_id == group:
                out[(cp.topic, cp.partition)] = cp.downstream_offset
        return out


def translate_offsets(config: MirrorMakerConfig, target_alias: str, remote_alias: str, group: str) -> dict[TP, int]:
    """MM2's RemoteClusterUtils.translateOffsets: ``group``'s offsets of ``remote_alias`` on ``target_alias``."""
    return MirrorClient.for_cluster(config, target_alias).remote_consumer_offsets(group, remote_alias)
