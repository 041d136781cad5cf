"""Offset syncs: where each mirrored source offset landed on the target.

Syncs come from the source connector's own produce acknowledgements and are written in the
same commit step, before positions move: a sync is therefore never missing for data that
counts as mirrored, which is what makes translation exact. MM2 writes them from its source
task for the same reason. Records are MM2's OffsetSync format in
``mm2-offset-syncs.{target}.internal`` on the source (``offset-syncs.topic.location=source``)
or ``mm2-offset-syncs.{source}.internal`` on the target, and the syncs that start a linear run
to the history beside it (``mm2py.source.sync_history``), which compaction does not thin out.
"""

from __future__ import annotations

from collections.abc import Sequence

from mm2py.config.model import FlowConfig
from mm2py.flow_policy import offset_syncs_history_location, offset_syncs_location
from mm2py.formats import OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import RecordWriter, ensure_compacted_topic


class OffsetSyncWriter:
    """Writes one flow's offset syncs to MM2's syncs topic, and run starts to the history (``sync_history``).

    The syncs topic is created (as MM2 creates it) before the first write, or ahead of it by
    ``ensure_topic`` (``mm2py.engine.prepare``); the history topic by ``SyncHistory.cover``, which
    the committer calls before every write. Constructor does no I/O.
    """

    def __init__(self, flow: FlowConfig):
        self.flow = flow
        self.cluster, self.topic = offset_syncs_location(flow)
        self.history_topic = offset_syncs_history_location(flow)[1]
        self._writer: RecordWriter | None = None
        self._topic_ready = False

    def ensure_topic(self) -> None:
        """Create the syncs topic as MM2 creates it (compacted, one partition) unless it exists."""
        ensure_compacted_topic(Admin(self.cluster, timeout_ms=self.flow.admin_timeout_ms), self.topic,
                               self.flow.checkpoints.offset_syncs_topic_replication_factor)
        self._topic_ready = True

    def open(self) -> RecordWriter:
        """The writer, its producer started on first call (``PositionStore.open`` says why early)."""
        if self._writer is None:
            self._writer = RecordWriter(self.cluster, self.flow.admin_timeout_ms / 1000)
        return self._writer

    def write(self, syncs: Sequence[OffsetSync], history: Sequence[OffsetSync] = ()) -> int:
        """Write ``syncs`` to the syncs topic and ``history`` (the run starts among them) to the history."""
        if not self._topic_ready:
            self.ensure_topic()
        writes = [(self.topic, [(s.key_bytes(), s.value_bytes()) for s in syncs])]
        if history:  # one wait for both topics' acknowledgements
            writes.insert(0, (self.history_topic, [(s.key_bytes(), s.value_bytes()) for s in history]))
        return self.open().write_topics(writes) - len(history)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
