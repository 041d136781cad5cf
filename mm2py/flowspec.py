"""One flow resolved once: its settings, replication policy, loop guard and the flow back.

``FlowSpec.resolve`` runs at the start of a run (``mm2py.engine.run``) once per flow of a
run; the spec is then passed whole to the connectors, planners and committers, which read the
policy and guard from it instead of building them again.

Invariants: a spec is frozen and picklable (it travels in Spark options and with the source
reader to executors). The policy is not pickled: it is rebuilt from the flow's keys where the
spec is unpickled, once per process, as ``LoopGuard`` rebuilds its hops' policies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mm2py.config.model import ClusterConfig, FlowConfig, MirrorMakerConfig
from mm2py.flow_policy import policy_for
from mm2py.policy import ReplicationPolicy
from mm2py.topology import LoopGuard, flow_back, loop_guard


@dataclass(frozen=True)
class FlowSpec:
    """A flow with what is worked out from it and the whole configuration.

    ``policy``: ``policy_for(flow)``; ``guard``: the blind cycles through it (mm2py.topology);
    ``reverse``: for a flow on a provenance cycle, the enabled flow back (mm2py.checkpoint.both_ways).
    """

    flow: FlowConfig
    policy: ReplicationPolicy
    guard: LoopGuard
    reverse: FlowConfig | None = None

    @classmethod
    def resolve(cls, config: MirrorMakerConfig, flow: FlowConfig) -> FlowSpec:
        guard = loop_guard(config, flow)
        return cls(flow, policy_for(flow), guard, flow_back(config, flow) if guard.provenance else None)

    @classmethod
    def alone(cls, flow: FlowConfig) -> FlowSpec:
        """A flow outside any configuration (tools, tests): no cycle through it."""
        return cls(flow, policy_for(flow), LoopGuard(flow.name))

    def with_flow(self, flow: FlowConfig) -> FlowSpec:
        """The same spec over ``flow`` as start-up adjusted it (same keys for policy and guard)."""
        return replace(self, flow=flow)

    @property
    def name(self) -> str:
        return self.flow.name

    @property
    def source(self) -> ClusterConfig:
        return self.flow.source

    @property
    def target(self) -> ClusterConfig:
        return self.flow.target

    @property
    def provenance(self) -> bool:
        """The flow is on a cycle made safe by provenance (mm2py.source.provenance)."""
        return self.guard.provenance

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle, (self.flow, self.guard, self.reverse))


def _unpickle(flow: FlowConfig, guard: LoopGuard, reverse: FlowConfig | None) -> FlowSpec:
    return FlowSpec(flow, policy_for(flow), guard, reverse)
