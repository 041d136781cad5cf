"""The delivery mode of each flow: at-least-once (MM2's default) or exactly-once on the target.

Two keys ask for exactly-once, as in MM2:

- ``exactly.once.source.support`` (MM2's worker key: per target cluster ``{target}.`` or top
  level): ``enabled`` or ``required`` turn it on for every flow into that cluster;
  ``preparing`` (MM2's rollout step) and ``disabled`` leave flows at-least-once;
- ``exactly.once.support`` (the connector key: per flow or top level): ``required`` demands it,
  ``enabled`` (mm2py's spelling) asks for it; MM2's ``requested`` follows the worker key.

A flow's mode (``FlowConfig.exactly_once``) is then ``off``, ``enabled`` (exactly-once when
the target can do it, else at-least-once with one WARNING naming why) or ``required`` (the flow
does not start without it: ``mm2py.source.copy.exactly_once.prepare`` checks the target at start).
``partition.mismatch = hash`` has no exactly-once mode: ``required`` with it is refused here,
naming the key and line. Continuous copy (``copy.continuous.enabled``, mm2py.source.copy.continuous)
has one: an interval's task commits a transaction every ``copy.tail.commit.ms``
(mm2py.source.copy.interval_commits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.config.properties import Entry
from mm2py.errors import ConfigError, ConfigProblem

WORKER_KEY = "exactly.once.source.support"
CONNECTOR_KEY = "exactly.once.support"
_STRENGTH = {"off": 0, "enabled": 1, "required": 2}


def _worker_mode(entries: Mapping[str, Entry], target: str) -> tuple[str, str | None]:
    for key in (f"{target}.{WORKER_KEY}", WORKER_KEY):
        if key in entries:
            value = entries[key].value.strip().lower()
            return ("required" if value == "required" else "enabled" if value == "enabled" else "off"), key
    return "off", None


def flow_mode(entries: Mapping[str, Entry], flow: FlowConfig) -> tuple[str, str | None]:
    """(mode, the key that set it) of ``flow``: ``off``, ``enabled`` or ``required``."""
    worker, worker_key = _worker_mode(entries, flow.target.alias)
    connector = {"required": "required", "enabled": "enabled"}.get(flow.delivery.exactly_once_support, "off")
    connector_key = next((k for k in (f"{flow.name}.{CONNECTOR_KEY}", CONNECTOR_KEY) if k in entries), None)
    if flow.delivery.exactly_once_support == "disabled":
        return "off", connector_key
    if _STRENGTH[connector] >= _STRENGTH[worker]:
        return connector, connector_key if connector != "off" else None
    return worker, worker_key


def apply_delivery(entries: Mapping[str, Entry], config: MirrorMakerConfig,
                   source: str | None = None) -> MirrorMakerConfig:
    """``config`` with every flow's delivery mode set; refuses what cannot be given."""
    flows, problems = [], []
    for flow in config.flows:
        mode, key = flow_mode(entries, flow)
        if mode == "required" and flow.enabled and flow.delivery.partition_mismatch == "hash":
            line = entries[key].line if key is not None and key in entries else None
            problems.append(ConfigProblem(
                key, f"flow {flow.name} requires exactly-once delivery, which partition.mismatch = hash "
                     "(records re-keyed by a producer per task) does not have; use 'enabled' or "
                     "partition.mismatch = error", line, source))
        flows.append(replace(flow, delivery=replace(flow.delivery, exactly_once=mode, exactly_once_key=key)))
    if problems:
        raise ConfigError(problems)
    return replace(config, flows=tuple(flows))

