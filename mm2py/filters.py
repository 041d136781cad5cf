"""Topic, group and config-property filters with MM2's semantics.

Each pattern must match the whole name (Java's ``Pattern.matches``); exclusion wins.
Filters are frozen and picklable; patterns compile once per process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


def _compile(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    usable = [p for p in patterns if p]
    if not usable:
        return None
    return re.compile("|".join(f"(?:{p})" for p in usable))


@dataclass(frozen=True)
class _IncludeExclude:
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    _inc: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exc: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_inc", _compile(tuple(self.include)))
        object.__setattr__(self, "_exc", _compile(tuple(self.exclude)))

    def matches(self, name: str) -> bool:
        if self._exc is not None and self._exc.fullmatch(name):
            return False
        return self._inc is not None and self._inc.fullmatch(name) is not None


class TopicFilter(_IncludeExclude):
    """``topics`` / ``topics.exclude`` (MM2's DefaultTopicFilter)."""


class GroupFilter(_IncludeExclude):
    """``groups`` / ``groups.exclude`` (MM2's DefaultGroupFilter)."""


@dataclass(frozen=True)
class ConfigPropertyFilter:
    """``config.properties.exclude`` (MM2's DefaultConfigPropertyFilter): which topic configs to copy."""

    exclude: tuple[str, ...]

    def should_replicate(self, name: str) -> bool:
        return not any(re.fullmatch(p, name) for p in self.exclude if p)
