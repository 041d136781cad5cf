"""Topic, group and config-property filters with MM2's semantics, and loading the configured ones.

``topic.filter.class``, ``group.filter.class`` and ``config.property.filter.class`` name MM2's
default Java classes (``org.apache.kafka.connect.mirror.DefaultTopicFilter``, ...: the classes
below) or the Python path of a class of the operator's (``mypkg.filters.KeepAudit``). Such a class
is built with no arguments; ``configure(props)``, if it has one, then receives the flow's keys
(``filter_props``), as a Java filter's ``Configurable.configure`` does; and it answers one
question (``TopicFilterInterface`` and its siblings):

- topic filter: ``should_replicate_topic(topic) -> bool``;
- group filter: ``should_replicate_group(group) -> bool``;
- config property filter: ``should_replicate_config_property(prop) -> bool``, and optionally
  ``should_replicate_source_default(prop) -> bool`` (False when absent).

It need not subclass anything here (subclassing a default class to widen it works too). A flow
builds its filters only through ``topic_filter_for`` / ``group_filter_for`` /
``config_property_filter_for``; a class that cannot be loaded, built or configured is refused
when the configuration is loaded (a ConfigError naming the key and its line). The policy still
decides what no filter can let through: internal topics and cycles (``ReplicationPolicy``).

The default classes read ``topics``/``topics.exclude``, ``groups``/``groups.exclude`` and
``config.properties.exclude``/``use.defaults.from``. Each pattern must match the whole name
(Java's ``Matcher.matches``); exclusion wins over inclusion; an empty include list matches
nothing and an empty exclude list excludes nothing (``MirrorUtils.compilePatternList``).
Patterns compile once, when the filter is built or configured, and again (from the cache of
``re``) where a pickled filter lands.

Patterns are Python regular expressions with two Java spellings translated: ``\\Q...\\E``
quoting and the ``\\z`` anchor. MM2 joins a list into one ``a|b`` pattern, so in Java an
inline flag such as ``(?i)`` in one entry leaks into the following ones; here each entry
stands alone.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from mm2py.config.keys import FLOW_KEYS_BY_NAME, split_list
from mm2py.config.model import flow_value
from mm2py.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from mm2py.config.model import FlowConfig

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


# -- the interface -----------------------------------------------------------------------------


class TopicFilterInterface(Protocol):
    """MM2's ``TopicFilter``: ``topic.filter.class`` names a class with this method.

    Optional, as in MM2: ``configure(props)``, called once after the class is built with no
    arguments (see ``filter_props`` for what ``props`` holds).
    """

    def should_replicate_topic(self, topic: str) -> bool: ...


class GroupFilterInterface(Protocol):
    """MM2's ``GroupFilter``: ``group.filter.class`` names a class with this method (``configure`` optional)."""

    def should_replicate_group(self, group: str) -> bool: ...


class ConfigPropertyFilterInterface(Protocol):
    """MM2's ``ConfigPropertyFilter``: ``config.property.filter.class`` names a class with this method.

    Optional, as in MM2: ``configure(props)``, and ``should_replicate_source_default(prop) -> bool``
    (whether a config at its default on the source is copied; False when the class lacks it).
    """

    def should_replicate_config_property(self, prop: str) -> bool: ...


def should_replicate_source_default(filt: ConfigPropertyFilterInterface, prop: str) -> bool:
    """``filt.should_replicate_source_default(prop)``, False when the class lacks it (MM2's default method)."""
    method = getattr(filt, "should_replicate_source_default", None)
    return bool(method(prop)) if callable(method) else False


# -- the default classes -------------------------------------------------------------------------


def _flow_default(key: str) -> tuple[str, ...]:
    """A list key's default, from FlowConfig (which holds every default once)."""
    return tuple(cast(tuple[str, ...], FLOW_KEYS_BY_NAME[key].default))  # a regex list


def _list_setting(props: Mapping[str, object], names: tuple[str, ...]) -> tuple[str, ...] | None:
    """The first of ``names`` present in ``props``, as a ConfigDef LIST; None when none is."""
    for name in names:
        value = props.get(name)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            return tuple(str(v).strip() for v in value if str(v).strip())
        return split_list(str(value))
    return None


