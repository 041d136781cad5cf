"""What a checkpoint pass reads, kept between passes: the offset syncs and the checkpoints so far.

Both are read incrementally (``TopicTail``): a pass reads what was appended since the last one,
so its cost grows with new syncs and checkpoints, not with history.

Invariants of ``SyncLog``:
- the history (``mm2py.source.sync_history``) is applied first, then MM2's syncs topic: the
  history holds the run starts among mm2py's syncs, the syncs topic all of them in the same
  order (or, compacted, the newest of each partition and what the cleaner has not reached
  yet), so replaying it after the history changes no translation of mm2py's runs, and
  applies syncs only MM2 wrote (MM2 running the flow before or after mm2py) in their order;
- compaction of the syncs topic removes no run start: those are in the history;
- a topic that went back (deleted and created again) makes the log start over from offset 0
  of both topics, so the index never mixes two incarnations.
"""

from __future__ import annotations

import structlog

from mm2py.checkpoint.translation import SyncIndex
from mm2py.config.model import FlowConfig
from mm2py.errors import FormatError
from mm2py.flow_policy import offset_syncs_history_location, offset_syncs_location, policy_for
from mm2py.formats import Checkpoint, OffsetSync
from mm2py.kafka.compacted import Entry, TopicTail
from mm2py.types import TP
from mm2py.worker import kept_state

log = structlog.get_logger(__name__)

Key = tuple[str, str, int]  # group, downstream topic, partition


class SyncLog:
    """A flow's offset syncs as a ``SyncIndex``, brought up to date by ``refresh``. No I/O at construction."""

    def __init__(self, history: TopicTail, syncs: TopicTail):
        self.history, self.syncs = history, syncs
        self.index = SyncIndex()
        self._keys: dict[bytes, TP] = {}  # each sync key read so far, decoded (one per partition)

    @property
    def records_read(self) -> int:
        return self.history.records_read + self.syncs.records_read

    def refresh(self) -> SyncIndex:
        new_history, restarted = self.history.poll()
        new_syncs, restarted_syncs = self.syncs.poll()
        if restarted or restarted_syncs:
            self.index = SyncIndex()
            if not restarted:
                self.history.next_offset = 0
                new_history, _ = self.history.poll()
            if not restarted_syncs:
                self.syncs.next_offset = 0
                new_syncs, _ = self.syncs.poll()
        self._apply(new_history, self.history.topic)
        self._apply(new_syncs, self.syncs.topic)
        return self.index

    def _apply(self, entries: list[Entry], topic: str) -> None:
        """Add ``entries`` in log order; a key seen before is not decoded again (a pass reads thousands)."""
        keys, add = self._keys, self.index.add_offsets
        for offset, key, value in entries:
            if key is None or value is None:
                continue
            tp = keys.get(key)
            offsets = OffsetSync.offsets_in(value) if tp is not None else None
            if tp is not None and offsets is not None:
                add(tp, *offsets)
                continue
            try:
                sync = OffsetSync.from_record(key, value)
            except FormatError as e:
                log.warning("skipping a malformed offset sync", topic=topic, offset=offset, error=str(e))
                continue
            keys[key] = sync.topic_partition
            add(sync.topic_partition, sync.upstream_offset, sync.downstream_offset)


def sync_log_for(flow: FlowConfig) -> SyncLog:
    timeout = flow.admin_timeout_ms / 1000
    return SyncLog(TopicTail(*offset_syncs_history_location(flow), timeout),
                   TopicTail(*offset_syncs_location(flow), timeout))


def kept_logs(flow: FlowConfig) -> tuple[SyncLog, CheckpointLog]:
    """The flow's sync and checkpoint logs kept in this Python worker, keyed by the topics they read."""
    syncs_at, history_at = offset_syncs_location(flow), offset_syncs_history_location(flow)
    checkpoints_topic = policy_for(flow).checkpoints_topic(flow.source.alias)
    return (kept_state(("syncs", syncs_at[0].bootstrap_servers, syncs_at[1], history_at[1]),
                       lambda: sync_log_for(flow)),
            kept_state(("checkpoints", flow.target.bootstrap_servers, checkpoints_topic),
                       lambda: checkpoint_log_for(flow)))


class CheckpointLog:
    """The newest checkpoint of each (group, topic, partition), brought up to date by ``refresh``."""

    def __init__(self, tail: TopicTail):
        self.tail = tail
        self.latest: dict[Key, Checkpoint] = {}

    def refresh(self) -> dict[Key, Checkpoint]:
        entries, restarted = self.tail.poll()
        if restarted:
            self.latest = {}
        for _offset, key, value in entries:
            if key is None or value is None:
                continue
            cp = Checkpoint.from_record(key, value)
            self.latest[(cp.consumer_group_id, cp.topic, cp.partition)] = cp
        return self.latest

    def add(self, written: list[Checkpoint]) -> None:
        """What this pass wrote; the next ``refresh`` reads the same records again, changing nothing."""
        for cp in written:
            self.latest[(cp.consumer_group_id, cp.topic, cp.partition)] = cp


def checkpoint_log_for(flow: FlowConfig) -> CheckpointLog:
    topic = policy_for(flow).checkpoints_topic(flow.source.alias)
    return CheckpointLog(TopicTail(flow.target, topic, flow.admin_timeout_ms / 1000))
