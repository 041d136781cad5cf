"""Keeps the remote topics' configs and ACLs in step with their source topics.

Runs inside the flow's planner (driver side), from the source connector's offset polling,
each kind on its own interval (``sync.topic.configs.interval.seconds``,
``sync.topic.acls.interval.seconds``), first at the flow's first refresh. Failures are
logged with the cluster and what was refused and retried at the next interval: metadata
lagging behind never stops data, as with MM2.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import structlog

from mm2py.config.filters import config_property_filter_for
from mm2py.config.model import FlowConfig
from mm2py.errors import AuthorizationError, KafkaError
from mm2py.kafka.admin import Admin
from mm2py.metadata.acls import target_acls
from mm2py.metadata.configs import creation_configs, pending, sync_operations

log = structlog.get_logger(__name__)


class MetadataSync:
    """Topic config and ACL sync of one flow.

    ``remote_topic`` names a source topic's remote topic; ``mirrored`` says whether a source
    topic is mirrored by this flow (filters, policy and cycles), the same rule as for data.
    """

    def __init__(self, flow: FlowConfig, src: Admin, dst: Admin, remote_topic: Callable[[str], str],
                 mirrored: Callable[[str], bool]):
        self.flow, self.src, self.dst = flow, src, dst
        self.remote_topic, self.mirrored = remote_topic, mirrored
        self.filter = config_property_filter_for(flow)
        self._configs_at: float | None = None
        self._acls_at: float | None = None
        self._no_authorizer_logged = False

    def new_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Configs to create the remote topics of ``topics`` with ({} each when sync is off or fails)."""
        topics = list(topics)
        if not self.flow.metadata.sync_topic_configs_enabled or not topics:
            return {t: {} for t in topics}
        try:
            described = self.src.topic_configs(topics)
        except KafkaError as e:
            self._warn("reading source topic configs for new remote topics", e, "DESCRIBE_CONFIGS on the topics")
            return {t: {} for t in topics}
        return {t: creation_configs(described.get(t, ()), self.filter) for t in topics}

    def maybe_run(self, mirrored_topics: Iterable[str], now: float | None = None) -> None:
        """Sync what is due; ``mirrored_topics`` are source topics whose remote topic exists."""
        now = time.monotonic() if now is None else now
        metadata = self.flow.metadata
        if metadata.sync_topic_configs_enabled and self._due(self._configs_at,
                                                             metadata.sync_topic_configs_interval_seconds, now):
            self._configs_at = now
            self.sync_configs(mirrored_topics)
        if metadata.sync_topic_acls_enabled and self._due(self._acls_at, metadata.sync_topic_acls_interval_seconds,
                                                          now):
            self._acls_at = now
            self.sync_acls()

    @staticmethod
    def _due(last: float | None, interval: float, now: float) -> bool:
        return last is None or now - last >= interval

    def sync_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str | None]]:
        """Bring every remote topic's copied configs to the source's; returns what changed."""
        topics = sorted(topics)
        if not topics:
            return {}
        remote = {t: self.remote_topic(t) for t in topics}
        try:
            source = self.src.topic_configs(topics)
            target = self.dst.topic_configs(remote.values())
        except KafkaError as e:
            self._warn("reading topic configs", e, "DESCRIBE_CONFIGS on the mirrored and remote topics")
            return {}
        changes = {}
        for topic in topics:
            ops = pending(sync_operations(source.get(topic, ()), self.filter), target.get(remote[topic], ()))
            if ops:
                changes[remote[topic]] = ops
        if not changes:
            return {}
        try:
            self.dst.alter_topic_configs(changes)
        except KafkaError as e:
            self._warn("changing remote topic configs", e, "ALTER_CONFIGS on the remote topics")
            return {}
        for topic, ops in sorted(changes.items()):
            log.info("topic configs synced", flow=self.flow.name, topic=topic,
                     set={k: v for k, v in ops.items() if v is not None},
                     reset_to_target_default=sorted(k for k, v in ops.items() if v is None))
        return changes

    def sync_acls(self) -> int:
        """Create on the target the transformed ACLs of mirrored topics; returns how many were sent."""
        try:
            acls = self.src.topic_acls()
        except KafkaError as e:
            self._warn("reading source topic ACLs", e, "DESCRIBE on the source CLUSTER")
            return 0
        if acls is None:
            if not self._no_authorizer_logged:
                log.info("source cluster has no authorizer: no topic ACLs to sync "
                         "(set sync.topic.acls.enabled = false to stop asking)", flow=self.flow.name,
                         cluster=self.flow.source.alias)
                self._no_authorizer_logged = True
            return 0
        wanted = target_acls(acls, self.remote_topic, self.mirrored)
        if not wanted:
            return 0
        try:
            self.dst.create_acls(wanted)
        except KafkaError as e:
            self._warn("creating ACLs of remote topics", e, "ALTER on the target CLUSTER")
            return 0
        log.info("topic ACLs synced", flow=self.flow.name, bindings=len(wanted))
        return len(wanted)

    def _warn(self, action: str, error: KafkaError, needs: str) -> None:
        extra = {"needs": needs} if isinstance(error, AuthorizationError) else {}
        log.warning(f"{action} failed; retried at the next interval", flow=self.flow.name, error=str(error),
                    **extra)
