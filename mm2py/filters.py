"""Topic, group and config-property filters with MM2's semantics.

Each pattern must match the whole name (Java's ``Matcher.matches``); exclusion wins over
inclusion; an empty include list matches nothing and an empty exclude list excludes nothing
(``MirrorUtils.compilePatternList``). Patterns compile once, when the filter is built, and
again (from the cache of ``re``) where a pickled filter lands.

Patterns are Python regular expressions with two Java spellings translated: ``\\Q...\\E``
quoting and the ``\\z`` anchor. MM2 joins a list into one ``a|b`` pattern, so in Java an
inline flag such as ``(?i)`` in one entry leaks into the following ones; here each entry
stands alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from mm2py.errors import ConfigError, ConfigProblem

_QUOTED = re.compile(r"\\Q(.*?)(?:\\E|\Z)", re.DOTALL)


def _from_java(pattern: str) -> str:
    """Rewrite the Java-only spellings that Python's ``re`` lacks or reads differently."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("\\Q", i):
            m = _QUOTED.match(pattern, i)
            assert m is not None  # the group can be empty and the end is optional
            out.append(re.escape(m.group(1)))
            i = m.end()
        elif pattern.startswith("\\z", i):
            out.append("\\Z")  # Java \z is Python \Z (absolute end)
            i += 2
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])  # keep escapes whole so \\Q is not read as \Q
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def compile_patterns(patterns: tuple[str, ...], key: str) -> tuple[re.Pattern[str], ...]:
    """Compile a regex list config value; blanks dropped; errors name ``key``."""
    compiled = []
    for pattern in patterns:
        if not pattern:
            continue  # only ever an empty alternative, which matches no topic or group name
        try:
            compiled.append(re.compile(_from_java(pattern)))
        except re.error as e:
            raise ConfigError(ConfigProblem(key, f"invalid regular expression {pattern!r}: {e}")) from e
    return tuple(compiled)


def _any_full_match(patterns: tuple[re.Pattern[str], ...], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


@dataclass(frozen=True)
class _IncludeExclude:
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    _inc: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _exc: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    INCLUDE_KEY: ClassVar[str]
    EXCLUDE_KEY: ClassVar[str]

    def __post_init__(self) -> None:
        # tuples even if handed lists, so filters stay hashable
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "_inc", compile_patterns(self.include, self.INCLUDE_KEY))
        object.__setattr__(self, "_exc", compile_patterns(self.exclude, self.EXCLUDE_KEY))

    def __reduce__(self) -> tuple[type, tuple[tuple[str, ...], tuple[str, ...]]]:
        # ship the pattern text only; compiled patterns are rebuilt where it is unpickled
        return type(self), (self.include, self.exclude)

    def matches(self, name: str) -> bool:
        return _any_full_match(self._inc, name) and not _any_full_match(self._exc, name)


class TopicFilter(_IncludeExclude):
    """``topics`` / ``topics.exclude`` (MM2's DefaultTopicFilter)."""

    INCLUDE_KEY = "topics"
    EXCLUDE_KEY = "topics.exclude"

    def should_replicate_topic(self, topic: str) -> bool:
        return self.matches(topic)

    def named_topics(self) -> tuple[str, ...]:
        """Include entries that spell one topic name (``orders``, ``eu.orders``) and are not excluded.

        A name the operator wrote out is expected to exist; a regular expression may match nothing.
        (A dot in a name is a regex wildcard too, and matches itself.)
        """
        return tuple(p for p in self.include if _TOPIC_NAME.fullmatch(p) and self.matches(p))


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class GroupFilter(_IncludeExclude):
    """``groups`` / ``groups.exclude`` (MM2's DefaultGroupFilter)."""

    INCLUDE_KEY = "groups"
    EXCLUDE_KEY = "groups.exclude"

    def should_replicate_group(self, group: str) -> bool:
        return self.matches(group)


@dataclass(frozen=True)
class ConfigPropertyFilter:
    """``config.properties.exclude`` and ``use.defaults.from`` (MM2's DefaultConfigPropertyFilter).

    Decides which topic configs are copied to remote topics, and whether a config still at
    its default on the source is copied (``source``) or left to the target's default.
    """

    exclude: tuple[str, ...]
    use_defaults_from: str = "target"
    _exc: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    EXCLUDE_KEY: ClassVar[str] = "config.properties.exclude"

    def __post_init__(self) -> None:
        if self.use_defaults_from not in ("source", "target"):
            raise ConfigError(ConfigProblem("use.defaults.from",
                                            f"expected source or target, got {self.use_defaults_from!r}"))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "_exc", compile_patterns(self.exclude, self.EXCLUDE_KEY))

    def __reduce__(self) -> tuple[type, tuple[tuple[str, ...], str]]:
        return type(self), (self.exclude, self.use_defaults_from)

    def should_replicate(self, name: str) -> bool:
        return not _any_full_match(self._exc, name)

    def should_replicate_source_default(self, name: str) -> bool:
        return self.use_defaults_from == "source"
