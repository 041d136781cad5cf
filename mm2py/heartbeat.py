"""The heartbeat connector's core: one MM2 Heartbeat record into ``heartbeats`` on the target."""

from __future__ import annotations

import time

from mm2py.config.model import FlowConfig
from mm2py.formats import Heartbeat
from mm2py.kafka.admin import Admin
from mm2py.kafka.internal_topics import RecordWriter, ensure_compacted_topic
from mm2py.source.planner import flow_policy


def emit_heartbeat(flow: FlowConfig, now_ms: int | None = None) -> Heartbeat:
    """Write a heartbeat for ``flow`` (source->target) to the target; its timestamp is the record's."""
    topic = flow_policy(flow).heartbeats_topic()
    ensure_compacted_topic(Admin(flow.target, timeout_ms=flow.admin_timeout_ms), topic,
                           flow.heartbeats_topic_replication_factor)
    beat = Heartbeat(flow.source.alias, flow.target.alias, now_ms if now_ms is not None else int(time.time() * 1000))
    writer = RecordWriter(flow.target, flow.admin_timeout_ms / 1000)
    writer.write(topic, [(beat.key_bytes(), beat.value_bytes())], timestamp=beat.timestamp)
    return beat
