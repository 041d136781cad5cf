"""The heartbeat connector's core: MM2 Heartbeat records into ``heartbeats`` on the target."""

from __future__ import annotations

import time

from mm2py.config.model import FlowConfig
from mm2py.flowspec import FlowSpec
from mm2py.formats import Heartbeat
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import RecordWriter, ensure_compacted_topic


class HeartbeatEmitter:
    """Writes one flow's heartbeats (source->target) to the target, one producer for all beats.

    A beat a second is MM2's default: making a client per beat cost more CPU than mirroring.
    The topic is made sure of on the first beat and again after a failed one, by ``ensure_topic``,
    which the driver also calls before any flow starts (``mm2py.engine.prepare``). The
    constructor does no I/O.
    """

    def __init__(self, spec: FlowSpec):
        self.flow = spec.flow
        self.topic = spec.policy.heartbeats_topic()
        self._writer: RecordWriter | None = None

    def ensure_topic(self) -> None:
        """Create the heartbeats topic on the target as MM2 creates it (compacted, one partition) unless it exists."""
        ensure_compacted_topic(Admin(self.flow.target, timeout_ms=self.flow.admin_timeout_ms), self.topic,
                               self.flow.heartbeats.heartbeats_topic_replication_factor)

    def beat(self, now_ms: int | None = None) -> Heartbeat:
        """Write a heartbeat stamped ``now_ms`` (default: now); its timestamp is the record's."""
        if self._writer is None:
            self.ensure_topic()
            self._writer = RecordWriter(self.flow.target, self.flow.admin_timeout_ms / 1000)
        beat = Heartbeat(self.flow.source.alias, self.flow.target.alias,
                         now_ms if now_ms is not None else int(time.time() * 1000))
        try:
            self._writer.write(self.topic, [(beat.key_bytes(), beat.value_bytes())], timestamp=beat.timestamp)
        except Exception:
            self.close()  # start afresh next beat: the topic may have been deleted meanwhile
            raise
        return beat

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()


def emit_heartbeat(flow: FlowConfig, now_ms: int | None = None) -> Heartbeat:
    """Write a single heartbeat for ``flow`` (tools and tests; the connector keeps an emitter)."""
    emitter = HeartbeatEmitter(FlowSpec.alone(flow))
    try:
        return emitter.beat(now_ms)
    finally:
        emitter.close()
