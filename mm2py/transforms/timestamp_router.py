"""Connect's ``TimestampRouter``: each record of a remote topic to ``topic.format``, its window topic.

``topic.format`` (default ``${topic}-${timestamp}``) names the topic a record goes to: ``${topic}``
is the name the record has where the router sits in the chain (the remote topic, after the
replication policy and any ``RegexRouter`` before it), ``${timestamp}`` the record's timestamp
formatted in UTC with ``timestamp.format`` (default ``yyyyMMdd``, Java's ``SimpleDateFormat``).

Invariants:
- ``timestamp.format`` translates the letters ``yyyy``, ``yy``, ``MM``, ``dd``, ``HH``, ``mm``,
  ``ss``, ``SSS`` and quoted literals (``'T'``, ``''`` a quote); any other letter run is refused
  at start naming the key, never approximated;
- every name a router can make is a legal topic name (literals in ``[A-Za-z0-9._-]``) and holds
  ``${topic}`` once, so two remote topics never share a window topic;
- a router decides by the topic alone (no predicate, or ``TopicNameMatches``): a remote topic is
  routed wholly or not at all; at most one per flow, and no ``RegexRouter`` after it (that one
  renames the remote topic everywhere, ``mm2py.routing``, not the window topics);
- ``position`` is the number of chain links (``Chain.links``) before the router: those see the
  remote topic's name, the links after it the window topic's, as Connect runs them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mm2py.routing import REGEX_ROUTER, TOPIC_NAME_MATCHES
from mm2py.transforms.chain import TransformError

TIMESTAMP_ROUTER = "org.apache.kafka.connect.transforms.TimestampRouter"
_LEGAL = re.compile(r"[A-Za-z0-9._-]*")
# SimpleDateFormat letter runs mm2py translates: run -> (strftime directive, digits)
_FIELDS = {"yyyy": ("%Y", 4), "yy": ("%y", 2), "MM": ("%m", 2), "dd": ("%d", 2), "HH": ("%H", 2),
           "mm": ("%M", 2), "ss": ("%S", 2), "SSS": ("", 3)}


def _names(raw: Mapping[str, str], key: str) -> list[str]:
    return [n.strip() for n in raw.get(key, "").split(",") if n.strip()]


def date_format(pattern: str, key: str) -> tuple[tuple[str, int], ...]:
    """``pattern`` (SimpleDateFormat) as parts: ``(literal, 0)`` or ``(letter run, digits)``; refuses the rest."""
    parts: list[tuple[str, int]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise TransformError(key, f"{pattern!r}: a quote without its closing quote")
            parts.append(("'" if end == i + 1 else pattern[i + 1:end], 0))
            i = end + 1
        elif c.isascii() and c.isalpha():
            run = re.match(f"{c}+", pattern[i:])
            assert run is not None
            if run.group() not in _FIELDS:
                raise TransformError(key, f"{pattern!r}: {run.group()!r} is not translated (mm2py translates "
                                     f"{', '.join(_FIELDS)} and quoted literals)")
            parts.append((run.group(), _FIELDS[run.group()][1]))
            i += len(run.group())
        else:
            parts.append((c, 0))
            i += 1
    return tuple(parts)


def format_utc(parts: tuple[tuple[str, int], ...], timestamp_ms: int) -> str:
    """``timestamp_ms`` formatted with ``parts`` (``date_format``) in UTC, as SimpleDateFormat with UTC does."""
    tm = time.gmtime(timestamp_ms // 1000)
    out = []
    for text, digits in parts:
        if not digits:
            out.append(text)
        elif text == "SSS":
            out.append(f"{timestamp_ms % 1000:03d}")
        else:
            out.append(time.strftime(_FIELDS[text][0], tm))
    return "".join(out)


@dataclass(frozen=True)
class TimestampRouter:
    """One ``TimestampRouter`` link: ``topic_format`` with ``${topic}``/``${timestamp}``, its date ``stamp``."""

    name: str
    topic_format: str
    stamp: tuple[tuple[str, int], ...]
    position: int  # chain links before it
    when: re.Pattern[str] | None = None
    negate: bool = False

    def routes(self, topic: str) -> bool:
        """Whether the records of remote topic ``topic`` are routed (the predicate, decided by the name)."""
        return self.when is None or (self.when.fullmatch(topic) is not None) != self.negate

    def window(self, topic: str, timestamp_ms: int) -> str:
        """The topic a record of ``topic`` stamped ``timestamp_ms`` goes to."""
        return (self.topic_format.replace("${topic}", topic)
                .replace("${timestamp}", format_utc(self.stamp, timestamp_ms)))

    def pattern(self, topic: str) -> str:
        """``topic``'s window topics as one name, ``${timestamp}`` left in (``mm2py status`` shows it)."""
        return self.topic_format.replace("${topic}", topic)

    def windows_of(self) -> Callable[[str], str | None]:
        """A reader of window names: the remote topic a window topic belongs to, None for any other name."""
        stamp = "".join(rf"\d{{{d}}}" if d else re.escape(t) for t, d in self.stamp)
        regex = re.compile("".join("(?P<topic>.+)" if p == "${topic}" else stamp if p == "${timestamp}" else
                                   re.escape(p) for p in re.split(r"(\$\{topic\}|\$\{timestamp\})",
                                                                  self.topic_format) if p))

        def remote_of(window: str) -> str | None:
            match = regex.fullmatch(window)
            return match.group("topic") if match is not None and self.routes(match.group("topic")) else None
        return remote_of


