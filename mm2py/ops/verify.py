"""``mm2py verify``: source against target, per partition, over the range the flow mirrored.

For each mirrored partition the source range is ``[log start, next offset to mirror)`` (from
the flow's recorded positions) and the target range is where offset syncs put those two
offsets (the remote partition's own start and end where no sync covers them). Both ranges
are read in offset order and folded into a record count and a SHA-256 over key, value,
headers and timestamp (mm2py.ops.digest). Partitions are audited in parallel as Spark tasks, so
a large topic takes as long as its largest partition.

On a topic the flow transforms (``transforms``), the source side is what the target should hold:
the chain is replayed over each source record under its remote topic name, as the copy ran it
(transforms are pure functions of the record; a batch transform gets the records of one poll of a
partition as its batch, which gives what the copy's source batches gave because a batch transform
is row-wise, ``mm2py.transforms.BatchTransform``), and a record the chain drops, or fails on under
``errors.tolerance = all`` (left out of the remote topic as the copy left it out), is counted
dropped, never compared; under ``none`` a transform that fails on a record fails the check naming it.

A ``schemas.mode = translate`` flow's target names its registry's ids, so its records compare by
value (``--decode``: each side decoded with its own registry; without it they differ byte for
byte, transformed or not). A decoded transform (``mm2py.transforms.decoded``) is replayed as the
copy ran it, values written back under the source's ids, which ``--decode`` reads with the source
registry: what the chain made compares equal to what the target holds under the target's ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from mm2py.checkpoint.task import load_syncs
from mm2py.config.filters import topic_filter_for
from mm2py.config.model import FlowConfig
from mm2py.errors import ConfigError, ConfigProblem, TransformFailedError
from mm2py.flow_policy import policy_for
from mm2py.kafka.admin import Admin
from mm2py.ops.digest import PartitionCheck, Replay, digest_ranges
from mm2py.schemas.check import require_registries
from mm2py.schemas.decode import RecordDecoder
from mm2py.stores.positions import PositionStore
from mm2py.transforms import Chain, LinkFailed, Record, flow_chain
from mm2py.transforms.timestamp_router import timestamp_router_of
from mm2py.transforms.tolerance import error_policy


@dataclass(frozen=True)
class AuditRange:
    """One partition to audit: small and picklable, one Spark task."""

    flow: FlowConfig
    topic: str
    partition: int
    remote_topic: str
    source: tuple[int, int]
    target: tuple[int, int]
    decode: bool = False  # compare Avro records by value, each side read with its own registry


@dataclass(frozen=True)
class AuditResult:
    flow: str
    check: PartitionCheck
    source: tuple[int, int]
    target: tuple[int, int]


def plan_audit(flow: FlowConfig, topics: str | None = None, decode: bool = False) -> list[AuditRange]:
    """Ranges of every partition ``flow`` has mirrored (of topics matching ``topics``, if given).

    ``decode``: compare by decoded value (both clusters need ``{alias}.schema.registry.url``).
    """
    try:
        wanted = re.compile(topics) if topics else None
    except re.error as e:
        raise ConfigError(ConfigProblem("--topics", f"not a regular expression: {e}")) from None
    policy = policy_for(flow)
    filt = topic_filter_for(flow)
    src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
    dst = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
    positions = PositionStore(flow.target, flow.source.alias, timeout_ms=flow.admin_timeout_ms).load()
    mirrored = sorted(tp for tp in positions if (wanted is None or wanted.fullmatch(tp[0]))
                      and policy.should_replicate_topic(tp[0], flow.target.alias, filt,
                                                        flow.selection.heartbeats_replication_enabled))
    if not mirrored:
        return []
    _refuse_time_routed(flow, {t for t, _ in mirrored})
    if decode:
        require_registries(flow)
    target_topics = dst.topics()
    remote = {t: policy.format_remote_topic(flow.source.alias, t) for t, _ in mirrored}
    on_target = [(remote[t], p) for t, p in mirrored if remote[t] in target_topics]
    src_start = src.list_offsets(mirrored, "earliest")
    dst_start, dst_end = dst.list_offsets(on_target, "earliest"), dst.list_offsets(on_target, "latest")
    syncs = load_syncs(flow)
    out = []
    for topic, p in mirrored:
        begin, end = src_start[(topic, p)], positions[(topic, p)] + 1
        rt = (remote[topic], p)
        if rt not in dst_start:  # the remote partition is gone: everything is missing there
            out.append(AuditRange(flow, topic, p, remote[topic], (begin, end), (0, 0), decode))
            continue
        down_begin = syncs.translate(topic, p, begin) if begin > 0 else None
        down_end = syncs.translate(topic, p, end)
        out.append(AuditRange(flow, topic, p, remote[topic], (max(begin, 0), end),
                              (down_begin if down_begin is not None else dst_start[rt],
                               min(down_end, dst_end[rt]) if down_end is not None else dst_end[rt]), decode))
    return out


def _refuse_time_routed(flow: FlowConfig, topics: set[str]) -> None:
    """Refuse, naming them, topics a TimestampRouter spreads over window topics: verify compares a remote partition."""
    router = timestamp_router_of(flow.raw)
    policy = policy_for(flow)
    routed = sorted(t for t in topics if router is not None
                    and router.routes(policy.format_remote_topic(flow.source.alias, t)))
    if router is not None and routed:
        raise ConfigError(ConfigProblem("--topics", f"flow {flow.name}: TimestampRouter {router.name!r} sends the "
                                        f"records of {', '.join(routed)} to window topics ({router.topic_format}), "
                                        "which verify does not compare; leave them out with --topics"))


def _replayed(chain: Chain, tolerate: bool, r: AuditRange, records: Sequence[Record]) -> list[Record | None]:
    try:
        return [out for out, _ in chain.replay_all(r.remote_topic, records, tolerate)]
    except LinkFailed as e:
        reason = " ".join(e.reason.split())
        raise TransformFailedError(
            f"flow {r.flow.name}: transform {e.link!r} ({e.path}) {reason} on the record at topic {r.topic} "
            f"partition {r.partition} offset {e.offset} (remote topic {r.remote_topic}), replayed by verify"
        ) from e.__cause__


def replay_for(r: AuditRange) -> Replay | None:
    """The flow's transform chain over ``r``'s source records, as the copy ran it (None: no link touches it)."""
    chain = flow_chain(r.flow).for_topic(r.remote_topic)
    return partial(_replayed, chain, error_policy(r.flow.raw).tolerate, r) if chain.links else None


def audit_one(r: AuditRange) -> AuditResult:
    """Digest both sides of one range (runs in a Spark task); the source side through the flow's transforms."""
    src_normalize = dst_normalize = None
    if r.decode:
        src_normalize = RecordDecoder(r.flow.source.alias, r.flow.source.schema_registry).record
        dst_normalize = RecordDecoder(r.flow.target.alias, r.flow.target.schema_registry).record
    src = digest_ranges(r.flow.source, r.topic, {r.partition: r.source}, normalize=src_normalize,
                        replay=replay_for(r))[r.partition]
    dst = digest_ranges(r.flow.target, r.remote_topic, {r.partition: r.target}, normalize=dst_normalize)[r.partition]
    return AuditResult(r.flow.name, PartitionCheck(r.topic, r.partition, src, dst), r.source, r.target)


