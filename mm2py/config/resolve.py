"""From parsed key/value entries to a validated ``MirrorMakerConfig``, as MM2 resolves them.

A key is one of (MM2's ``MirrorMakerConfig``):

- ``{src}->{tgt}.key``: a setting of one flow;
- ``{alias}.key``: a client setting of one cluster (``bootstrap.servers``, ``security.protocol``,
  ...), with ``{alias}.consumer.|producer.|admin.`` scoping one client type;
- anything else: top level, the fallback of every flow (and, for client settings, of every
  cluster).

A flow setting is ``{src}->{tgt}.key``, else the top-level ``key``, else the default. Which
client setting reaches which client of a flow is ``mm2py.config.clients``'s table (MM2 4.3's
rules). Every problem is collected and raised together, each naming its key and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import cast

import structlog

from mm2py.config import clients
from mm2py.config.filters import FILTER_KINDS, filter_props, is_default, load_filter
from mm2py.config.keys import (
    ACCEPTED,
    AUDIT_INTERVAL,
    AUTO_OFFSET_RESET,
    CLIENT_TYPES,
    DEFAULT_CLASSES,
    DEPRECATED_NAMES,
    FLOW_KEYS,
    FLOW_KEYS_BY_NAME,
    METRICS_BIND_ADDRESS,
    METRICS_PORT,
    SHUTDOWN_TIMEOUT,
    TOP_LEVEL_CLIENT,
    WORKER_KEY,
    InvalidValue,
    Key,
    split_list,
)
from mm2py.config.model import ClusterConfig, FlowConfig, MirrorMakerConfig, build_flow, flow_value, frozen_map
from mm2py.config.properties import Entry
from mm2py.config.support import Status, other_support
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.policy import POLICY_CLASS_KEY
from mm2py.policy_loader import load_policy

log = structlog.get_logger(__name__)

SOURCE_SUPPORT = "exactly.once.source.support"

# Aliases end up in topic names (A.heartbeats, mm2-offset-syncs.A.internal): Kafka's legal chars.
_ALIAS = re.compile(r"[A-Za-z0-9._-]+")
# An undeclared flow prefix; declared aliases (which may hold dots) are matched exactly first.
_FLOW_KEY = re.compile(r"([^.\s]+)->([^.\s]+)\.(.+)")
_RESET_KEY = "consumer.auto.offset.reset"
_REGISTRY_PREFIX = "schema.registry."  # {alias}.schema.registry.<setting>


def parse_flow_key(key: str, aliases: Iterable[str] = ()) -> tuple[str, str, str] | None:
    """``"A->B.topics"`` -> ``("A", "B", "topics")``; None if the key is not flow-scoped.

    Declared aliases are tried first, longest match winning, so aliases holding dots work.
    """
    if "->" not in key:
        return None
    aliases = tuple(aliases)
    declared = [(src, tgt) for src in aliases for tgt in aliases if key.startswith(f"{src}->{tgt}.")]
    declared = [(src, tgt) for src, tgt in declared if len(key) > len(src) + len(tgt) + 3]
    if declared:
        src, tgt = max(declared, key=lambda pair: len(pair[0]) + len(pair[1]))
        return src, tgt, key[len(src) + len(tgt) + 3 :]
    m = _FLOW_KEY.fullmatch(key)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def parse_cluster_key(key: str, aliases: Iterable[str]) -> tuple[str, str] | None:
    """``"A.consumer.fetch.max.bytes"`` -> ``("A", "consumer.fetch.max.bytes")`` for a declared A."""
    matches = [a for a in aliases if key.startswith(f"{a}.") and len(key) > len(a) + 1]
    if not matches:
        return None
    alias = max(matches, key=len)
    return alias, key[len(alias) + 1 :]


@dataclass
class _Layers:
    """Client settings of one scope: generic, and per client type."""

    client: dict[str, str] = field(default_factory=dict)
    typed: dict[str, dict[str, str]] = field(default_factory=lambda: {t: {} for t in CLIENT_TYPES})

    def put(self, name: str, value: str) -> None:
        head, _, tail = name.partition(".")
        if head in CLIENT_TYPES and tail:
            self.typed[head][tail] = value
        else:
            self.client[name] = value


@dataclass
class _Settings:
    """Parsed flow settings of one scope (top level or one flow) and their raw text."""

    values: dict[str, object] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    # the name each value was read under: a canonical name beats MM2's deprecated one
    names: dict[str, str] = field(default_factory=dict)


class _Resolver:
    def __init__(self, entries: Mapping[str, Entry], source: str | None):
        self.entries = entries
        self.source = source
        self.problems: list[ConfigProblem] = []
        self.unknown: list[str] = []
        self.misplaced: list[str] = []  # flow settings under a cluster alias: MM2 ignores them
        self.custom_classes: dict[str, str] = {}  # admin classes we accept but cannot load
        self.top = _Settings()
        self.flows: dict[tuple[str, str], _Settings] = {}
        self.top_clients = _Layers()
        self.cluster_clients: dict[str, _Layers] = {}
        self.bootstrap: dict[str, str] = {}
        self.registries: dict[str, dict[str, str]] = {}  # alias -> schema registry client settings
        self.spark: dict[str, str] = {}
        self.metrics_port: int | None = None
        self.metrics_bind_address = str(METRICS_BIND_ADDRESS.default)
        self.audit_interval_seconds = float(AUDIT_INTERVAL.default)  # type: ignore[arg-type]
        self.shutdown_timeout_ms = int(SHUTDOWN_TIMEOUT.default)  # type: ignore[call-overload]
        self.client_notes: dict[str, str] = {}  # client settings no client of mm2py applies: key -> why
        self.not_supported: dict[str, str] = {}  # MM2 features mm2py has not: key -> why
        self.spellings: clients.Spellings | None = None
        self.routed: dict[tuple[str, str], clients.FlowClients] = {}

    def problem(self, key: str | None, message: str, line: int | None = None) -> None:
        if line is None and key is not None and key in self.entries:
            line = self.entries[key].line
        self.problems.append(ConfigProblem(key, message, line, self.source))

    def parse(self, key: Key, name: str, text: str) -> object | None:
        try:
            return key.parse(text)
        except InvalidValue as e:
            self.problem(name, str(e))
            return None

    # -- pass 1: every key, classified and validated once -------------------------------

    def aliases(self) -> list[str]:
        entry = self.entries.get("clusters")
        if entry is None:
            self.problem("clusters", "missing required key (e.g. 'clusters = A, B')")
            return []
        aliases: list[str] = []
        for alias in split_list(entry.value):
            if not _ALIAS.fullmatch(alias):
                self.problem("clusters", f"alias {alias!r} may only hold letters, digits, '.', '_' and '-'")
            elif alias not in aliases:  # MM2 keeps a set: a repeated alias is harmless
                aliases.append(alias)
        if not aliases:
            self.problem("clusters", "lists no cluster alias")
        return aliases

    def classify(self, aliases: list[str]) -> None:
        for name, entry in self.entries.items():
            if name == "clusters":
                self.top.raw[name] = entry.value
                continue
            if (flow := parse_flow_key(name, aliases)) is not None:
                self.flow_key(name, entry, *flow, aliases)
            elif (scoped := parse_cluster_key(name, aliases)) is not None:
                self.cluster_key(name, entry, *scoped)
            else:
                self.top_level_key(name, entry)

    def flow_key(self, name: str, entry: Entry, src: str, tgt: str, setting: str, aliases: list[str]) -> None:
        for alias in dict.fromkeys((src, tgt)):
            if alias not in aliases:
                self.problem(name, f"names cluster {alias!r}, which 'clusters' does not declare")
        if src == tgt:
            self.problem(name, f"a flow from {src} to itself is not possible")
        settings = self.flows.setdefault((src, tgt), _Settings())
        settings.raw[setting] = entry.value
        if self.setting(settings, name, setting, entry.value):
            return
        self.check_class(name, setting, entry)
        self.note_unsupported(name, setting, entry)
        if clients.flow_level_nowhere(setting):
            self.client_notes[name] = clients.NOWHERE_FLOW
        if not ACCEPTED.fullmatch(setting):
            self.unknown.append(name)

    def cluster_key(self, name: str, entry: Entry, alias: str, setting: str) -> None:
        if setting == "bootstrap.servers":
            self.bootstrap[alias] = ",".join(split_list(entry.value))
            return
        if setting.startswith(_REGISTRY_PREFIX):  # mm2py.schemas: not a Kafka client setting
            self.registries.setdefault(alias, {})[setting.removeprefix(_REGISTRY_PREFIX)] = entry.value.strip()
            return
        if setting in FLOW_KEYS_BY_NAME or setting in DEPRECATED_NAMES:
            self.misplaced.append(name)
            self.unknown.append(name)
            return
        if WORKER_KEY.fullmatch(setting):
            self.check_class(name, setting, entry)
            self.note_unsupported(name, setting, entry)
            return
        if setting in ("auto.offset.reset", _RESET_KEY):
            self.parse(AUTO_OFFSET_RESET, name, entry.value)
        if clients.worker_only(setting):
            self.client_notes[name] = clients.WORKER_ONLY
        self.cluster_clients.setdefault(alias, _Layers()).put(setting, entry.value.strip())

    def top_level_key(self, name: str, entry: Entry) -> None:
        self.top.raw[name] = entry.value
        if self.setting(self.top, name, name, entry.value):
            return
        if clients.top_level_nowhere(name):
            self.client_notes[name] = clients.NOWHERE_TOP
        if name == "metrics.port":
            port = self.parse(METRICS_PORT, name, entry.value)
            self.metrics_port = int(cast(int, port)) if port is not None else None
        elif name == "metrics.bind.address":
            address = self.parse(METRICS_BIND_ADDRESS, name, entry.value)
            self.metrics_bind_address = str(address) if address is not None else self.metrics_bind_address
        elif name == "audit.interval.seconds":
            seconds = self.parse(AUDIT_INTERVAL, name, entry.value)
            self.audit_interval_seconds = float(seconds) if seconds is not None else self.audit_interval_seconds  # type: ignore[arg-type]
        elif name == "shutdown.timeout.ms":
            ms = self.parse(SHUTDOWN_TIMEOUT, name, entry.value)
            self.shutdown_timeout_ms = int(ms) if ms is not None else self.shutdown_timeout_ms  # type: ignore[call-overload]
        elif name.startswith("spark."):
            if name == "spark.speculation" and entry.value.strip().lower() == "true":
                self.problem(name, "a speculative copy task would write its partitions beside the first attempt, "
                                   "out of order and past the exactly-once fence; leave it false")
            self.spark[name] = entry.value.strip()
        elif TOP_LEVEL_CLIENT.fullmatch(name) or name.partition(".")[0] in CLIENT_TYPES:
            if name == _RESET_KEY:
                self.parse(AUTO_OFFSET_RESET, name, entry.value)
            self.top_clients.put(name, entry.value.strip())
        elif not ACCEPTED.fullmatch(name):
            self.unknown.append(name)
        else:
            self.check_class(name, name, entry)
            self.note_unsupported(name, name, entry)

    def check_class(self, name: str, setting: str, entry: Entry) -> None:
        # accepted so that MM2 files load, but a custom class would be ignored: say so
        default = DEFAULT_CLASSES.get(setting)
        if default is not None and entry.value.strip() not in ("", default):
            self.custom_classes[name] = entry.value.strip()

    def note_unsupported(self, name: str, setting: str, entry: Entry) -> None:
        """An MM2 feature mm2py does not have (mm2py.config.support): named, with why, in the warning."""
        support = other_support(setting)
        if support is None or support.status is not Status.WARNED or setting in DEFAULT_CLASSES:
            return
        value = entry.value.strip().lower()
        if setting == SOURCE_SUPPORT and value != "preparing":
            return  # 'enabled'/'required' are honoured (mm2py.config.delivery), 'disabled' asks for nothing
        self.not_supported[name] = support.why

    def setting(self, settings: _Settings, name: str, setting: str, text: str) -> bool:
        """Record a flow setting of one scope; False if ``setting`` is no flow setting."""
        if setting in (_RESET_KEY, "source.consumer.auto.offset.reset") and settings is not self.top:
            self.parse(AUTO_OFFSET_RESET, name, text)  # the value is the replication consumer's (flow())
            return True
        key = FLOW_KEYS_BY_NAME.get(setting)
        deprecated = key is None
        key = key or DEPRECATED_NAMES.get(setting)
        if key is None or key.field is None:
            return False
        value = self.parse(key, name, text)
        earlier = settings.names.get(key.field)
        if value is not None and not (deprecated and earlier in FLOW_KEYS_BY_NAME):
            settings.values[key.field] = value
            settings.names[key.field] = setting
        return True

    # -- pass 2: clusters and flows ----------------------------------------------------------

    def cluster(self, alias: str) -> ClusterConfig:
        top, own = self.top_clients, self.cluster_clients.get(alias, _Layers())
        top_client = {k: v for k, v in top.client.items() if k != "bootstrap.servers"}
        client = {**top_client, **own.client}
        typed = {t: frozen_map({**top_client, **top.typed[t], **own.client, **own.typed[t]}) for t in CLIENT_TYPES}
        bootstrap = self.bootstrap.get(alias) or ",".join(split_list(top.client.get("bootstrap.servers", "")))
        return ClusterConfig(alias=alias, bootstrap_servers=bootstrap, client=frozen_map(client), **typed,
                             schema_registry=frozen_map(self.registries.get(alias, {})))

    def client_spellings(self) -> clients.Spellings:
        if self.spellings is None:
            top = {k: v for k, v in self.top_clients.client.items() if k != "bootstrap.servers"}
            per_cluster = {alias: {**own.client, **{f"{t}.{k}": v for t, typed in own.typed.items()
                                                    for k, v in typed.items()}}
                           for alias, own in self.cluster_clients.items()}
            per_flow = {pair: {k: v.strip() for k, v in scoped.raw.items()} for pair, scoped in self.flows.items()}
            self.spellings = clients.Spellings(top, per_cluster, per_flow)
        return self.spellings

    def flow(self, src: ClusterConfig, tgt: ClusterConfig) -> FlowConfig:
        scoped = self.flows.get((src.alias, tgt.alias), _Settings())
        values = {k.field: k.default for k in (*FLOW_KEYS, AUTO_OFFSET_RESET) if k.field}
        values.update(self.top.values)
        values.update(scoped.values)
        # every client of the flow with MM2's precedence (mm2py.config.clients)
        location = str(values["checkpoints.offset_syncs_topic_location"])
        routed = clients.flow_clients(self.client_spellings(), src.alias, tgt.alias, location)
        reset = routed.replication_consumer.get("auto.offset.reset")
        if reset is not None and reset.value.strip().lower() in AUTO_OFFSET_RESET.choices:
            values["delivery.auto_offset_reset"] = reset.value.strip().lower()

        def settings(layer: clients.Layer) -> Mapping[str, str]:
            return frozen_map(clients.values(layer))

        source = replace(src, consumer=settings(routed.replication_consumer), producer=settings(routed.source_producer),
                         admin=settings(routed.source_admin))
        target = replace(tgt, consumer=settings(routed.checkpoints_consumer), producer=settings(routed.data_producer),
                         admin=settings(routed.target_admin))
        syncs = replace(tgt if location == "target" else src, consumer=settings(routed.offset_syncs_consumer),
                        producer=settings(routed.offset_syncs_producer), admin=settings(routed.offset_syncs_admin))
        self.routed[(src.alias, tgt.alias)] = routed
        raw = {**self.top.raw, **scoped.raw}
        return build_flow(source, target, values, raw=frozen_map(raw), offset_syncs=syncs)

    def enabled_line(self, flow: FlowConfig) -> int | None:
        for name in (f"{flow.name}.enabled", "enabled"):
            if name in self.entries:
                return self.entries[name].line
        return None

    def check_bootstrap(self, flows: Iterable[FlowConfig]) -> None:
        reported: set[str] = set()
        for flow in flows:
            for cluster in (flow.source, flow.target):
                if cluster.bootstrap_servers or cluster.alias in reported:
                    continue
                reported.add(cluster.alias)
                key = f"{cluster.alias}.bootstrap.servers"
                self.problem(key, f"missing: flow {flow.name} (enabled at this line) needs the brokers of "
                                  f"{cluster.alias}, e.g. '{key} = host:9092'", self.enabled_line(flow))

    def check_filters(self, flows: Iterable[FlowConfig]) -> None:
        """Load, build and configure each flow's filter and policy classes now: one that cannot is
        refused, key and line.

        Keys of their own the filter classes read in ``configure`` are no longer unknown.
        """
        reported: set[tuple[str, str]] = set()
        for flow in flows:
            try:
                load_policy(flow.naming.replication_policy_class, separator=flow.naming.replication_policy_separator,
                            internal_topic_separator_enabled=flow.naming.internal_topic_separator_enabled,
                            source_cluster_alias=flow.source.alias)
            except ConfigError as e:
                scoped = self.flows.get((flow.source.alias, flow.target.alias), _Settings()).names
                scoped_class = "naming.replication_policy_class" in scoped
                name = f"{flow.name}.{POLICY_CLASS_KEY}" if scoped_class else POLICY_CLASS_KEY
                for problem in e.problems:
                    if (name, problem.message) not in reported:
                        reported.add((name, problem.message))
                        self.problem(name, problem.message)
            for kind in FILTER_KINDS.values():
                field_name = _field_of(kind.key)
                class_name = flow_value(flow, field_name)
                used: set[str] = set()
                try:
                    if not is_default(kind, class_name):
                        load_filter(kind, class_name, filter_props(flow), used)
                        read = {*used, *(f"{flow.name}.{k}" for k in used)}
                        self.unknown = [k for k in self.unknown if k not in read]
                except ConfigError as e:
                    scoped = self.flows.get((flow.source.alias, flow.target.alias), _Settings()).names
                    name = f"{flow.name}.{kind.key}" if field_name in scoped else kind.key
                    for problem in e.problems:
                        if (name, problem.message) not in reported:
                            reported.add((name, problem.message))
                            self.problem(name, problem.message if name != kind.key else
                                         f"{problem.message} (flow {flow.name})")

    def check_clients(self, flows: Iterable[FlowConfig]) -> None:
        """Refuse client settings mm2py cannot honour safely; note the ones a client does not apply."""
        found = clients.review(*(self.routed[(flow.source.alias, flow.target.alias)] for flow in flows))
        for key, why in found.warned.items():
            self.client_notes.setdefault(key, why)
        for key, why in found.refused.items():
            self.problem(key, why)

    def warn(self) -> None:
        """One WARNING for everything the file says that mm2py will not do as written, grouped, each with why.

        ``keys``: unknown keys (ignored); ``settings``: client settings no client applies (MM2's
        routing, or no equivalent in mm2py's clients); ``not_supported``: MM2 features mm2py has
        not (the REST server, exactly-once, a custom admin class).
        """
        groups: dict[str, object] = {}
        if self.unknown:
            groups["keys"] = self.unknown
        if self.misplaced:
            groups["hint"] = ("flow settings under a cluster alias have no effect in MM2; "
                              "scope them to a flow ('{src}->{tgt}.<key>') or the top level")
        if self.client_notes:
            groups["settings"] = dict(sorted(self.client_notes.items()))
        not_supported = dict(self.not_supported)
        forwarding = other_support("forwarding.admin.class")
        for name, value in self.custom_classes.items():
            not_supported[name] = f"{value}: {forwarding.why if forwarding else 'not loaded'}"
        if not_supported:
            groups["not_supported"] = dict(sorted(not_supported.items()))
        if groups:
            log.warning("configuration mm2py does not apply as written (each with why; docs/configuration.md)",
                        source=self.source, **groups)


def _field_of(key: str) -> str:
    """The FlowConfig path (mm2py.config.model) the flow key ``key`` fills; every filter class key fills one."""
    field = FLOW_KEYS_BY_NAME[key].field
    if field is None:
        raise AssertionError(f"flow key {key} fills no FlowConfig field")
    return field


def _running(flows: Iterable[FlowConfig], enabled: set[tuple[str, str]]) -> tuple[FlowConfig, ...]:
    """The flows that run: the enabled ones and, for heartbeats only, their reverses (MM2 creates their herders)."""
    return tuple(f for f in flows if f.enabled or (
        f.heartbeats.emit_heartbeats_enabled and (f.target.alias, f.source.alias) in enabled))


def resolve(entries: Mapping[str, Entry], source: str | None = None) -> MirrorMakerConfig:
    """Resolve and validate parsed entries; raise one ConfigError listing every problem."""
    r = _Resolver(entries, source)
    aliases = r.aliases()
    r.classify(aliases)
    clusters = {alias: r.cluster(alias) for alias in aliases}
    flows = [r.flow(clusters[a], clusters[b]) for a in aliases for b in aliases if a != b]
    enabled = {(f.source.alias, f.target.alias) for f in flows if f.enabled}
    if len(aliases) == 1 and r.top.values.get("enabled"):
        r.problem("enabled", f"'clusters' declares only {aliases[0]}; a flow needs a source and a target")
    r.check_bootstrap(f for f in flows if f.enabled)
    r.check_filters(f for f in flows if f.enabled)
    r.check_clients(_running(flows, enabled))
    if r.problems:
        r.problems.sort(key=lambda p: (p.line is None, p.line or 0))
        raise ConfigError(r.problems)
    r.warn()
    kept = _running(flows, enabled)
    return MirrorMakerConfig(
        clusters=frozen_map(clusters),
        flows=kept,
        spark=frozen_map(r.spark),
        metrics_port=r.metrics_port,
        metrics_bind_address=r.metrics_bind_address,
        audit_interval_seconds=r.audit_interval_seconds,
        shutdown_timeout_ms=r.shutdown_timeout_ms,
        source_path=source,
        unknown_keys=tuple(r.unknown),
    )


__all__ = ["parse_cluster_key", "parse_flow_key", "resolve"]
