"""Audit rounds: every mirrored partition of each flow, source versus target, per minute bucket.

Runs in the replicator (a thread of ``mm2py.engine.metrics_server.MetricsServer``) every
``audit.interval.seconds``. Each round, per flow:

1. the positions the flow recorded on the target (what it has mirrored), read *before* the
   target, so every record counted on the source was acknowledged by the target first and a
   record is never reported missing because it was in flight;
2. the source partition counted from its log start up to that position, the remote partition
   from its log start to its end, reading only what was appended since the last round;
3. bucket by bucket, missing and duplicate records (``mm2py.audit.buckets.compare``); on a topic
   the flow transforms, the source is counted as the chain leaves it, and what it drops is
   reported as dropped, never missing (``mm2py.audit.scanner``).

Duplicates are reported only when two rounds in a row see them (records copied but not yet
recorded in the positions look like duplicates for one round). Compacted topics are not
audited: compaction removes different records on each side at different times. Nor are topics
a TimestampRouter routes (``mm2py.source.copy.time_routing``): their records are spread over
window topics, so the remote partition holds none of them (logged once per topic).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import structlog

from mm2py.audit.buckets import AuditFinding, compare
from mm2py.audit.scanner import PartitionCounts, scan
from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.flow_policy import policy_for
from mm2py.kafka.admin import Admin
from mm2py.kafka.wire import RawClient
from mm2py.stores.positions import PositionStore
from mm2py.transforms import Chain, LinkFailed, flow_chain
from mm2py.transforms.timestamp_router import timestamp_router_of
from mm2py.transforms.tolerance import error_policy
from mm2py.types import TP

log = structlog.get_logger(__name__)

CONFIG_REFRESH_SECONDS = 600.0


@dataclass
class FlowAudit:
    """What one flow's audit keeps between rounds."""

    flow: FlowConfig
    source: dict[TP, PartitionCounts] = field(default_factory=dict)
    target: dict[TP, PartitionCounts] = field(default_factory=dict)
    last: dict[TP, AuditFinding] = field(default_factory=dict)
    logged: dict[TP, int] = field(default_factory=dict)  # (remote topic, partition) -> missing last round
    compacted: set[str] = field(default_factory=set)
    retention_ms: dict[str, int] = field(default_factory=dict)  # remote topic -> retention.ms (-1: none)
    known: set[str] = field(default_factory=set)  # source topics the configs above cover
    configs_at: float = -CONFIG_REFRESH_SECONDS
    chains: dict[str, Chain | None] = field(default_factory=dict)  # remote topic -> its links (None: none)
    time_routed: set[str] = field(default_factory=set)  # source topics a TimestampRouter routes: not audited

    def chain(self, remote_topic: str) -> Chain | None:
        """The flow's transform links that may touch ``remote_topic`` (None: it is copied as it is)."""
        if remote_topic not in self.chains:
            links = flow_chain(self.flow).for_topic(remote_topic)
            self.chains[remote_topic] = links if links.links else None
        return self.chains[remote_topic]


def _config(entries: Iterable[object], name: str) -> str | None:
    return next((e.value for e in entries if e.name == name), None)  # type: ignore[attr-defined]


