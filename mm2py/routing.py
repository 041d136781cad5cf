"""Connect's ``RegexRouter`` on a flow's remote topic names: the name after the replication policy.

MM2 runs its connector transforms on records already named for the remote topic, so a router
in ``transforms`` renames what the policy named: ``A.orders`` with ``regex = A\\.(.*)`` and
``replacement = $1-from-A`` lands in ``orders-from-A``. mm2py applies the routers of a flow's
``transforms`` in ``mm2py.flow_policy.policy_for`` (``RoutedPolicy``), so every place that names a remote topic
(topic creation, the copy, offset syncs, checkpoints, failover, ``status``, metrics, the audit)
names the routed one.

Invariants:
- a router renames a topic only where ``regex`` matches the whole name (Java's ``matches``);
  ``replacement`` is Java's: ``$n`` and ``${name}`` are groups, ``\\`` takes the next character
  as it is; routers run in the order ``transforms`` lists them, each on the name the one before
  gave; a router's predicate decides by the topic alone (``TopicNameMatches``) on that name;
- only ``format_remote_topic`` changes: tracing a name back (``topic_source``,
  ``upstream_topic``) and the internal topics are the policy's, so a routed name that lost the
  source alias is a local topic to every later hop (``mm2py.transforms.build`` refuses a router
  on a flow of a cycle for that reason);
- a router's keys that cannot be honoured raise ``ConfigError`` naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mm2py.errors import ConfigError, ConfigProblem

REGEX_ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"
TOPIC_NAME_MATCHES = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"


def _names(raw: Mapping[str, str], key: str) -> list[str]:
    return [n.strip() for n in raw.get(key, "").split(",") if n.strip()]


def java_replacement(replacement: str, key: str) -> list[str | int]:
    """``replacement`` as parts: text, or a group (number or name), as Java's ``Matcher`` reads it."""
    parts: list[str | int] = []
    text: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            if i + 1 == len(replacement):
                raise ConfigError(ConfigProblem(key, "ends with a lone backslash"))
            text.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            text.append(c)
            i += 1
            continue
        parts.append("".join(text))
        text = []
        if replacement.startswith("${", i):
            end = replacement.find("}", i)
            if end < 0:
                raise ConfigError(ConfigProblem(key, "'${' without its '}'"))
            parts.append(f"={replacement[i + 2:end]}")  # a named group, told apart by '='
            i = end + 1
            continue
        digits = re.match(r"\d+", replacement[i + 1:])
        if digits is None:
            raise ConfigError(ConfigProblem(key, "'$' not followed by a group number or {name}"))
        parts.append(int(digits.group()))
        i += 1 + len(digits.group())
    parts.append("".join(text))
    return [p for p in parts if p != ""]


@dataclass(frozen=True)
class Router:
    """One ``RegexRouter`` link: ``regex`` matched against the whole name, and its ``when`` predicate."""

    name: str
    regex: re.Pattern[str]
    replacement: tuple[str | int, ...]
    when: re.Pattern[str] | None = None
    negate: bool = False

    def route(self, topic: str) -> str:
        if self.when is not None and (self.when.fullmatch(topic) is None) != self.negate:
            return topic
        match = self.regex.fullmatch(topic)
        if match is None:
            return topic
        out = []
        for part in self.replacement:
            if isinstance(part, int) or part.startswith("="):
                group = match.group(part if isinstance(part, int) else part[1:])
                out.append(group or "")
            else:
                out.append(part)
        return "".join(out)


def _compiled(pattern: str, key: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ConfigError(ConfigProblem(key, f"no regular expression: {e}")) from None


def _checked(router: Router, key: str) -> Router:
    """``router`` whose replacement names only groups its regex has."""
    for part in router.replacement:
        if isinstance(part, int) and part > router.regex.groups:
            raise ConfigError(ConfigProblem(key, f"${part}: the regex has {router.regex.groups} groups"))
        if isinstance(part, str) and part.startswith("=") and part[1:] not in router.regex.groupindex:
            raise ConfigError(ConfigProblem(key, f"${{{part[1:]}}}: the regex has no group of that name"))
    return router


def routers_of(raw: Mapping[str, str]) -> tuple[Router, ...]:
    """The RegexRouter links of a flow's merged keys (``FlowConfig.raw``), in ``transforms`` order."""
    routers = []
    for name in _names(raw, "transforms"):
        prefix = f"transforms.{name}."
        if raw.get(prefix + "type", "").strip() != REGEX_ROUTER:
            continue
        if not raw.get(prefix + "regex", "").strip():
            raise ConfigError(ConfigProblem(prefix + "regex", "required: the regular expression the name must match"))
        if prefix + "replacement" not in raw:
            raise ConfigError(ConfigProblem(prefix + "replacement", "required: the new name ($1 for a group)"))
        when, negate = None, raw.get(prefix + "negate", "false").strip().lower() == "true"
        predicate = raw.get(prefix + "predicate", "").strip()
        if predicate:
            if raw.get(f"predicates.{predicate}.type", "").strip() != TOPIC_NAME_MATCHES:
                raise ConfigError(ConfigProblem(prefix + "predicate", f"{predicate}: a router's predicate must decide "
                                                "by the topic alone (TopicNameMatches); another would send one "
                                                "partition's records to several topics, which offset syncs cannot map"))
            when = _compiled(raw.get(f"predicates.{predicate}.pattern", ""), f"predicates.{predicate}.pattern")
        regex = _compiled(raw[prefix + "regex"].strip(), prefix + "regex")
        replacement = tuple(java_replacement(raw[prefix + "replacement"].strip(), prefix + "replacement"))
        routers.append(_checked(Router(name, regex, replacement, when, negate), prefix + "replacement"))
    return tuple(routers)


def route(routers: tuple[Router, ...], topic: str) -> str:
    for router in routers:
        topic = router.route(topic)
    return topic


def refuse_clashes(flow: str, topics: Iterable[str], remote_topic: Callable[[str], str]) -> None:
    """Raise ``ConfigError`` when routers send two source topics of ``flow`` to one remote topic.

    Two source partitions written into one remote partition would interleave, and no offset
    sync could map either: the flow stops naming the topics rather than mixing them.
    """
    by_remote: dict[str, list[str]] = {}
    for topic in topics:
        by_remote.setdefault(remote_topic(topic), []).append(topic)
    problems = [ConfigProblem("transforms", f"flow {flow}: source topics {', '.join(sorted(sources))} would all be "
                              f"written to remote topic {remote} (RegexRouter): one remote topic per source topic")
                for remote, sources in sorted(by_remote.items()) if len(sources) > 1]
    if problems:
        raise ConfigError(problems)
