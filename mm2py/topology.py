"""The shape of a whole configuration: which enabled flows form cycles a policy cannot break.

MM2 stops a record from looping with ``ReplicationPolicy.isCycle``: a remote topic's name says
which clusters it passed through. A policy that keeps names (Identity) cannot tell ``t`` from
``t`` mirrored from elsewhere, so ``A->B`` plus ``B->A`` copies every record back and forth
forever; MM2 starts anyway. mm2py refuses such a topology before running anything.

A cycle is refused when at least one flow on it uses a *blind* policy: once a record crosses
that flow its name no longer tells where it has been, so no later flow can stop it either.
Cycles made only of tracing flows (Default policy) are safe: that is active/active.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.policy import policy_for

_PROBE = "mm2py-topology-probe"


def is_blind(flow: FlowConfig) -> bool:
    """True when the flow's policy cannot trace a remote topic back to its source cluster."""
    policy = policy_for(flow)
    remote = policy.format_remote_topic(flow.source.alias, _PROBE)
    upstream = policy.upstream_topic(remote)
    return policy.topic_source(remote) is None or upstream is None or upstream == remote


def _path(graph: dict[str, list[str]], start: str, goal: str) -> list[str] | None:
    """Shortest path ``start .. goal`` (breadth first, neighbours sorted: messages are stable)."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            if node == goal:
                path = [node]
                while (before := previous[path[-1]]) is not None:
                    path.append(before)
                return path[::-1]
            for nxt in sorted(graph.get(node, ())):
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return None


def unsafe_cycle(flows: Iterable[FlowConfig]) -> tuple[list[str], FlowConfig] | None:
    """The first cycle through a blind flow, as aliases ``["A", "B", "A"]``, and that flow."""
    flows = sorted(flows, key=lambda f: f.name)
    graph: dict[str, list[str]] = {}
    for flow in flows:
        graph.setdefault(flow.source.alias, []).append(flow.target.alias)
    for flow in flows:
        back = _path(graph, flow.target.alias, flow.source.alias)
        if back is not None and is_blind(flow):
            return [flow.source.alias, *back], flow
    return None


def check_topology(config: MirrorMakerConfig) -> None:
    """Raise ConfigError naming a cycle of enabled flows that records would loop around.

    Every enabled flow counts, not only those this process runs (``--clusters``): processes
    that split the flows still make one loop together.
    """
    found = unsafe_cycle(config.enabled_flows)
    if found is None:
        return
    cycle, flow = found
    raise ConfigError(ConfigProblem(
        f"{flow.name}.replication.policy.class",
        f"cycle {'->'.join(cycle)}: {flow.replication_policy_class} keeps topic names, so records would "
        f"loop around it forever (MM2 would start anyway); use DefaultReplicationPolicy on one of "
        f"these flows or disable one of them",
        None, config.source_path,
    ))
