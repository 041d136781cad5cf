"""The checkpoint connector's core: translate source group offsets, write MM2 Checkpoints.

Every ``emit.checkpoints.interval.seconds``: for each source group passing the group filter,
its committed offsets on mirrored topics are translated with the flow's offset syncs
(``mm2py.checkpoint.translation``, exact) and written as MM2 Checkpoint records to
``{source}.checkpoints.internal`` on the target. With ``sync.group.offsets.enabled``, the
translated offsets are also committed to the group on the target when it has no active
member there, and only forward.

Invariants:
- no checkpoint for a partition before one of its records was mirrored (or the group is at 0);
- checkpoints of a group never go backwards unless the group rewound on the source;
- a restarted task continues from the checkpoints already in the topic;
- a pass reads only the syncs and checkpoints appended since the pass before it, when it is
  handed that pass's state (``mm2py.checkpoint.state``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from mm2py.checkpoint.both_ways import BothWays
from mm2py.checkpoint.generations import REASON, untaken
from mm2py.checkpoint.state import CheckpointLog, Key, SyncLog, checkpoint_log_for, sync_log_for
from mm2py.checkpoint.translation import SyncIndex
from mm2py.config.filters import group_filter_for, topic_filter_for
from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.flow_policy import policy_for
from mm2py.formats import Checkpoint
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import ensure_compacted_topic
from mm2py.transforms.timestamp_router import timestamp_router_of
from mm2py.types import TP
from mm2py.worker import kept_writer

log = structlog.get_logger(__name__)


def load_syncs(flow: FlowConfig) -> SyncIndex:
    """Every offset sync of ``flow``, read now (history and MM2's syncs topic)."""
    return sync_log_for(flow).refresh()


def load_checkpoints(flow: FlowConfig) -> dict[Key, Checkpoint]:
    """The newest checkpoint of each (group, topic, partition) on ``flow``'s target, read now."""
    return checkpoint_log_for(flow).refresh()


@dataclass(frozen=True)
class CheckpointReport:
    groups: int
    emitted: tuple[Checkpoint, ...]
    synced_groups: tuple[str, ...]
    records_read: int = 0  # syncs and checkpoints read by this pass
    syncs_evicted: int = 0  # syncs of records gone from the source, dropped from the kept index


def run_checkpoints(flow: FlowConfig, groups: Sequence[str] | None = None,
                    sync_offsets: bool | None = None, syncs: SyncLog | None = None,
                    checkpoints: CheckpointLog | None = None,
                    reverse: tuple[FlowConfig, SyncLog] | None = None) -> CheckpointReport:
    """One checkpoint pass over ``groups`` (default: list them now), syncing offsets when ``sync_offsets``.

    ``sync_offsets`` defaults to ``sync.group.offsets.enabled``; the connector passes its schedule.
    ``syncs`` and ``checkpoints`` kept from the last pass are read from where it stopped;
    without them, both topics are read whole. ``reverse``: the flow back and its syncs, for a
    two-cluster identity cycle (``mm2py.checkpoint.both_ways``).
    """
    syncs = syncs or sync_log_for(flow)
    checkpoints = checkpoints or checkpoint_log_for(flow)
    read_before = syncs.records_read + checkpoints.tail.records_read
    policy = policy_for(flow)
    src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
    dst = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
    topic = ensure_checkpoints_topic(flow, dst)
    group_filter = group_filter_for(flow)
    topic_filter = topic_filter_for(flow)
    listed = src.groups() if groups is None else groups
    groups = sorted(g for g in listed if group_filter.should_replicate_group(g))
    offsets = {group: src.group_offsets(group) for group in groups}
    if reverse is not None:  # positions and both indexes, read in the order both_ways needs
        tps = sorted({tp for committed in offsets.values() for tp in committed})
        both = BothWays.read(flow, reverse[0], syncs, reverse[1], src, dst, tps)
        index, translate = both.forward, both.translate
    else:
        index = syncs.refresh()
        translate = index.translate
    evicted = evict_gone(index, src)
    # a topic re-created on the source and not yet taken up has only the old topic's syncs
    held = untaken(flow, src, dst, {t for committed in offsets.values() for t, _ in committed})
    for name in sorted(held):
        log.warning(REASON, flow=flow.name, topic=name)
    previous = dict(checkpoints.refresh())
    router = timestamp_router_of(flow.raw)
    emitted: list[Checkpoint] = []
    for group in groups:
        for (upstream_topic, partition), upstream in sorted(offsets[group].items()):
            if upstream_topic in held or not policy.should_replicate_topic(
                    upstream_topic, flow.target.alias, topic_filter, flow.selection.heartbeats_replication_enabled):
                continue
            remote = policy.format_remote_topic(flow.source.alias, upstream_topic)
            if router is not None and router.routes(remote):
                continue  # records in window topics: no single remote offset to checkpoint (time_routing)
            downstream = translate(upstream_topic, partition, upstream)
            if downstream is None:
                if upstream != 0:
                    continue  # nothing of this partition mirrored yet
                downstream = 0  # a group at the very start resumes at the very start
            prev = previous.get((group, remote, partition))
            if prev is not None:
                if (prev.upstream_offset, prev.downstream_offset) == (upstream, downstream):
                    continue
                if downstream < prev.downstream_offset and upstream >= prev.upstream_offset:
                    continue  # translation may lag the store; never move a checkpoint back
            emitted.append(Checkpoint(group, remote, partition, upstream, downstream, ""))
    if emitted:
        # kept across passes: a new idempotent producer waits for its id (PositionStore.open)
        writer = kept_writer(flow.target, flow.admin_timeout_ms / 1000)
        writer.write(topic, ((cp.key_bytes(), cp.value_bytes()) for cp in emitted))
        checkpoints.add(emitted)
    synced: list[str] = []
    if flow.checkpoints.sync_group_offsets_enabled and (sync_offsets is None or sync_offsets):
        latest = {**previous, **{(c.consumer_group_id, c.topic, c.partition): c for c in emitted}}
        synced = sync_group_offsets(dst, latest)
    read = syncs.records_read + checkpoints.tail.records_read - read_before
    return CheckpointReport(len(groups), tuple(emitted), tuple(synced), read, evicted)


def ensure_checkpoints_topic(flow: FlowConfig, dst: Admin | None = None) -> str:
    """Create ``{source}.checkpoints.internal`` on the target as MM2 creates it (compacted, one
    partition) unless it exists; returns its name.

    Every pass calls it before writing, and the driver before any flow starts
    (``mm2py.engine.prepare``): both through this one definition. ``dst``: an admin of the target.
    """
    topic = policy_for(flow).checkpoints_topic(flow.source.alias)
    ensure_compacted_topic(dst or Admin(flow.target, timeout_ms=flow.admin_timeout_ms), topic,
                           flow.checkpoints.checkpoints_topic_replication_factor)
    return topic


def evict_gone(index: SyncIndex, src: Admin) -> int:
    """Drop from ``index`` the syncs of records retention removed from the source (one ListOffsets).

    A kept index otherwise grows with every run start for as long as the worker lives, while
    the history topic itself forgets them by retention.
    """
    topics = src.topics()
    tps = [tp for tp in index.partitions() if tp[0] in topics and tp[1] < topics[tp[0]]]
    try:
        starts = src.list_offsets(tps, "earliest")
    except KafkaError as e:  # only memory is at stake: try again next pass
        log.info("could not list the source's log starts; syncs kept for now", error=str(e))
        return 0
    return index.trim(starts)


def sync_group_offsets(dst: Admin, checkpoints: dict[Key, Checkpoint]) -> list[str]:
    """Commit checkpoints to target groups that have no active member, only moving forward."""
    by_group: dict[str, dict[TP, int]] = {}
    for (group, topic, partition), cp in checkpoints.items():
        by_group.setdefault(group, {})[(topic, partition)] = cp.downstream_offset
    synced = []
    for group, wanted in sorted(by_group.items()):
        state, members = dst.group_state(group)
        if members > 0:
            log.info("group active on the target; not syncing its offsets", group=group, state=state)
            continue
        current = dst.group_offsets(group) if state != "DEAD" else {}
        forward = {tp: off for tp, off in wanted.items() if current.get(tp, -1) < off}
        if forward:
            dst.alter_group_offsets(group, forward)
            synced.append(group)
    return synced
