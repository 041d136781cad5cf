"""Replication policies: how remote topics are named, and what counts as a cycle.

A policy defines three things (``format_remote_topic``, ``topic_source``, ``upstream_topic``);
everything else, MM2's cycle detection included, derives from them. Behaviour follows Apache
Kafka 4.3's ``connect/mirror-client`` (checked against its jars, not only its docs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Protocol

from mm2py.errors import ConfigError, ConfigProblem

HEARTBEATS = "heartbeats"

# MM2's Configurable keys, handed to a policy's ``configure``.
SEPARATOR_KEY = "replication.policy.separator"
INTERNAL_SEPARATOR_KEY = "replication.policy.internal.topic.separator.enabled"
SOURCE_ALIAS_KEY = "source.cluster.alias"
POLICY_CLASS_KEY = "replication.policy.class"


class NameFilter(Protocol):
    """A topic filter (``mm2py.config.filters.TopicFilterInterface``)."""

    def should_replicate_topic(self, topic: str) -> bool: ...


class ReplicationPolicy(ABC):
    """Names remote topics and traces them back to where they came from.

    Subclasses define exactly ``format_remote_topic``, ``topic_source`` and ``upstream_topic``.
    Invariants they must keep (all else here relies on them):

    - ``topic_source(t)`` and ``upstream_topic(t)`` are both None for a topic that did not come
      from another cluster, and both set for one that did;
    - a policy that can trace hops has ``topic_source(format_remote_topic(s, t)) == s`` and
      ``upstream_topic(format_remote_topic(s, t)) == t``; one that cannot (Identity) returns
      ``upstream_topic(t) == t``, which ends every walk, so it never detects cycles;
    - a topic is never sent to a cluster it already passed through (``is_cycle``);
    - MM2's own topics and Kafka's hidden ones never replicate (``is_internal_topic``).

    The internal topic names honour ``separator`` unless ``internal_topic_separator_enabled``
    is false (KIP-949: pre-3.1 names). A policy with neither attribute set gets MM2's
    interface defaults, which are the same names with ``.``.

    Custom policies are built with no arguments; ``configure`` then receives MM2's keys
    (``replication.policy.separator``, ``...internal.topic.separator.enabled``,
    ``source.cluster.alias``), as a Java policy's ``Configurable.configure`` does.
    """

    separator: str = "."
    internal_topic_separator_enabled: bool = True

    @abstractmethod
    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """The name ``topic`` of ``source_cluster_alias`` takes on the target."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The cluster a remote topic came from, or None for a local topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream, or None for a local topic."""

    def configure(self, props: Mapping[str, object]) -> None:  # noqa: B027 - optional hook, as in MM2
        """Receive MM2's policy settings; the base class needs none."""

    # -- derived ---------------------------------------------------------------------

    def original_topic(self, topic: str) -> str:
        """The root name, however many hops ``topic`` took."""
        seen = {topic}
        # seen guards policies whose upstream chain loops (Identity's t -> t is the usual case)
        while (upstream := self.upstream_topic(topic)) is not None and upstream not in seen:
            seen.add(upstream)
            topic = upstream
        return topic

    def heartbeats_topic(self) -> str:
        return HEARTBEATS

    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return f"{self._internal_separator()}internal"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        s = self._internal_separator()
        return f"mm2-offset-syncs{s}{cluster_alias}{s}internal"

    def offset_syncs_history_topic(self, cluster_alias: str) -> str:
        """mm2py's uncompacted copy of every sync it writes (``mm2py.source.sync_history``)."""
        s = self._internal_separator()
        return f"mm2-offset-syncs-history{s}{cluster_alias}{s}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        s = self._internal_separator()
        return f"{cluster_alias}{s}checkpoints{s}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        s = self._internal_separator()
        return topic.endswith(f"{s}checkpoints{s}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """MM2's own state: offset syncs, checkpoints and the Connect topics ``mm2-*.internal``.

        MM2 4.3 checks only the policy's internal suffix; MirrorMakerConfig names the Connect
        topics (``mm2-offsets.A.internal``) with ``.`` whatever the separator, so ``.internal``
        is accepted too, to keep them home under a custom separator as well.
        """
        mm2_state = topic.startswith("mm2") and topic.endswith((self._internal_suffix(), ".internal"))
        return mm2_state or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """Never replicated whatever the filter says: Kafka's hidden topics and MM2's own.

        Since Kafka 4.0 (KAFKA-17200) user topics merely ending ``.internal``/``-internal``
        are not internal; the default ``topics.exclude`` still keeps them home.
        """
        return topic.startswith(("__", ".")) or self.is_mm2_internal_topic(topic)

    def is_cycle(self, topic: str, target_cluster_alias: str) -> bool:
        """True when ``topic`` already passed through ``target_cluster_alias`` (MM2's isCycle).

        Walks ``topic_source``/``upstream_topic`` hop by hop. A policy that cannot trace hops
        (``upstream_topic(t) == t``, as Identity) ends the walk: it never sees cycles.
        """
        seen: set[str] = set()
        while topic not in seen:
            seen.add(topic)
            source = self.topic_source(topic)
            if source is None:
                return False
            if source == target_cluster_alias:
                return True
            upstream = self.upstream_topic(topic)
            if upstream is None:
                return False
            topic = upstream  # upstream == topic is caught by seen on the next turn
        return False

    def should_replicate_topic(
        self,
        topic: str,
        target_cluster_alias: str,
        topic_filter: NameFilter,
        heartbeats_replication_enabled: bool = True,
    ) -> bool:
        """MM2's MirrorSourceConnector.shouldReplicateTopic for a flow into ``target_cluster_alias``.

        Heartbeats travel even when the filter leaves them out, so hops can be counted.
        """
        wanted = topic_filter.should_replicate_topic(topic) or (
            heartbeats_replication_enabled and self.is_heartbeats_topic(topic))
        return wanted and not self.is_internal_topic(topic) and not self.is_cycle(topic, target_cluster_alias)


class DefaultReplicationPolicy(ReplicationPolicy):
    """``orders`` of A is ``A.orders`` on the target; hops stack: ``B.A.orders``.

    Parsing follows Java's ``String.split`` on the separator, trailing empty parts dropped:
    ``A.`` is a local topic, ``A..b`` came from A as ``.b``, ``.b`` came from cluster ``""``.
    """

    def __init__(self, separator: str = ".", internal_topic_separator_enabled: bool = True):
        self._set(separator, internal_topic_separator_enabled)

    def _set(self, separator: str, internal_topic_separator_enabled: bool) -> None:
        if not separator:
            # Java would split between every character; no one means that
            raise ConfigError(ConfigProblem(SEPARATOR_KEY, "must not be empty"))
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def configure(self, props: Mapping[str, object]) -> None:
        flag = props.get(INTERNAL_SEPARATOR_KEY, self.internal_topic_separator_enabled)
        enabled = flag if isinstance(flag, bool) else str(flag).strip().lower() == "true"
        self._set(str(props.get(SEPARATOR_KEY, self.separator)), enabled)

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{source_cluster_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        parts = topic.split(self.separator)
        # Java's split drops trailing empty strings; fewer than two parts left means local
        return parts[0] if any(parts[1:]) else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(separator={self.separator!r}, "
                f"internal_topic_separator_enabled={self.internal_topic_separator_enabled})")


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names; only heartbeats are prefixed, so hops can be counted.

    Any name ending ``heartbeats`` is handled as the Default policy would (MM2 tests the
    suffix, so ``myheartbeats`` too). Every other topic is its own upstream topic and comes from
    ``source_cluster_alias`` (None when unset), so ``is_cycle`` is always false: ``A->B`` plus
    ``B->A`` would loop forever. mm2py holds back every topic that would go round such a cycle
    (``mm2py.topology``); MM2 does not.
    """

    def __init__(
        self,
        source_cluster_alias: str | None = None,
        separator: str = ".",
        internal_topic_separator_enabled: bool = True,
    ):
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def configure(self, props: Mapping[str, object]) -> None:
        super().configure(props)
        if (alias := props.get(SOURCE_ALIAS_KEY)) is not None:
            self.source_cluster_alias = str(alias)

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().upstream_topic(topic)
        return topic

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.source_cluster_alias!r}, separator={self.separator!r}, "
                f"internal_topic_separator_enabled={self.internal_topic_separator_enabled})")
