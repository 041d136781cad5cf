"""The shape of a whole configuration: cycles of enabled flows that a topic could loop around.

MM2 stops a record from looping with ``ReplicationPolicy.isCycle``: a remote topic's name says
which clusters it passed through. A *blind* policy (one that keeps names, as Identity) cannot
tell ``t`` from ``t`` mirrored from elsewhere, so once a record crosses a blind flow no later
flow can tell where it has been either. MM2 starts anyway and copies such records round forever.
mm2py refuses only what can loop:

- A cycle is *blind* when at least one flow on it is blind. Cycles made only of tracing flows
  (Default policy: active/active) are left to ``is_cycle``.
- A topic *loops* at a flow ``F = S->T`` when, followed once round a blind cycle through ``F``
  (each hop applying its own ``topics``/``topics.exclude``, internal-topic and ``is_cycle``
  checks to the name it sees, then renaming it as its policy does), it comes back to ``S`` under
  a name ``F`` would select again. With Identity hops only, that name is the topic itself; with a
  Default hop it has grown a prefix, which loops only if ``F``'s filter selects it too.
- Every flow carries a ``LoopGuard`` holding the blind cycles through it; at every topic refresh
  a topic for which ``LoopGuard.loop_for`` answers a cycle is not mirrored by that flow. Every
  flow of the cycle holds it back at its own source, so the loop is cut wherever it starts.
- ``check_topology`` refuses to start only a blind cycle on which every topic loops: each hop
  selects ``.*`` with the same ``topics.exclude``, and an ordinary name goes round. A cycle whose
  filters cannot select the same name (literal lists, regexes) starts; its guards decide per topic.
- Only simple cycles are followed. A name that keeps its form round a walk revisiting a cluster
  keeps it round each simple cycle the walk is made of, so the guards of those cycles stop it.
- A guard is plain data (pickled into Spark options with its flow); policies and filters are
  rebuilt from it, once per process. A hop keeps its flow's ``topic.filter.class`` (and, for a
  class of the user's, the keys it is configured with), so it selects what its flow selects.
- A cycle with a hop whose ``topic.filter.class`` is the user's is never refused at start (what
  the class selects cannot be known in advance); its guards decide per topic.
- Provenance (mm2py.source.provenance) makes blind cycles safe: a record stops before it reaches
  its origin again, whatever its name. A blind cycle whose every flow keeps
  ``provenance.enabled`` (the default) is neither guarded nor refused; each of its flows runs
  with provenance (``LoopGuard.provenance``). The rules above apply to the other blind cycles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from mm2py.config.filters import (
    DEFAULT_TOPIC_FILTER,
    TOPIC,
    TopicFilterInterface,
    filter_props,
    is_default,
    load_topic_filter,
)
from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.policy import ReplicationPolicy
from mm2py.policy_loader import load_policy

_PROBE = "mm2py-topology-probe"
MATCH_ALL = ".*"


def _is_blind(policy: ReplicationPolicy, source_alias: str) -> bool:
    remote = policy.format_remote_topic(source_alias, _PROBE)
    upstream = policy.upstream_topic(remote)
    return policy.topic_source(remote) is None or upstream is None or upstream == remote


@cache
def _policy(class_name: str, separator: str, internal_separator: bool, source_alias: str) -> ReplicationPolicy:
    # as policy_for(flow), from plain data; one policy per process and hop, never mutated
    return load_policy(class_name, separator=separator, internal_topic_separator_enabled=internal_separator,
                       source_cluster_alias=source_alias)


@cache
def _filter(class_name: str, topics: tuple[str, ...], exclude: tuple[str, ...],
            props: tuple[tuple[str, str], ...]) -> TopicFilterInterface:
    # as topic_filter_for(flow), from plain data; one filter per process and hop
    topic_keys = {"topics": ",".join(topics), "topics.exclude": ",".join(exclude)}
    return load_topic_filter(class_name, {**dict(props), **topic_keys})


@dataclass(frozen=True)
class Hop:
    """One flow as a step of a cycle: what it selects and how it renames, as plain data."""

    flow: str  # "A->B"
    source: str
    target: str
    topics: tuple[str, ...]
    topics_exclude: tuple[str, ...]
    policy_class: str
    separator: str = "."
    internal_topic_separator_enabled: bool = True
    heartbeats_replication_enabled: bool = True
    blind: bool = False
    topic_filter_class: str = DEFAULT_TOPIC_FILTER
    # the flow's keys (filter_props), only for a filter class of the user's: the default needs topics alone
    topic_filter_props: tuple[tuple[str, str], ...] = ()
    provenance: bool = True  # provenance.enabled

    @classmethod
    def of(cls, flow: FlowConfig) -> Hop:
        policy = _policy(flow.naming.replication_policy_class, flow.naming.replication_policy_separator,
                         flow.naming.internal_topic_separator_enabled, flow.source.alias)
        default_filter = is_default(TOPIC, flow.selection.topic_filter_class)
        props = () if default_filter else tuple(sorted(filter_props(flow).items()))
        naming, selection = flow.naming, flow.selection
        return cls(flow.name, flow.source.alias, flow.target.alias, tuple(selection.topics),
                   tuple(selection.topics_exclude), naming.replication_policy_class,
                   naming.replication_policy_separator, naming.internal_topic_separator_enabled,
                   selection.heartbeats_replication_enabled,
                   _is_blind(policy, flow.source.alias), selection.topic_filter_class, props,
                   flow.delivery.provenance_enabled)

    @property
    def policy(self) -> ReplicationPolicy:
        return _policy(self.policy_class, self.separator, self.internal_topic_separator_enabled, self.source)

    @property
    def topic_filter(self) -> TopicFilterInterface:
        return _filter(self.topic_filter_class, self.topics, self.topics_exclude, self.topic_filter_props)

    @property
    def default_filter(self) -> bool:
        return is_default(TOPIC, self.topic_filter_class)

    def selects(self, topic: str) -> bool:
        """Whether this flow mirrors ``topic`` of its source (MM2's shouldReplicateTopic)."""
        return self.policy.should_replicate_topic(topic, self.target, self.topic_filter,
                                                  self.heartbeats_replication_enabled)

    def rename(self, topic: str) -> str:
        """The name ``topic`` takes on this flow's target."""
        return self.policy.format_remote_topic(self.source, topic)


def _aliases(cycle: tuple[Hop, ...]) -> list[str]:
    return [cycle[0].source, *(hop.target for hop in cycle)]


@dataclass(frozen=True)
class LoopGuard:
    """The blind cycles through one flow, each a tuple of hops starting with that flow's own.

    Empty (``cycles == ()``) when no blind cycle passes through the flow: ``loop_for`` is then
    always None. Cycles are ordered shortest first, then by aliases, so answers are stable.
    Cycles made safe by provenance are not held; ``provenance`` is True when the flow is on one.
    """

    flow: str
    cycles: tuple[tuple[Hop, ...], ...] = ()
    provenance: bool = False

    def loop_for(self, topic: str) -> list[str] | None:
        """The cycle, as aliases ``["A", "B", "A"]``, that ``topic`` of this flow's source loops round; else None."""
        for cycle in self.cycles:
            first = cycle[0]
            if not first.selects(topic):
                return None  # every cycle starts with this flow: it does not mirror the topic at all
            name = topic
            for hop in cycle:
                if not hop.selects(name):
                    break
                name = hop.rename(name)
            else:
                if first.selects(name):
                    return _aliases(cycle)
        return None

    def held_back(self, topics: Iterable[str]) -> dict[str, list[str]]:
        """The topics among ``topics`` that loop, each with its cycle (``loop_for`` of each)."""
        out = {}
        for topic in topics:
            if (cycle := self.loop_for(topic)) is not None:
                out[topic] = cycle
        return out

    def describe(self, topic: str, cycle: list[str]) -> str:
        """The ERROR text for a held-back topic: names it, the cycle, its blind flows and what to set."""
        hops = next((c for c in self.cycles if _aliases(c) == cycle), ())
        blind = ", ".join(f"{h.flow} ({h.policy_class.rpartition('.')[2]})" for h in hops if h.blind)
        return (f"topic {topic!r} is not mirrored by {self.flow}: it would loop round cycle {'->'.join(cycle)}, "
                f"whose flows all select it and where {blind or 'a flow'} keeps topic names; set topics or "
                f"topics.exclude on one of these flows so they cannot select the same name")


def _guarded(cycles: tuple[tuple[Hop, ...], ...]) -> tuple[tuple[Hop, ...], ...]:
    """The cycles provenance does not make safe: some flow of each has ``provenance.enabled = false``."""
    return tuple(c for c in cycles if not all(h.provenance for h in c))


def _blind_cycles(flow: FlowConfig, flows: Iterable[FlowConfig]) -> tuple[tuple[Hop, ...], ...]:
    """Every simple cycle of ``flows`` through ``flow`` with at least one blind hop."""
    out_of: dict[str, list[Hop]] = {}
    for other in sorted(flows, key=lambda f: f.name):
        if other.name != flow.name and other.source.alias != other.target.alias:
            out_of.setdefault(other.source.alias, []).append(Hop.of(other))
    first = Hop.of(flow)
    home = first.source
    found: list[tuple[Hop, ...]] = []

    def walk(path: list[Hop], visited: set[str]) -> None:
        for hop in out_of.get(path[-1].target, ()):
            if hop.target == home:
                cycle = (*path, hop)
                if any(h.blind for h in cycle):
                    found.append(cycle)
            elif hop.target not in visited:
                visited.add(hop.target)
                path.append(hop)
                walk(path, visited)
                path.pop()
                visited.discard(hop.target)

    if first.target != home:
        walk([first], {home, first.target})
    return tuple(sorted(found, key=lambda c: (len(c), _aliases(c))))


def loop_guard(config: MirrorMakerConfig, flow: FlowConfig) -> LoopGuard:
    """The guard of ``flow`` against every blind cycle it is on, among all enabled flows.

    Every enabled flow counts, not only those this process runs (``--clusters``): processes that
    split the flows still make one loop together.
    """
    cycles = _blind_cycles(flow, config.enabled_flows)
    guarded = _guarded(cycles)
    return LoopGuard(flow.name, guarded, provenance=len(guarded) < len(cycles))


def reverse_flow(config: MirrorMakerConfig, flow: FlowConfig) -> FlowConfig | None:
    """For a flow on a provenance cycle, the enabled flow back (target->source), if the file has it.

    Its syncs tell where the target's own records sit on the source (mm2py.checkpoint.both_ways).
    """
    if not loop_guard(config, flow).provenance:
        return None
    return flow_back(config, flow)


def flow_back(config: MirrorMakerConfig, flow: FlowConfig) -> FlowConfig | None:
    """The enabled flow target->source of ``flow``, if the file has it."""
    return next((f for f in config.enabled_flows
                 if (f.source.alias, f.target.alias) == (flow.target.alias, flow.source.alias)), None)


def is_blind(flow: FlowConfig) -> bool:
    """True when the flow's policy cannot trace a remote topic back to its source cluster."""
    return Hop.of(flow).blind


def _every_topic_loops(cycle: tuple[Hop, ...]) -> bool:
    """Each hop selects ``.*`` with the same exclusions (default filters only), and an ordinary name goes round."""
    exclude = set(cycle[0].topics_exclude)
    same = all(h.default_filter and MATCH_ALL in h.topics and set(h.topics_exclude) == exclude for h in cycle)
    return same and LoopGuard(cycle[0].flow, (cycle,)).loop_for(_PROBE) is not None


def unsafe_cycle(flows: Iterable[FlowConfig]) -> tuple[list[str], FlowConfig] | None:
    """The first blind cycle every topic would loop round, as aliases ``["A", "B", "A"]``, and its blind flow.

    The cycle starts at that blind flow; flows are tried by name, cycles shortest first.
    """
    flows = sorted(flows, key=lambda f: f.name)
    for flow in flows:
        if not is_blind(flow):
            continue
        for cycle in _guarded(_blind_cycles(flow, flows)):
            if _every_topic_loops(cycle):
                return _aliases(cycle), flow
    return None


def provenance_problems(config: MirrorMakerConfig) -> list[ConfigProblem]:
    """What stops a flow on a provenance cycle from telling where its batches come from.

    Provenance rides on the producer ids of the raw-batch path: the record paths of
    ``partition.mismatch = hash`` and ``schemas.mode = translate`` write with producers of their
    own. An exactly-once transaction has one producer id, so it can stand for the flow's source
    only: no other provenance flow may write into that source.
    """
    flows = config.enabled_flows
    on = [f for f in flows if loop_guard(config, f).provenance]
    problems = []
    for flow in on:
        cycle = f"flow {flow.name} is on a cycle of flows that keep topic names"
        if flow.delivery.partition_mismatch == "hash":
            problems.append(ConfigProblem(f"{flow.name}.partition.mismatch", f"{cycle}, where records stop looping "
                                          "by the producer ids of raw batches; partition.mismatch = hash writes "
                                          "records with a producer of its own: set it to error, or set "
                                          f"{flow.name}.provenance.enabled = false", None, config.source_path))
        if flow.schemas.mode == "translate":
            problems.append(ConfigProblem(f"{flow.name}.schemas.mode", f"{cycle}, where records stop looping by "
                                          "the producer ids of raw batches; schemas.mode = translate rewrites "
                                          "records: use preserve or off on this flow", None, config.source_path))
        relays = sorted(f.source.alias for f in on if f.target.alias == flow.source.alias
                        and f.source.alias != flow.target.alias)
        if flow.delivery.exactly_once != "off" and relays:
            problems.append(ConfigProblem(flow.delivery.exactly_once_key or f"{flow.name}.exactly.once.support",
                                          f"{cycle}, and {flow.source.alias} also takes records of "
                                          f"{', '.join(relays)}: an exactly-once transaction has one producer id, "
                                          f"which can stand for {flow.source.alias} only; run {flow.name} "
                                          "at-least-once", None, config.source_path))
    return problems


def check_topology(config: MirrorMakerConfig) -> None:
    """Raise ConfigError naming a blind cycle of enabled flows that every topic would loop around.

    Other blind cycles start; ``loop_guard`` holds back, per flow and refresh, the topics that loop.
    Cycles made safe by provenance start unless ``provenance_problems`` names a flow of theirs.
    """
    problems = provenance_problems(config)
    if problems:
        raise ConfigError(problems)
    found = unsafe_cycle(config.enabled_flows)
    if found is None:
        return
    cycle, flow = found
    raise ConfigError(ConfigProblem(
        f"{flow.name}.replication.policy.class",
        f"cycle {'->'.join(cycle)}: {flow.naming.replication_policy_class} keeps topic names and every flow of the "
        f"cycle selects every topic (topics = {MATCH_ALL}), so every topic would loop around it forever (MM2 "
        f"would start anyway); set {flow.name}.topics (or topics.exclude) so the flows of the cycle cannot "
        f"select the same names, use DefaultReplicationPolicy on one of these flows, or disable one of them",
        None, config.source_path,
    ))