def run_audit(spark, ranges: list[AuditRange]) -> list[AuditResult]:  # a SparkSession
    """Audit ``ranges`` as Spark tasks, one per partition, results in flow/topic/partition order."""
    if not ranges:
        return []
    results = spark.sparkContext.parallelize(ranges, len(ranges)).map(audit_one).collect()
    return sorted(results, key=lambda a: (a.flow, a.check.topic, a.check.partition))


def render(results: list[AuditResult]) -> str:
    lines = [f"{'flow':<12} {'topic':<32} {'part':>4} {'source range':>21} {'target range':>21} "
             f"{'src count':>10} {'tgt count':>10} {'dropped':>8}  result"]
    for a in results:
        c = a.check
        verdict = "ok" if c.ok else ("MISSING" if c.target.count < c.source.count else
                                     "EXTRA" if c.target.count > c.source.count else "DIFFERENT")
        lines.append(f"{a.flow:<12} {c.topic:<32} {c.partition:>4} {f'[{a.source[0]}, {a.source[1]})':>21} "
                     f"{f'[{a.target[0]}, {a.target[1]})':>21} {c.source.count:>10,} {c.target.count:>10,} "
                     f"{c.source.dropped:>8,}  {verdict}")
    bad = sum(not a.check.ok for a in results)
    dropped = sum(a.check.source.dropped for a in results)
    lines.append(f"{len(results)} partitions audited, {bad} with differences"
                 + (f"; {dropped:,} source records dropped by the flow's transforms (not compared)" if dropped else ""))
    return "\n".join(lines)