class _IncludeExclude:
    """Include and exclude regex lists; built with no arguments it holds MM2's defaults."""

    INCLUDE_KEY: ClassVar[str]
    EXCLUDE_KEY: ClassVar[str]
    EXCLUDE_ALIAS: ClassVar[str]  # MM2's deprecated spelling (``*.blacklist``)

    def __init__(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None):
        self._set(_flow_default(self.INCLUDE_KEY) if include is None else include,
                  _flow_default(self.EXCLUDE_KEY) if exclude is None else exclude)

    def _set(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        # tuples even if handed lists, so filters stay hashable
        include, exclude = tuple(include), tuple(exclude)
        self._inc = compile_patterns(include, self.INCLUDE_KEY)
        self._exc = compile_patterns(exclude, self.EXCLUDE_KEY)
        self._include, self._exclude = include, exclude

    @property
    def include(self) -> tuple[str, ...]:
        return self._include

    @property
    def exclude(self) -> tuple[str, ...]:
        return self._exclude

    def configure(self, props: Mapping[str, object]) -> None:
        """Read the include and exclude keys from the flow's keys (absent keys keep their value)."""
        include = _list_setting(props, (self.INCLUDE_KEY,))
        exclude = _list_setting(props, (self.EXCLUDE_KEY, self.EXCLUDE_ALIAS))
        self._set(self.include if include is None else include, self.exclude if exclude is None else exclude)

    def __reduce__(self) -> tuple[type, tuple[tuple[str, ...], tuple[str, ...]]]:
        # ship the pattern text only; compiled patterns are rebuilt where it is unpickled
        return type(self), (self.include, self.exclude)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__reduce__() == other.__reduce__()

    def __hash__(self) -> int:
        return hash((type(self), self.include, self.exclude))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(include={self.include!r}, exclude={self.exclude!r})"

    def matches(self, name: str) -> bool:
        return _any_full_match(self._inc, name) and not _any_full_match(self._exc, name)


class TopicFilter(_IncludeExclude):
    """``topics`` / ``topics.exclude`` (MM2's DefaultTopicFilter, the default ``topic.filter.class``)."""

    INCLUDE_KEY = "topics"
    EXCLUDE_KEY = "topics.exclude"
    EXCLUDE_ALIAS = "topics.blacklist"

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
    """``groups`` / ``groups.exclude`` (MM2's DefaultGroupFilter, the default ``group.filter.class``)."""

    INCLUDE_KEY = "groups"
    EXCLUDE_KEY = "groups.exclude"
    EXCLUDE_ALIAS = "groups.blacklist"

    def should_replicate_group(self, group: str) -> bool:
        return self.matches(group)


class ConfigPropertyFilter:
    """``config.properties.exclude`` and ``use.defaults.from`` (MM2's DefaultConfigPropertyFilter).

    Decides which topic configs are copied to remote topics, and whether a config still at
    its default on the source is copied (``source``) or left to the target's default. Built
    with no arguments it holds MM2's defaults.
    """

    EXCLUDE_KEY: ClassVar[str] = "config.properties.exclude"
    EXCLUDE_ALIAS: ClassVar[str] = "config.properties.blacklist"
    USE_DEFAULTS_FROM_KEY: ClassVar[str] = "use.defaults.from"

    def __init__(self, exclude: Iterable[str] | None = None, use_defaults_from: str = "target"):
        self._set(_flow_default(self.EXCLUDE_KEY) if exclude is None else exclude, use_defaults_from)

    def _set(self, exclude: Iterable[str], use_defaults_from: str) -> None:
        if use_defaults_from not in ("source", "target"):
            raise ConfigError(ConfigProblem(self.USE_DEFAULTS_FROM_KEY,
                                            f"expected source or target, got {use_defaults_from!r}"))
        exclude = tuple(exclude)
        self._exc = compile_patterns(exclude, self.EXCLUDE_KEY)
        self._exclude, self._use_defaults_from = exclude, use_defaults_from

    @property
    def exclude(self) -> tuple[str, ...]:
        return self._exclude

    @property
    def use_defaults_from(self) -> str:
        return self._use_defaults_from

    def configure(self, props: Mapping[str, object]) -> None:
        """Read ``config.properties.exclude`` and ``use.defaults.from`` (absent keys keep their value)."""
        exclude = _list_setting(props, (self.EXCLUDE_KEY, self.EXCLUDE_ALIAS))
        use = props.get(self.USE_DEFAULTS_FROM_KEY)
        self._set(self.exclude if exclude is None else exclude,
                  self.use_defaults_from if use is None else str(use).strip().lower())

    def __reduce__(self) -> tuple[type, tuple[tuple[str, ...], str]]:
        return type(self), (self.exclude, self.use_defaults_from)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__reduce__() == other.__reduce__()

    def __hash__(self) -> int:
        return hash((type(self), self.exclude, self.use_defaults_from))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(exclude={self.exclude!r}, use_defaults_from={self.use_defaults_from!r})"

    def should_replicate_config_property(self, prop: str) -> bool:
        return not _any_full_match(self._exc, prop)

    def should_replicate(self, name: str) -> bool:
        return self.should_replicate_config_property(name)

    def should_replicate_source_default(self, prop: str) -> bool:
        return self.use_defaults_from == "source"


# -- loading the configured classes --------------------------------------------------------------

TOPIC_FILTER_CLASS_KEY = "topic.filter.class"
GROUP_FILTER_CLASS_KEY = "group.filter.class"
CONFIG_PROPERTY_FILTER_CLASS_KEY = "config.property.filter.class"
_JAVA_PACKAGE = "org.apache.kafka.connect.mirror."
# where this module lived before it moved into mm2py.config: class paths naming it still load
_OLD_MODULE = "mm2py.filters."
# The keys a flow resolves itself (precedence, deprecated names, defaults): handed to every filter's
# configure with their resolved values, so a user class reads what the default filters read.
_RESOLVED = {
    "topics": "selection.topics",
    "topics.exclude": "selection.topics_exclude",
    "groups": "selection.groups",
    "groups.exclude": "selection.groups_exclude",
    "config.properties.exclude": "metadata.config_properties_exclude",
}


@dataclass(frozen=True)
class _FilterKind:
    key: str  # the config key naming the class
    method: str  # the one method a class must have
    default: type
    java: str  # MM2's default class, short name

    @property
    def default_name(self) -> str:
        return _JAVA_PACKAGE + self.java


TOPIC = _FilterKind(TOPIC_FILTER_CLASS_KEY, "should_replicate_topic", TopicFilter, "DefaultTopicFilter")
GROUP = _FilterKind(GROUP_FILTER_CLASS_KEY, "should_replicate_group", GroupFilter, "DefaultGroupFilter")
CONFIG_PROPERTY = _FilterKind(CONFIG_PROPERTY_FILTER_CLASS_KEY, "should_replicate_config_property",
                              ConfigPropertyFilter, "DefaultConfigPropertyFilter")
DEFAULT_TOPIC_FILTER = TOPIC.default_name
DEFAULT_GROUP_FILTER = GROUP.default_name
DEFAULT_CONFIG_PROPERTY_FILTER = CONFIG_PROPERTY.default_name


def filter_class(kind: _FilterKind, class_name: str) -> type:
    """Resolve a filter class key: MM2's default Java name (or its short name), or a Python path.

    A Python class qualifies when it has the kind's method and is not abstract; it need not
    subclass anything here. Raises ConfigError naming the key otherwise.
    """
    name = class_name.strip()
    if name.startswith(_OLD_MODULE):
        name = __name__ + "." + name.removeprefix(_OLD_MODULE)
    if name.removeprefix(_JAVA_PACKAGE) == kind.java:
        return kind.default
    module_name, _, attr = name.rpartition(".")
    if not module_name or name.startswith(("org.apache.kafka.", "java.")):
        problem = f"unknown filter class; use {kind.java} or the Python path of a class"
    else:
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except ImportError as e:
            problem = (f"cannot import module {module_name!r}: {e} (mm2py loads Python classes only: "
                       f"a Java filter other than {kind.java} needs a Python port)")
        except AttributeError:
            problem = f"module {module_name!r} has no {attr!r}"
        except Exception as e:  # a user module failing at import is a config problem
            problem = f"importing module {module_name!r} failed: {type(e).__name__}: {e}"
        else:
            if not isinstance(cls, type):
                problem = "not a class"
            elif not callable(getattr(cls, kind.method, None)):
                problem = f"the class has no method {kind.method}(name) -> bool"
            elif abstract := getattr(cls, "__abstractmethods__", None):
                problem = f"the class is abstract ({', '.join(sorted(abstract))})"
            else:
                return cls
    raise ConfigError(ConfigProblem(kind.key, f"{problem} (got {class_name!r})"))


def is_default(kind: _FilterKind, class_name: str) -> bool:
    """Whether ``class_name`` names the kind's default class (MM2's or ours)."""
    return filter_class(kind, class_name) is kind.default


class _RecordingProps(dict[str, object]):
    """The props handed to ``configure``, noting the keys looked up (Kafka's ``RecordingMap``).

    A key of its own a class reads is not reported as unknown; copying the whole mapping reads nothing.
    """

    def __init__(self, props: Mapping[str, object]):
        super().__init__(props)
        self.used: set[str] = set()

    def __getitem__(self, key: str) -> object:
        self.used.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: object = None) -> object:
        self.used.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.used.add(str(key))
        return super().__contains__(key)