def _checked_format(topic_format: str, key: str) -> str:
    if topic_format.count("${topic}") != 1:
        raise TransformError(key, f"{topic_format!r}: must hold ${{topic}} once, so two remote topics never "
                             "write one window topic")
    literal = re.sub(r"\$\{topic\}|\$\{timestamp\}", "", topic_format)
    if not _LEGAL.fullmatch(literal):
        raise TransformError(key, f"{topic_format!r}: a topic name takes only A-Z a-z 0-9 . _ -")
    return topic_format


def timestamp_router_of(raw: Mapping[str, str]) -> TimestampRouter | None:
    """The flow's ``TimestampRouter`` (None: it has none); raises ``TransformError`` naming a key it cannot honour."""
    names = _names(raw, "transforms")
    routers = [n for n in names if raw.get(f"transforms.{n}.type", "").strip() == TIMESTAMP_ROUTER]
    if not routers:
        return None
    name = routers[0]
    prefix = f"transforms.{name}."
    if len(routers) > 1:
        raise TransformError(f"transforms.{routers[1]}.type", f"a second TimestampRouter (after {name!r}): "
                             "one per flow")
    after = names[names.index(name) + 1:]
    for later in after:
        if raw.get(f"transforms.{later}.type", "").strip() == REGEX_ROUTER:
            raise TransformError(f"transforms.{later}.type", f"a RegexRouter after TimestampRouter {name!r}: "
                                 "mm2py renames remote topics, not window topics; list it before the TimestampRouter")
    topic_format = _checked_format(raw.get(prefix + "topic.format", "${topic}-${timestamp}").strip(),
                                   prefix + "topic.format")
    stamp = date_format(raw.get(prefix + "timestamp.format", "yyyyMMdd").strip(), prefix + "timestamp.format")
    if not _LEGAL.fullmatch("".join(t for t, d in stamp if not d)):
        raise TransformError(prefix + "timestamp.format", "its literals must be legal in a topic name: "
                             "A-Z a-z 0-9 . _ -")
    when, negate = None, raw.get(prefix + "negate", "false").strip().lower() == "true"
    predicate = raw.get(prefix + "predicate", "").strip()
    if predicate:
        if raw.get(f"predicates.{predicate}.type", "").strip() != TOPIC_NAME_MATCHES:
            raise TransformError(prefix + "predicate", f"{predicate}: a TimestampRouter's predicate must decide by "
                                 "the topic alone (TopicNameMatches), so a remote topic is routed wholly or not")
        try:
            when = re.compile(raw.get(f"predicates.{predicate}.pattern", ""))
        except re.error as e:
            raise TransformError(f"predicates.{predicate}.pattern", f"no regular expression: {e}") from None
    position = sum(1 for n in names[:names.index(name)]
                   if raw.get(f"transforms.{n}.type", "").strip() != REGEX_ROUTER)
    return TimestampRouter(name, topic_format, stamp, position, when, negate)
