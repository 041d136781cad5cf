"""Checkpoint freshness per consumer group, read from the clusters (for ``mm2py.metrics``).

A group's checkpoints are fresh when they follow the group: a checkpoint record is written
only when a group's translated offsets change, so the age of the newest checkpoint alone
would call every idle group stale. Two figures per group tell it apart:

- the age of the group's newest checkpoint record on the target (its timestamp);
- per partition, the group's committed offset on the source minus the upstream offset of
  its newest checkpoint: progress of the group that a failover now would read again. An
  idle group stays at 0 however old its checkpoint; a group that moves while checkpoints
  stop grows it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from mm2py.config.model import FlowConfig
from mm2py.errors import FormatError
from mm2py.flow_policy import policy_for
from mm2py.formats import Checkpoint
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import TopicReader, read_to_end
from mm2py.policy import ReplicationPolicy


@dataclass(frozen=True)
class GroupFreshness:
    flow: str  # "A->B"
    group: str
    newest_ms: int | None  # timestamp of the group's newest checkpoint record on the target
    # (remote topic, partition, committed offset on the source minus the newest checkpoint's upstream offset)
    behind: tuple[tuple[str, int, int], ...] = ()


def read_checkpoints(flow: FlowConfig, policy: ReplicationPolicy) -> dict[tuple[str, str, int],
                                                                         tuple[Checkpoint, int]]:
    """The newest checkpoint of every (group, remote topic, partition), with its record timestamp (ms)."""
    topic = policy.checkpoints_topic(flow.source.alias)
    cluster = flow.target
    timeout = flow.admin_timeout_ms / 1000
    reader = TopicReader(cluster, "mm2py-freshness", kind=None)
    out: dict[tuple[str, str, int], tuple[Checkpoint, int]] = {}

    def on_record(msg: object) -> None:
        try:
            cp = Checkpoint.from_record(msg.key(), msg.value())  # type: ignore[attr-defined]
        except FormatError:
            return
        out[(cp.consumer_group_id, cp.topic, cp.partition)] = (cp, msg.timestamp()[1])  # type: ignore[attr-defined]

    try:
        bounds = reader.bounds(topic, timeout, [0])
        if bounds is None:
            return {}
        low, end = bounds[0]
        read_to_end(reader.consumer, topic, {0: low}, {0: end}, cluster=cluster.alias,
                    deadline=time.monotonic() + timeout, on_record=on_record)
    finally:
        reader.close()
    return out


def checkpoint_freshness(flow: FlowConfig) -> list[GroupFreshness]:
    """Every group with checkpoints of ``flow``: newest checkpoint time and how far each partition is behind."""
    policy = policy_for(flow)
    checkpoints = read_checkpoints(flow, policy)
    src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
    by_group: dict[str, list[tuple[Checkpoint, int]]] = {}
    for (group, _topic, _partition), entry in checkpoints.items():
        by_group.setdefault(group, []).append(entry)
    out = []
    for group, entries in sorted(by_group.items()):
        committed = {(policy.format_remote_topic(flow.source.alias, t), p): off
                     for (t, p), off in src.group_offsets(group).items()}
        behind = tuple(sorted((cp.topic, cp.partition, max(committed[key] - cp.upstream_offset, 0))
                              for cp, _ts in entries if (key := (cp.topic, cp.partition)) in committed))
        newest = max((ts for _cp, ts in entries if ts >= 0), default=None)
        out.append(GroupFreshness(flow.name, group, newest, behind))
    return out
