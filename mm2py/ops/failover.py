"""Moving a consumer group between clusters: the plan, and applying it.

Failover ``A -> B`` places the group on the remote topics of B at the translated offsets.
While A still answers, its live committed offsets are translated with the offset syncs
(exact and current; for identity active/active, with the syncs of both flows:
``mm2py.checkpoint.both_ways``); when A is down, the last checkpoints on B are used; ``to_time`` falls
back to the first offsets at or after a timestamp for partitions with neither. Failback
``B -> A`` maps the group's offsets on B's remote topics back to A's topics (inverse syncs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import structlog

from mm2py.checkpoint.both_ways import BothWays
from mm2py.checkpoint.generations import untaken
from mm2py.checkpoint.state import sync_log_for
from mm2py.checkpoint.task import load_syncs
from mm2py.client import MirrorClient
from mm2py.config.filters import topic_filter_for
from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.errors import ConfigError, ConfigProblem, KafkaError, Mm2pyError
from mm2py.flow_policy import policy_for
from mm2py.flowspec import FlowSpec
from mm2py.kafka.admin import Admin
from mm2py.ops.refusals import Standing, diverged
from mm2py.source.plan.listing import SourceListing
from mm2py.source.plan.resets import Reset
from mm2py.stores.positions import PositionStore
from mm2py.transforms.timestamp_router import timestamp_router_of
from mm2py.types import TP

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PartitionPlan:
    source_topic: str
    target_topic: str
    partition: int
    source_offset: int | None  # the group's committed offset on the cluster it leaves
    target_offset: int | None  # where it will resume
    how: str  # "syncs" | "checkpoint" | "timestamp" | "inverse syncs" | "none"
    not_mirrored: int | None  # source records past the mirrored position


@dataclass(frozen=True)
class Plan:
    group: str
    from_alias: str
    to_alias: str
    partitions: tuple[PartitionPlan, ...]

    @property
    def offsets(self) -> dict[TP, int]:
        return {(p.target_topic, p.partition): p.target_offset for p in self.partitions if p.target_offset is not None}


def find_flow(config: MirrorMakerConfig, source: str, target: str) -> FlowConfig:
    for flow in config.flows:
        if (flow.source.alias, flow.target.alias) == (source, target):
            return flow
    raise ConfigError(ConfigProblem(f"{source}->{target}.enabled", f"the file has no flow {source}->{target}"))


def plan_failover(config: MirrorMakerConfig, group: str, from_alias: str, to_alias: str,
                  to_time_ms: int | None = None) -> Plan:
    flow = find_flow(config, from_alias, to_alias)
    spec = FlowSpec.resolve(config, flow)
    policy = spec.policy
    src = Admin(flow.source, timeout_ms=min(flow.admin_timeout_ms, 15000))
    try:
        committed: dict[TP, int] | None = src.group_offsets(group)
    except KafkaError as e:
        log.warning("source cluster unavailable; planning from checkpoints", cluster=from_alias, error=str(e))
        committed = None
    if committed is not None:
        refuse_time_routed(flow, [policy.format_remote_topic(from_alias, t) for t, _ in committed])
        rows = translate_committed(config, spec, src, committed)
    else:
        checkpoints = MirrorClient.for_cluster(config, to_alias).remote_consumer_offsets(group, from_alias)
        rows = [PartitionPlan(policy.upstream_topic(remote) or remote, remote, partition, None, target,
                              "checkpoint", None)
                for (remote, partition), target in sorted(checkpoints.items())]
    if to_time_ms is not None:
        rows = place_by_time(config, spec, rows, to_time_ms, every_remote=not rows)
    refuse_time_routed(flow, [r.target_topic for r in rows])
    return Plan(group, from_alias, to_alias, tuple(rows))


def plan_offsets(config: MirrorMakerConfig, committed: dict[TP, int], from_alias: str, to_alias: str,
                 to_time_ms: int | None = None, label: str = "offsets") -> Plan:
    """The plan for offsets a consumer keeps itself (not in a group): same translation as a group."""
    flow = find_flow(config, from_alias, to_alias)
    spec = FlowSpec.resolve(config, flow)
    src = Admin(flow.source, timeout_ms=min(flow.admin_timeout_ms, 15000))
    rows = translate_committed(config, spec, src, committed)
    if to_time_ms is not None:
        rows = place_by_time(config, spec, rows, to_time_ms, every_remote=False)
    refuse_time_routed(flow, [r.target_topic for r in rows])
    return Plan(label, from_alias, to_alias, tuple(rows))


def translate_committed(config: MirrorMakerConfig, spec: FlowSpec, src: Admin,
                        committed: dict[TP, int]) -> list[PartitionPlan]:
    """One row per committed ``(topic, partition)`` of the source, translated through the offset syncs."""
    flow, policy = spec.flow, spec.policy
    from_alias, to_alias = flow.source.alias, flow.target.alias
    try:
        ends = src.list_offsets(list(committed), "latest") if committed else {}
    except KafkaError as e:
        log.warning("source cluster unavailable; translating with the syncs on the target", error=str(e))
        ends = {}
    reverse = spec.reverse
    if reverse is None and spec.provenance:
        raise Mm2pyError(f"{flow.name} is on a cycle of flows that keep topic names but the file has no flow "
                         f"{to_alias}->{from_alias}: where {to_alias}'s own records sit on {from_alias} is not known "
                         "(they came round through other clusters); place the group with --to-time")
    positions, epochs = PositionStore(flow.target, from_alias, timeout_ms=flow.admin_timeout_ms).load_with_epochs()
    split: dict[TP, Reset] = {}
    if ends:
        listing = SourceListing(flow)
        try:
            split = diverged(listing, positions, epochs, sorted(committed))
        finally:
            listing.close()
    if reverse is not None:  # identity active/active: the consumer read records of both clusters
        dst = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
        both = BothWays.read(flow, reverse, sync_log_for(flow), sync_log_for(reverse), src, dst,
                             sorted(committed))
        translate, how_found = both.translate, "syncs both ways"
    else:
        translate, how_found = load_syncs(flow).translate, "syncs"
    held = untaken(flow, src, Admin(flow.target, timeout_ms=flow.admin_timeout_ms), {t for t, _ in committed})
    standing = Standing(positions, ends, split, frozenset(held))
    return plan_rows(committed, standing, lambda t: policy.format_remote_topic(from_alias, t), translate, how_found)


def plan_rows(committed: Mapping[TP, int], standing: Standing, remote_topic: Callable[[str], str],
              translate: Callable[[str, int, int], int | None], how_found: str) -> list[PartitionPlan]:
    """One row per committed ``(topic, partition)``: translated, or refused with the reason (``Standing``).

    A refused partition gets no offset (``apply_plan`` then names it); offset 0 of one that is not
    refused needs no sync: it starts the remote partition too.
    """
    rows: list[PartitionPlan] = []
    for (topic, partition), offset in sorted(committed.items()):
        refused = standing.refusal(topic, partition, offset)
        target = None if refused else translate(topic, partition, offset)
        how = f"refused: {refused}" if refused else how_found
        if target is None and offset == 0 and not refused:
            target, how = 0, "start"
        mirrored = standing.positions.get((topic, partition))
        behind = (None if mirrored is None or not standing.ends
                  else max(0, standing.ends.get((topic, partition), 0) - (mirrored + 1)))
        rows.append(PartitionPlan(topic, remote_topic(topic), partition, offset, target,
                                  how if target is not None or refused else "none", behind))
    return rows


def place_by_time(config: MirrorMakerConfig, spec: FlowSpec, rows: list[PartitionPlan], to_time_ms: int,
                  every_remote: bool) -> list[PartitionPlan]:
    """Rows without a translated offset take the first target offset at/after ``to_time_ms``."""
    flow, policy = spec.flow, spec.policy
    from_alias, to_alias = flow.source.alias, flow.target.alias
    dst = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
    missing = [(r.target_topic, r.partition) for r in rows if r.target_offset is None]
    if every_remote:  # no checkpoints at all: every partition of the remote topics
        topics = dst.topics()
        mirrored = topic_filter_for(flow)
        missing = [(t, p) for t in MirrorClient.for_cluster(config, to_alias).remote_topics(from_alias)
                   if mirrored.should_replicate_topic(policy.upstream_topic(t) or t) for p in range(topics[t])]
        rows = [PartitionPlan(policy.upstream_topic(t) or t, t, p, None, None, "none", None) for t, p in missing]
    by_time = dst.offsets_for_time(missing, to_time_ms)
    return [r if r.target_offset is not None else
            PartitionPlan(r.source_topic, r.target_topic, r.partition, r.source_offset,
                          by_time.get((r.target_topic, r.partition)), "timestamp", r.not_mirrored)
            for r in rows]


def plan_failback(config: MirrorMakerConfig, group: str, from_alias: str, to_alias: str) -> Plan:
    """The group consumed ``{to}.topic`` on ``from``; place it on ``topic`` of ``to`` again."""
    flow = find_flow(config, to_alias, from_alias)  # the flow that fed the cluster being left
    committed = Admin(flow.target, timeout_ms=flow.admin_timeout_ms).group_offsets(group)
    refuse_time_routed(flow, [topic for topic, _ in committed], windows=True)
    return Plan(group, from_alias, to_alias, tuple(inverse_committed(flow, committed)))


def inverse_committed(flow: FlowConfig, committed: dict[TP, int]) -> list[PartitionPlan]:
    """Offsets on ``flow``'s remote topics mapped back to its source topics (inverse syncs).

    A remote topic is known by the name the flow gives each source topic it has syncs for (its
    policy and routers: ``policy_for``), so a routed name that lost the source alias maps back too.
    """
    policy = policy_for(flow)
    index = load_syncs(flow)
    synced = sorted({topic for topic, _ in index.partitions()})
    upstream_of = {policy.format_remote_topic(flow.source.alias, topic): topic for topic in synced}
    rows = []
    for (remote, partition), offset in sorted(committed.items()):
        upstream_topic = upstream_of.get(remote)
        if upstream_topic is None:
            continue
        upstream = index.inverse(upstream_topic, partition, offset)
        rows.append(PartitionPlan(remote, upstream_topic, partition, offset, upstream,
                                  "inverse syncs" if upstream is not None else "none", None))
    return rows


def refuse_time_routed(flow: FlowConfig, topics: Iterable[str], *, windows: bool = False) -> None:
    """Refuse to place a group on (or, ``windows``, back from) topics ``flow``'s TimestampRouter routes.

    Their records went to window topics through no produce window: a source offset has no single
    remote offset, so there are no offset syncs and no checkpoints to translate with. ``topics``:
    remote topics of ``flow`` (failover), or the target's topics a group committed on (failback,
    ``windows``: the window topics are the ones refused). Raises ``Mm2pyError`` naming each topic.
    """
    router = timestamp_router_of(flow.raw)
    if router is None:
        return
    window_of = router.windows_of()
    found = sorted({t for t in topics if (window_of(t) is not None if windows else router.routes(t))})
    if found:
        raise Mm2pyError(f"flow {flow.name}: TimestampRouter {router.name!r} (transforms.{router.name}.type) sends "
                         f"the records of {', '.join(found)} to window topics ({router.topic_format}): a source "
                         "offset has no single remote offset there, so there are no offset syncs or checkpoints "
                         "to place a group with; move consumers of window topics by time on the target")


def apply_plan(config: MirrorMakerConfig, plan: Plan) -> None:
    admin = Admin(config.clusters[plan.to_alias])
    state, members = admin.group_state(plan.group)
    if members:
        raise Mm2pyError(f"group {plan.group} has {members} active member(s) on {plan.to_alias} (state {state}); "
                         "stop its consumers there first")
    missing = [f"{p.target_topic}-{p.partition}" + (f" ({p.how})" if p.how.startswith("refused") else "")
               for p in plan.partitions if p.target_offset is None]
    if missing:
        raise Mm2pyError(f"no translated offset for {', '.join(missing)}; use --to-time to place them by time")
    admin.alter_group_offsets(plan.group, plan.offsets)


def render(plan: Plan) -> str:
    head = (f"{'source topic':<28} {'target topic':<30} {'part':>4} {'committed':>10} {'resume at':>10} "
            f"{'not mirrored':>12}  how")
    lines = [f"group {plan.group}: {plan.from_alias} -> {plan.to_alias}", head]
    for p in plan.partitions:
        def show(v: int | None) -> str:
            return "-" if v is None else str(v)
        lines.append(f"{p.source_topic:<28} {p.target_topic:<30} {p.partition:>4} {show(p.source_offset):>10} "
                     f"{show(p.target_offset):>10} {show(p.not_mirrored):>12}  {p.how}")
    if not plan.partitions:
        lines.append("(the group has no committed offsets to move)")
    return "\n".join(lines)