class Auditor:
    """Audit rounds over ``flows``; results go to a callback (``Metrics.observe_audit``)."""

    def __init__(self, flows: Iterable[FlowConfig], *, wall: Callable[[], float] = time.time):
        self.audits = [FlowAudit(f) for f in flows if f.enabled]
        self.wall = wall

    def round(self, report: Callable[[str, list[AuditFinding]], None]) -> None:
        for audit in self.audits:
            try:
                findings = self.audit_flow(audit)
            except (KafkaError, LinkFailed) as e:  # a transform failing fails the flow too, which names it
                log.warning("audit round failed; tried again next round", flow=audit.flow.name, error=str(e))
                continue
            report(audit.flow.name, findings)
            for f in findings:
                if f.missing > audit.logged.get((f.topic, f.partition), 0):
                    log.error("audit: records on the source are missing on the target (logged when the count grows)",
                              flow=audit.flow.name, topic=f.topic, partition=f.partition, missing=f.missing,
                              buckets=[(time.strftime("%Y-%m-%dT%H:%M", time.gmtime(b / 1000)), s, t)
                                       for b, s, t in f.differing[:5]])
            audit.logged = {(f.topic, f.partition): f.missing for f in findings}

    def audit_flow(self, audit: FlowAudit) -> list[AuditFinding]:
        flow = audit.flow
        policy = policy_for(flow)
        timeout = flow.admin_timeout_ms
        positions = PositionStore(flow.target, flow.source.alias, timeout_ms=timeout).load()
        if not positions:
            return []
        remote = {t: policy.format_remote_topic(flow.source.alias, t) for t, _ in positions}
        self._refresh_configs(audit, remote)
        self._leave_out_time_routed(audit, remote)
        src = RawClient(flow.source, client_id=f"mm2py-audit-{flow.name}", timeout_ms=timeout)
        dst = RawClient(flow.target, client_id=f"mm2py-audit-{flow.name}", timeout_ms=timeout)
        try:
            topics = sorted(t for t in remote if t not in audit.compacted and t not in audit.time_routed)
            # a topic deleted since its position was saved is not audited (missing_ok)
            src_leaders = src.leaders(topics, missing_ok=True)
            dst_leaders = dst.leaders((remote[t] for t in topics), missing_ok=True)
            now_ms = int(self.wall() * 1000)
            findings = []
            for (topic, partition), last in sorted(positions.items()):
                if topic in audit.compacted or topic in audit.time_routed or (topic, partition) not in src_leaders:
                    continue
                rtp = (remote[topic], partition)
                if rtp not in dst_leaders:
                    continue
                s = audit.source.setdefault((topic, partition), PartitionCounts())
                t = audit.target.setdefault(rtp, PartitionCounts())
                s_node, t_node = src_leaders[(topic, partition)], dst_leaders[rtp]
                done = scan(src, s_node, (topic, partition), s, src.log_start_offset(s_node, (topic, partition)),
                            last + 1, chain=audit.chain(remote[topic]), remote_topic=remote[topic],
                            tolerate=error_policy(flow.raw).tolerate)
                done = scan(dst, t_node, rtp, t, dst.log_start_offset(t_node, rtp), lambda lso: lso) and done
                if not done:
                    continue  # a long log is still being counted: compare once both sides are
                retention = audit.retention_ms.get(remote[topic], -1)
                finding = compare(flow.name, remote[topic], partition, s.counts, t.counts,
                                  oldest_source_bucket=s.oldest, newest_source_bucket=s.newest,
                                  retention_floor_ms=now_ms - retention if retention >= 0 else None,
                                  dropped=s.dropped, failed=s.failed)
                before = audit.last.get((topic, partition))
                audit.last[(topic, partition)] = finding
                findings.append(replace(finding, duplicates=min(finding.duplicates,
                                                                before.duplicates if before else 0)))
            return findings
        finally:
            src.close()
            dst.close()

    @staticmethod
    def _leave_out_time_routed(audit: FlowAudit, remote: dict[str, str]) -> None:
        """Topics a TimestampRouter spreads over window topics are not audited: logged once each, by name."""
        router = timestamp_router_of(audit.flow.raw)
        if router is None:
            return
        for topic in sorted(t for t, r in remote.items() if t not in audit.time_routed and router.routes(r)):
            log.info("audit: a topic a TimestampRouter routes is not audited (its records are spread over window "
                     "topics)", flow=audit.flow.name, topic=topic, transform=router.name,
                     windows=router.pattern(remote[topic]))
            audit.time_routed.add(topic)

    def _refresh_configs(self, audit: FlowAudit, remote: dict[str, str]) -> None:
        """Which source topics are compacted, and the remote topics' retention.ms (every 10 minutes)."""
        if time.monotonic() - audit.configs_at < CONFIG_REFRESH_SECONDS and set(remote) <= set(audit.known):
            return
        flow = audit.flow
        src = _existing_configs(Admin(flow.source, timeout_ms=flow.admin_timeout_ms), remote)
        dst = _existing_configs(Admin(flow.target, timeout_ms=flow.admin_timeout_ms), remote.values())
        audit.compacted = {t for t, entries in src.items() if "compact" in (_config(entries, "cleanup.policy") or "")}
        audit.retention_ms = {t: int(_config(entries, "retention.ms") or -1) for t, entries in dst.items()}
        audit.known = set(remote)
        audit.configs_at = time.monotonic()


def _existing_configs(admin: Admin, topics: Iterable[str]) -> dict[str, list]:
    """Configs of ``topics``; a topic deleted since it was listed is left out, not a failed round."""
    topics = list(topics)
    try:
        return admin.topic_configs(topics)
    except KafkaError as e:
        if not e.topic:
            raise
    out: dict[str, list] = {}
    for topic in topics:  # one by one, to leave out those that are gone
        try:
            out.update(admin.topic_configs([topic]))
        except KafkaError as e:
            if e.topic != topic or "UNKNOWN_TOPIC" not in str(e):
                raise
    return out