def load_filter(kind: _FilterKind, class_name: str, props: Mapping[str, object],
                used: set[str] | None = None) -> Any:
    """Build the class with no arguments, then ``configure(props)`` if it has one (MM2's Configurable).

    ``used``, when given, receives the keys ``configure`` looked up.
    """
    cls = filter_class(kind, class_name)
    try:
        built = cls()
    except Exception as e:  # whatever a user's constructor raises
        raise ConfigError(ConfigProblem(
            kind.key, f"{class_name!r} cannot be built without arguments: {type(e).__name__}: {e}")) from e
    configure = getattr(built, "configure", None)
    if callable(configure):
        recording = _RecordingProps(props)
        try:
            configure(recording)
        except ConfigError:
            raise
        except Exception as e:  # whatever a user's configure raises
            raise ConfigError(ConfigProblem(
                kind.key, f"{class_name!r}: configure failed: {type(e).__name__}: {e}")) from e
        finally:
            if used is not None:
                used |= recording.used
    return built


def filter_props(flow: FlowConfig) -> dict[str, str]:
    """What a flow's filters receive in ``configure``, as MM2's connectors hand their config.

    Every key of the flow: flow-scoped keys (``A->B.`` stripped) over top-level ones, unknown
    keys too, so a filter can take settings of its own; ``source.cluster.alias`` and
    ``target.cluster.alias``; and ``topics``, ``topics.exclude``, ``groups``, ``groups.exclude``,
    ``config.properties.exclude``, ``use.defaults.from`` as resolved (defaults and deprecated
    names applied; lists joined with ``,``). Values are strings.
    """
    props = {str(k): str(v) for k, v in flow.raw.items()}
    props["source.cluster.alias"] = flow.source.alias
    props["target.cluster.alias"] = flow.target.alias
    for key, path in _RESOLVED.items():
        props[key] = ",".join(flow_value(flow, path))
    props["use.defaults.from"] = flow.metadata.use_defaults_from
    return props


