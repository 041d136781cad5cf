"""Delivery guarantees a file asks for that mm2py does not give: refused or named at start.

mm2py delivers at-least-once: positions move after a whole micro-batch is acknowledged, so a
crash copies up to a micro-batch again. MM2's exactly-once keys must not let an operator
believe otherwise:

- ``exactly.once.support = required`` (connector key, top level or per flow) on an enabled flow
  is refused with a ConfigError naming the key and line: the guarantee it demands is not there;
- ``{alias}.exactly.once.source.support = enabled | preparing`` (MM2's worker key, per target
  cluster or top level) starts; the start-up WARNING names it (``mm2py.config.support``).
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.config.model import MirrorMakerConfig
from mm2py.config.properties import Entry
from mm2py.errors import ConfigError, ConfigProblem


def check_delivery(entries: Mapping[str, Entry], config: MirrorMakerConfig, source: str | None = None) -> None:
    problems = []
    for flow in config.enabled_flows:
        if flow.exactly_once_support != "required":
            continue
        key = next((k for k in (f"{flow.name}.exactly.once.support", "exactly.once.support") if k in entries),
                   "exactly.once.support")
        line = entries[key].line if key in entries else None
        problems.append(ConfigProblem(
            key, f"flow {flow.name} requires exactly-once delivery, which mm2py does not give yet: it is "
                 "at-least-once (a restart may copy up to a micro-batch again); remove the key or set it to "
                 "'requested'", line, source))
    if problems:
        raise ConfigError(problems)
