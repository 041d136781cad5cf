"""Replication policies: how remote topics are named, and what counts as a cycle.

A policy defines three things (``format_remote_topic``, ``topic_source``,
``upstream_topic``); everything else, MM2's cycle detection included, derives from them.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Protocol

from mm2py.errors import ConfigError, ConfigProblem

HEARTBEATS = "heartbeats"


class NameFilter(Protocol):
    def matches(self, name: str) -> bool: ...


class ReplicationPolicy(ABC):
    """Names remote topics and walks them back to their origin.

    Invariants:
    - ``upstream_topic(format_remote_topic(s, t)) == t`` and ``topic_source`` of it is ``s``
      for any policy that can trace hops (Default); Identity cannot, and says so;
    - a topic is never replicated to a cluster it already came through (``is_cycle``);
    - internal topics (``__*``, ``.*``, ``*.internal``, ``*-internal``, MM2's own) never move.
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

    # -- derived ---------------------------------------------------------------------

    def original_topic(self, topic: str) -> str:
        seen = {topic}
        while (upstream := self.upstream_topic(topic)) is not None and upstream not in seen:
            seen.add(upstream)
            topic = upstream
        return topic

    def heartbeats_topic(self) -> str:
        return HEARTBEATS

    def _internal_sep(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        s = self._internal_sep()
        return f"mm2-offset-syncs{s}{cluster_alias}{s}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        s = self._internal_sep()
        return f"{cluster_alias}{s}checkpoints{s}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS

    def is_checkpoints_topic(self, topic: str) -> bool:
        s = self._internal_sep()
        return topic.endswith(f"{s}checkpoints{s}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith("mm2") and topic.endswith(".internal")) or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        return (
            topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith(".internal")
            or topic.endswith("-internal")
            or self.is_mm2_internal_topic(topic)
        )

    def is_cycle(self, topic: str, target_cluster_alias: str) -> bool:
        """True when ``topic`` already passed through ``target_cluster_alias`` (MM2's isCycle)."""
        seen: set[str] = set()
        while topic not in seen:
            seen.add(topic)
            source = self.topic_source(topic)
            if source is None:
                return False
            if source == target_cluster_alias:
                return True
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False  # Identity: cannot tell, as MM2
            topic = upstream
        return False

    def should_replicate_topic(
        self,
        topic: str,
        target_cluster_alias: str,
        topic_filter: NameFilter,
        heartbeats_replication_enabled: bool = True,
    ) -> bool:
        wanted = topic_filter.matches(topic) or (
            heartbeats_replication_enabled and self.is_heartbeats_topic(topic)
        )
        return wanted and not self.is_internal_topic(topic) and not self.is_cycle(topic, target_cluster_alias)


class DefaultReplicationPolicy(ReplicationPolicy):
    """``A.orders`` on the target for ``orders`` of A; hops stack: ``B.A.orders``."""

    def __init__(self, separator: str = ".", internal_topic_separator_enabled: bool = True):
        if not separator:
            raise ConfigError(ConfigProblem("replication.policy.separator", "must not be empty"))
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{source_cluster_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, _ = topic.partition(self.separator)
        return head if sep else None

    def upstream_topic(self, topic: str) -> str | None:
        _, sep, rest = topic.partition(self.separator)
        return rest if sep else None


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names; only heartbeats are prefixed so hops can be counted.

    It cannot see cycles: ``A->B`` plus ``B->A`` would loop. mm2py refuses such topologies
    at start (``mm2py.topology``) instead of silently looping as MM2 does.
    """

    def __init__(self, source_cluster_alias: str | None = None, separator: str = ".",
                 internal_topic_separator_enabled: bool = True):
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

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
        return topic.endswith(HEARTBEATS)


_BUILTIN = {
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}
_JAVA_PACKAGE = "org.apache.kafka.connect.mirror."


def policy_class(class_name: str) -> type[ReplicationPolicy]:
    """Resolve ``replication.policy.class``: MM2's Java names, short names or a Python path."""
    name = class_name.strip()
    short = name.removeprefix(_JAVA_PACKAGE)
    if short in _BUILTIN:
        return _BUILTIN[short]
    module_name, _, attr = name.rpartition(".")
    problem = None
    if not module_name or name.startswith(_JAVA_PACKAGE):
        problem = "unknown policy; use DefaultReplicationPolicy, IdentityReplicationPolicy or a Python path"
    else:
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            problem = f"cannot import {name}: {e}"
        else:
            if isinstance(cls, type) and issubclass(cls, ReplicationPolicy):
                return cls
            problem = f"{name} is not a mm2py.policy.ReplicationPolicy subclass"
    raise ConfigError(ConfigProblem("replication.policy.class", f"{problem} (got {class_name!r})"))


def load_policy(
    class_name: str,
    *,
    separator: str = ".",
    internal_topic_separator_enabled: bool = True,
    source_cluster_alias: str | None = None,
) -> ReplicationPolicy:
    cls = policy_class(class_name)
    if issubclass(cls, IdentityReplicationPolicy):
        return cls(source_cluster_alias, separator, internal_topic_separator_enabled)
    if issubclass(cls, DefaultReplicationPolicy):
        return cls(separator, internal_topic_separator_enabled)
    return cls()


def find_cycle(flows: list[tuple[str, str]]) -> list[str] | None:
    """A directed cycle among cluster aliases, e.g. ``["A", "B", "A"]``, or None."""
    graph: dict[str, list[str]] = {}
    for src, tgt in flows:
        graph.setdefault(src, []).append(tgt)
    state: dict[str, int] = {}  # 1 visiting, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None
