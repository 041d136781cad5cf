"""From parsed key/value entries to a validated ``MirrorMakerConfig``, as MM2 resolves them.

Resolution (MM2's MirrorMakerConfig): ``clusters`` lists aliases; ``{alias}.bootstrap.servers``
and any other ``{alias}.<client setting>`` configure that cluster's clients, with
``{alias}.consumer.|producer.|admin.`` scoping one client type; a flow setting is
``{src}->{tgt}.key``, else the top-level ``key``, else the default. Every problem is
collected and raised together, each naming its key and line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import structlog

from mm2py.config.keys import (
    ACCEPTED_TOP_LEVEL,
    AUTO_OFFSET_RESET,
    FLOW_KEYS,
    FLOW_KEYS_BY_NAME,
    TOP_LEVEL_CLIENT,
    InvalidValue,
    Key,
)
from mm2py.config.model import ClusterConfig, FlowConfig, MirrorMakerConfig, frozen_map
from mm2py.config.properties import Entry
from mm2py.errors import ConfigError, ConfigProblem

log = structlog.get_logger(__name__)

_FLOW_PREFIX = re.compile(r"^([^.>\s]+?)->([^.>\s]+?)\.(.+)$")
_CLIENT_TYPES = ("consumer", "producer", "admin")


class _Resolver:
    def __init__(self, entries: Mapping[str, Entry], source: str | None):
        self.entries = entries
        self.source = source
        self.problems: list[ConfigProblem] = []
        self.used: set[str] = set()

    def problem(self, key: str | None, message: str) -> None:
        line = self.entries[key].line if key in self.entries else None
        self.problems.append(ConfigProblem(key, message, line, self.source))

    def value(self, key: str) -> str | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        self.used.add(key)
        return entry.value

    # -- clusters ---------------------------------------------------------------------

    def aliases(self) -> list[str]:
        raw = self.value("clusters")
        if raw is None:
            self.problem(None, "missing required key 'clusters' (e.g. 'clusters = A, B')")
            return []
        aliases = [a.strip() for a in raw.split(",") if a.strip()]
        if not aliases:
            self.problem("clusters", "lists no cluster alias")
        for alias in aliases:
            if not re.fullmatch(r"[A-Za-z0-9_\-]+", alias):
                self.problem("clusters", f"alias {alias!r} may only hold letters, digits, '_' and '-'")
        if len(set(aliases)) != len(aliases):
            self.problem("clusters", "lists an alias twice")
        return aliases

    def cluster(self, alias: str) -> ClusterConfig:
        prefix = f"{alias}."
        client: dict[str, str] = {}
        scoped: dict[str, dict[str, str]] = {t: {} for t in _CLIENT_TYPES}
        for key in self.entries:
            if TOP_LEVEL_CLIENT.fullmatch(key):
                client.setdefault(key, self.entries[key].value)
            for t in _CLIENT_TYPES:
                if key.startswith(f"{t}.") and key not in FLOW_KEYS_BY_NAME:
                    scoped[t].setdefault(key[len(t) + 1 :], self.entries[key].value)
        for key, entry in self.entries.items():
            if not key.startswith(prefix):
                continue
            self.used.add(key)
            rest = key[len(prefix) :]
            head, _, tail = rest.partition(".")
            if head in _CLIENT_TYPES and tail:
                scoped[head][tail] = entry.value
            elif rest != "bootstrap.servers":
                client[rest] = entry.value
        bootstrap = self.value(f"{alias}.bootstrap.servers") or ""
        return ClusterConfig(
            alias=alias,
            bootstrap_servers=bootstrap.strip(),
            client=frozen_map(client),
            consumer=frozen_map({**client, **scoped["consumer"]}),
            producer=frozen_map({**client, **scoped["producer"]}),
            admin=frozen_map({**client, **scoped["admin"]}),
        )

    # -- flows ------------------------------------------------------------------------

    def flow_keys_check(self, aliases: list[str]) -> None:
        for key in self.entries:
            m = _FLOW_PREFIX.match(key)
            if not m:
                continue
            self.used.add(key)
            src, tgt, _ = m.groups()
            for alias in (src, tgt):
                if alias not in aliases:
                    self.problem(key, f"flow names cluster {alias!r}, which 'clusters' does not declare")
            if src == tgt:
                self.problem(key, f"a flow from {src} to itself is not possible")

    def setting(self, key: Key, src: str, tgt: str, errors: set[str]) -> object:
        for name in (f"{src}->{tgt}.{key.name}", key.name):
            text = self.value(name)
            if text is None:
                continue
            try:
                return key.parse(text)
            except InvalidValue as e:
                if name not in errors:
                    errors.add(name)
                    self.problem(name, str(e))
                return key.default
        return key.default

    def flow(self, src: ClusterConfig, tgt: ClusterConfig, errors: set[str]) -> FlowConfig:
        a, b = src.alias, tgt.alias
        enabled_key = Key("enabled", "enabled", "bool", "")
        enabled_text = self.value(f"{a}->{b}.enabled")
        enabled = False
        if enabled_text is not None:
            try:
                enabled = bool(enabled_key.parse(enabled_text))
            except InvalidValue as e:
                self.problem(f"{a}->{b}.enabled", str(e))
        values = {k.field: self.setting(k, a, b, errors) for k in FLOW_KEYS}
        reset = src.consumer.get("auto.offset.reset")
        flow_reset = self.value(f"{a}->{b}.consumer.auto.offset.reset")
        for name, text in ((f"{a}->{b}.consumer.auto.offset.reset", flow_reset),
                           (f"{a}.consumer.auto.offset.reset", reset)):
            if text is not None:
                try:
                    values["auto_offset_reset"] = AUTO_OFFSET_RESET.parse(text)
                except InvalidValue as e:
                    if name not in errors:
                        errors.add(name)
                        self.problem(name if name in self.entries else "consumer.auto.offset.reset", str(e))
                break
        raw = {k: e.value for k, e in self.entries.items() if not _FLOW_PREFIX.match(k)}
        raw.update({m.group(3): e.value for k, e in self.entries.items()
                    if (m := _FLOW_PREFIX.match(k)) and m.group(1) == a and m.group(2) == b})
        return FlowConfig(source=src, target=tgt, enabled=enabled, raw=frozen_map(raw), **values)

    def unknown_keys(self, aliases: list[str]) -> tuple[str, ...]:
        unknown = []
        for key in self.entries:
            if key in self.used or key in FLOW_KEYS_BY_NAME or ACCEPTED_TOP_LEVEL.fullmatch(key):
                continue
            if any(key.startswith(f"{a}.") for a in aliases):
                continue
            unknown.append(key)
        return tuple(unknown)


def resolve(entries: Mapping[str, Entry], source: str | None = None) -> MirrorMakerConfig:
    r = _Resolver(entries, source)
    aliases = r.aliases()
    r.flow_keys_check(aliases)
    clusters = {alias: r.cluster(alias) for alias in aliases}
    errors: set[str] = set()
    flows = [r.flow(clusters[a], clusters[b], errors) for a in aliases for b in aliases if a != b]
    enabled = {(f.source.alias, f.target.alias) for f in flows if f.enabled}
    # MM2 runs a herder for the reverse of every enabled flow too (heartbeats only)
    kept = tuple(f for f in flows if f.enabled or (
        (f.target.alias, f.source.alias) in enabled and f.emit_heartbeats_enabled))
    for flow in kept:
        for cluster in (flow.source, flow.target):
            if flow.enabled and not cluster.bootstrap_servers:
                key = f"{cluster.alias}.bootstrap.servers"
                if not any(p.key == key for p in r.problems):
                    r.problem(key, f"missing: flow {flow.name} needs cluster {cluster.alias}'s brokers "
                                   f"(e.g. '{key} = host:9092')")
    metrics_port = None
    if (text := r.value("metrics.port")) is not None:
        try:
            metrics_port = int(text)
            if not 0 < metrics_port < 65536:
                raise ValueError
        except ValueError:
            r.problem("metrics.port", f"expected a TCP port number, got {text!r}")
    if r.problems:
        raise ConfigError(r.problems)
    unknown = r.unknown_keys(aliases)
    if unknown:
        log.warning("unknown configuration keys (ignored)", keys=list(unknown), source=source)
    spark = {k: e.value for k, e in entries.items() if k.startswith("spark.")}
    return MirrorMakerConfig(
        clusters=frozen_map(clusters),
        flows=kept,
        spark=frozen_map(spark),
        metrics_port=metrics_port,
        source_path=source,
        unknown_keys=unknown,
    )
