"""Where a flow's copy is now, per source partition, read from the clusters: the target's ends
mapped back through the offset syncs.

A flow's positions move when a copy task records its progress (every ``copy.tail.commit.ms``
while it tails or copies an interval, mm2py.source.copy.tail_commit) and when a micro-batch
commits; between two records the target already holds what was acknowledged since. ``mm2py
status`` and the lag metrics (which read status, mm2py.engine.metrics_server) take a partition's
next offset to mirror as

    live_next = min(max(position + 1, u + (target_end - d)), source_end)

where ``(u, d)`` is the partition's newest offset sync (source offset ``u`` landed at target
offset ``d``) and ``target_end`` the remote partition's end now. Every record the target holds
past ``d`` was written in order from source offsets at or after ``u``, each taking at least one
source offset (compaction gaps, transaction markers and records a transform dropped take more),
so ``u + (target_end - d)`` is at most where the copy truly is: the lag shown is never lower
than the truth when the source's ends were read (they are read first, the target's ends last,
so what arrived in between is the most it can be short by), and never negative. The one
exception is a copy written again after a failed task (at-least-once): until the re-copy's first
sync is written (its first progress record, within ``FIRST_S`` of its start) the duplicates
count as progress.

Invariants:
- only where one flow alone writes the remote partition, one source partition to one remote
  partition: at-least-once flows (an exactly-once target's transaction markers take offsets
  too), a remote topic named apart from its source topic (identity replication: local producers
  write there too) with at least the source's partitions (fewer: records are rehashed);
  elsewhere, and where the syncs or the target's ends cannot be read (logged once per flow and
  error), ``live_next`` is the recorded position's next offset;
- a sync is read from the last ``SYNCS_TAIL`` records of the syncs topic (the newest per
  partition wins, as ``SyncIndex`` supersedes); a partition without one there keeps its position;
- a long-lived process (the metrics server) reads each syncs partition on from where its last
  call ended (``SyncTail``), so a call reads what was written since, not the tail again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.flow_policy import offset_syncs_location, policy_for
from mm2py.formats import FormatError, OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import TopicReader, read_to_end
from mm2py.types import TP

log = structlog.get_logger(__name__)

SYNCS_TAIL = 20_000  # records read back from each end of the syncs topic
_warned: set[tuple[str, str]] = set()  # (flow, error) already logged: each read failure is logged once


def mapped(flow: FlowConfig) -> bool:
    """Whether ``flow``'s live positions may be mapped from the target's ends at all."""
    return flow.delivery.exactly_once == "off" and flow.checkpoints.emit_offset_syncs_enabled


class SyncTail:
    """The newest sync per source partition in one syncs topic, and how far each of the topic's
    partitions was read. Invariant: ``newest`` holds, per source partition, the last sync in
    offset order among the records read, which are every record from each partition's first
    read start up to ``reached``; a partition whose end or log start passed ``reached`` by
    going back (the topic re-created) is read afresh from its tail."""

    def __init__(self) -> None:
        self.reached: dict[int, int] = {}
        self.newest: dict[TP, tuple[int, int]] = {}

    def starts(self, bounds: Mapping[int, tuple[int, int]]) -> dict[int, int]:
        """Where each partition's read starts: on from ``reached``, else at its tail."""
        if any(not low <= self.reached[p] <= end for p, (low, end) in bounds.items() if p in self.reached):
            self.reached, self.newest = {}, {}
        return {p: self.reached.get(p, max(low, end - SYNCS_TAIL)) for p, (low, end) in bounds.items()}

    def take(self, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:  # a tombstone: not a sync
            return
        try:
            sync = OffsetSync.from_record(key, value)
        except FormatError:  # not a sync (another tool's record): not ours to read
            return
        self.newest[sync.topic_partition] = (sync.upstream_offset, sync.downstream_offset)


_tails: dict[tuple[str, str], SyncTail] = {}  # (flow, syncs topic): kept for the process's life


def newest_syncs(flow: FlowConfig, topics: set[str]) -> dict[TP, tuple[int, int]]:
    """Per source partition of ``topics``: its newest (upstream, downstream) sync in the syncs topic."""
    cluster, topic = offset_syncs_location(flow)
    tail = _tails.setdefault((flow.name, topic), SyncTail())
    reader = TopicReader(cluster, "mm2py-status", None, None, **{"enable.partition.eof": False})
    timeout = flow.admin_timeout_ms / 1000
    try:
        bounds = reader.bounds(topic, timeout)
        if bounds is None:
            return {}
        tail.reached = read_to_end(reader.consumer, topic, tail.starts(bounds),
                                   {p: end for p, (_low, end) in bounds.items()}, cluster=cluster.alias,
                                   deadline=time.monotonic() + timeout,
                                   on_record=lambda msg: tail.take(msg.key(), msg.value()))
    finally:
        reader.close()
    return {tp: sync for tp, sync in tail.newest.items() if tp[0] in topics}


def live_nexts(flow: FlowConfig, topics: Mapping[str, int], positions: Mapping[TP, int],
               source_ends: Mapping[TP, int]) -> dict[TP, int]:
    """Every partition of ``topics`` (name -> partition count): the next offset to mirror, now."""
    nexts = {(t, p): positions[(t, p)] + 1 if (t, p) in positions else 0 for t, n in topics.items() for p in range(n)}
    if not mapped(flow):
        return nexts
    policy = policy_for(flow)
    remote = {t: policy.format_remote_topic(flow.source.alias, t) for t in topics}
    try:
        target = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
        on_target = target.topics()
        alone = {t for t, n in topics.items() if remote[t] != t and on_target.get(remote[t], 0) >= n}
        syncs = newest_syncs(flow, alone) if alone else {}
        target_ends = target.list_offsets([(remote[t], p) for t, p in syncs], "latest")
    except KafkaError as e:  # e.g. no read ACL on the syncs topic: the positions still tell the lag
        if (flow.name, str(e)) not in _warned:
            _warned.add((flow.name, str(e)))
            log.warning("lag is shown from the recorded positions only: the syncs or the target's ends "
                        "could not be read", flow=flow.name, error=str(e))
        return nexts
    for tp, sync in syncs.items():
        end = target_ends.get((remote[tp[0]], tp[1]))
        if end is not None and tp in nexts:
            nexts[tp] = live_next(nexts[tp], sync, end, source_ends.get(tp, 0))
    return nexts


def live_next(recorded: int, sync: tuple[int, int], target_end: int, source_end: int) -> int:
    """A partition's next offset to mirror now: ``recorded`` (its position's next offset) moved on by
    the records the target holds past its newest ``sync`` (upstream, downstream), never past
    ``source_end`` nor back before ``recorded``."""
    up, down = sync
    return max(recorded, min(up + max(target_end - down, 0), source_end))