def load_topic_filter(class_name: str = DEFAULT_TOPIC_FILTER,
                      props: Mapping[str, object] | None = None) -> TopicFilterInterface:
    """The ``topic.filter.class`` named, built and configured with ``props``."""
    return load_filter(TOPIC, class_name, props or {})


def load_group_filter(class_name: str = DEFAULT_GROUP_FILTER,
                      props: Mapping[str, object] | None = None) -> GroupFilterInterface:
    """The ``group.filter.class`` named, built and configured with ``props``."""
    return load_filter(GROUP, class_name, props or {})


def load_config_property_filter(class_name: str = DEFAULT_CONFIG_PROPERTY_FILTER,
                                props: Mapping[str, object] | None = None) -> ConfigPropertyFilterInterface:
    """The ``config.property.filter.class`` named, built and configured with ``props``."""
    return load_filter(CONFIG_PROPERTY, class_name, props or {})


def topic_filter_for(flow: FlowConfig) -> TopicFilterInterface:
    """The topic filter of one flow: its ``topic.filter.class``, configured from its keys."""
    return load_topic_filter(flow.selection.topic_filter_class, filter_props(flow))


def group_filter_for(flow: FlowConfig) -> GroupFilterInterface:
    """The group filter of one flow: its ``group.filter.class``, configured from its keys."""
    return load_group_filter(flow.selection.group_filter_class, filter_props(flow))


def config_property_filter_for(flow: FlowConfig) -> ConfigPropertyFilterInterface:
    """The config property filter of one flow: its ``config.property.filter.class``, configured from its keys."""
    return load_config_property_filter(flow.metadata.config_property_filter_class, filter_props(flow))


FILTER_KINDS: dict[str, _FilterKind] = {k.key: k for k in (TOPIC, GROUP, CONFIG_PROPERTY)}
