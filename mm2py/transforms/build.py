"""A flow's transform keys to its ``Chain``, and the start check that refuses what cannot run."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import partial

from mm2py.config.model import FlowConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.flow_policy import policy_for
from mm2py.routing import REGEX_ROUTER, routers_of
from mm2py.schemas.settings import carries_schemas
from mm2py.transforms.batch import BatchLink
from mm2py.transforms.chain import Chain, Link, Predicate, Transform, TransformError
from mm2py.transforms.connect import (
    CONNECT,
    JAVA,
    NEED_SCHEMA,
    PREDICATES,
    drop_headers,
    filter_all,
    has_header,
    insert_header_for,
    tombstone,
    topic_matches,
)
from mm2py.transforms.decoded import SourceRegistry
from mm2py.transforms.python import python_transform
from mm2py.transforms.timestamp_router import TIMESTAMP_ROUTER, timestamp_router_of
from mm2py.transforms.tolerance import error_policy


def _keys_of(raw: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k.removeprefix(prefix): v.strip() for k, v in raw.items() if k.startswith(prefix)}


def _names(raw: Mapping[str, str], key: str) -> list[str]:
    return [n.strip() for n in raw.get(key, "").split(",") if n.strip()]


def _predicate(raw: Mapping[str, str], name: str) -> tuple[Predicate, bool]:
    """Predicate ``name`` and whether it is decided by the topic alone."""
    own = _keys_of(raw, f"predicates.{name}.")
    kind = own.get("type", "")
    key = f"predicates.{name}.type"
    if kind == PREDICATES + "TopicNameMatches":
        try:
            return topic_matches(re.compile(own.get("pattern", ""))), True
        except re.error as e:
            raise TransformError(f"predicates.{name}.pattern", f"no regular expression: {e}") from None
    if kind == PREDICATES + "HasHeaderKey":
        if not own.get("name"):
            raise TransformError(f"predicates.{name}.name", "required: the header key")
        return has_header(own["name"]), False
    if kind == PREDICATES + "RecordIsTombstone":
        return tombstone, False
    if not kind:
        raise TransformError(key, f"missing: predicate {name!r} is listed in 'predicates'")
    raise TransformError(key, f"{kind}: mm2py implements TopicNameMatches, HasHeaderKey and "
                         "RecordIsTombstone (org.apache.kafka.connect.transforms.predicates)")


def _transform(own: Mapping[str, str], name: str, registry: SourceRegistry | None) -> Transform:
    kind = own.get("type", "")
    key = f"transforms.{name}.type"
    short = kind.removeprefix(CONNECT).split("$")[0]
    if kind == CONNECT + "Filter":
        return filter_all
    if kind == CONNECT + "DropHeaders":
        headers = frozenset(n.strip() for n in own.get("headers", "").split(",") if n.strip())
        if not headers:
            raise TransformError(f"transforms.{name}.headers", "required: the header names to drop")
        return drop_headers(headers)
    if kind == CONNECT + "InsertHeader":
        return insert_header_for(own, name)
    if not kind:
        raise TransformError(key, f"missing: transform {name!r} is listed in 'transforms'")
    if not kind.startswith(JAVA):
        return python_transform(own, name, kind, registry)
    if kind.startswith(CONNECT) and short in NEED_SCHEMA:
        raise TransformError(key, f"{kind} needs a schema, and MM2 copies bytes (ByteArrayConverter): "
                             "it fails on every record in MM2 too")
    raise TransformError(key, f"{kind}: mm2py implements Filter, DropHeaders, InsertHeader, RegexRouter and "
                         "TimestampRouter "
                         "(org.apache.kafka.connect.transforms) and Python classes by dotted path, "
                         "and refuses any other class")


def _routers(raw: Mapping[str, str]) -> int:
    """Check the flow's RegexRouter links (``mm2py.routing``); the position after the last one in ``transforms``."""
    try:
        routers = routers_of(raw)
    except ConfigError as e:
        problem = e.problems[0]
        raise TransformError(problem.key or "transforms", problem.message) from None
    names = _names(raw, "transforms")
    return max((names.index(r.name) + 1 for r in routers), default=0)


def chain_for(raw: Mapping[str, str], registry: SourceRegistry | None = None) -> Chain:
    """The chain ``raw`` (a flow's merged keys, ``FlowConfig.raw``) configures; raises ``TransformError``.

    ``registry``: the flow's source registry, for Python transforms on decoded values
    (``mm2py.transforms.decoded``): a ``schemas.mode = translate`` flow's (``source_registry``).

    RegexRouter links rename the remote topic (``mm2py.flow_policy``) and are not in the chain:
    every link sees the routed name. A link before a RegexRouter that could tell names apart (a
    ``TopicNameMatches`` predicate, a Python transform) would see another name in MM2: refused.
    A TimestampRouter is not in the chain either (``mm2py.transforms.timestamp_router``): the
    links before its ``position`` see the remote topic's name, those after it the record's window
    topic (``mm2py.source.copy.time_routing``), as in Connect.
    """
    predicates = {name: _predicate(raw, name) for name in _names(raw, "predicates")}
    routed_after = _routers(raw)
    timestamp_router_of(raw)
    links = []
    for position, name in enumerate(_names(raw, "transforms")):
        own = _keys_of(raw, f"transforms.{name}.")
        if own.get("type") in (REGEX_ROUTER, TIMESTAMP_ROUTER):
            continue
        transform = _transform(own, name, registry)
        predicate_name = own.get("predicate", "")
        if predicate_name and predicate_name not in predicates:
            raise TransformError(f"transforms.{name}.predicate", f"{predicate_name} is not listed in 'predicates'")
        negate = own.get("negate", "false").lower()
        if negate not in ("true", "false"):
            raise TransformError(f"transforms.{name}.negate", f"{negate!r}: true or false")
        predicate, topic_only = predicates[predicate_name] if predicate_name else (None, False)
        if position < routed_after and (topic_only or not own.get("type", "").startswith(JAVA)):
            key = f"transforms.{name}.predicate" if topic_only else f"transforms.{name}.type"
            raise TransformError(key, "a link before a RegexRouter that reads the topic name (TopicNameMatches, a "
                                 "Python transform): mm2py hands every link the routed name; list it after the router")
        batch = transform.run if isinstance(transform, BatchLink) else None
        links.append(Link(name, transform, predicate, negate == "true", topic_only, batch))
    return Chain(tuple(links))


def source_registry(flow: FlowConfig) -> SourceRegistry | None:
    """The source registry decoded transforms of ``flow`` read with: a ``schemas.mode = translate`` flow's."""
    if flow.schemas.mode != "translate":
        return None
    heartbeats, separator = policy_for(flow).heartbeats_topic(), flow.naming.replication_policy_separator
    return SourceRegistry(flow.source.alias, flow.source.schema_registry,
                          partial(carries_schemas, heartbeats=heartbeats, separator=separator))


def flow_chain(flow: FlowConfig) -> Chain:
    """``flow``'s chain (``chain_for`` of its keys and its source registry), as its copy tasks build it."""
    return chain_for(flow.raw, source_registry(flow))


def transform_keys(raw: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The keys of ``raw`` that configure transforms and predicates: what a copy task rebuilds its chain from."""
    return tuple(sorted((k, v) for k, v in raw.items()
                        if k in ("transforms", "predicates") or k.startswith(("transforms.", "predicates."))))


def refusal(raw: Mapping[str, str], *, provenance: bool, rehash: bool) -> str | None:
    """Why a flow's transforms cannot run with its other settings (None: they can, or there are none).

    ``schemas.mode = translate`` runs them: the chain first, then the kept records' ids translated
    (``mm2py.source.copy.translating_writer``).
    """
    if not _names(raw, "transforms"):
        return None
    if provenance:
        return "transforms on a flow of an identity cycle (provenance) are not supported"
    if rehash:
        return "transforms with partition.mismatch = hash are not supported"
    return None


def _on_cycle(flow: FlowConfig, flows: list[FlowConfig]) -> bool:
    """Whether ``flow``'s target reaches its source through ``flows``."""
    seen, todo = set(), [flow.target.alias]
    while todo:
        alias = todo.pop()
        if alias == flow.source.alias:
            return True
        if alias not in seen:
            seen.add(alias)
            todo += [f.target.alias for f in flows if f.source.alias == alias]
    return False


def _timestamp_refusals(flow: FlowConfig, flows: list[FlowConfig]) -> list[ConfigProblem]:
    """What a flow's TimestampRouter cannot run with, each naming its key.

    Its records go to window topics through a producer of their own (``mm2py.source.copy.time_routing``):
    outside any transaction (so not with ``exactly.once``), without schema id translation, and
    with names cycle detection may not trace back (so not on a cycle, as a RegexRouter).
    """
    router = timestamp_router_of(flow.raw)
    if router is None:
        return []
    key, where = f"transforms.{router.name}.type", f"(flow {flow.name})"
    problems = []
    if flow.delivery.exactly_once != "off":
        mode = f"{flow.delivery.exactly_once_key or 'exactly-once'} = {flow.delivery.exactly_once}"
        problems.append(ConfigProblem(key, f"TimestampRouter with exactly-once delivery ({mode}): "
                                      "window topics are written outside the task's transaction, and a source "
                                      f"offset has no single remote offset to commit with it {where}"))
    if flow.schemas.mode == "translate":
        problems.append(ConfigProblem(key, f"TimestampRouter with schemas.mode = translate is not supported {where}"))
    if _on_cycle(flow, flows):
        problems.append(ConfigProblem(key, "a TimestampRouter on a flow of a cycle: a window topic's name may hide "
                                      f"its source alias from cycle detection {where}"))
    return problems


def check_flows(flows: Iterable[FlowConfig], provenance: Callable[[FlowConfig], bool]) -> None:
    """Refuse, before Spark starts, every flow whose transforms cannot run; one ConfigError naming each key.

    A RegexRouter on a flow of a cycle is refused: a routed name may lose the source alias that
    cycle detection (``is_cycle``) reads, and the flows round the cycle would copy it home again.
    """
    problems: list[ConfigProblem] = []
    flows = list(flows)
    for flow in flows:
        try:
            flow_chain(flow)
            error_policy(flow.raw)
        except TransformError as e:
            problems.append(ConfigProblem(e.key, f"{e.reason} (flow {flow.name})"))
            continue
        routers = routers_of(flow.raw)
        if routers and _on_cycle(flow, flows):
            problems.append(ConfigProblem(f"transforms.{routers[0].name}.type", "a RegexRouter on a flow of a cycle: "
                                          "a routed name may lose the source alias that cycle detection reads, so "
                                          f"the flows back would copy it home again (flow {flow.name})"))
        problems += _timestamp_refusals(flow, flows)
        why = refusal(flow.raw, provenance=provenance(flow), rehash=flow.delivery.partition_mismatch == "hash")
        if why is not None:
            problems.append(ConfigProblem("transforms", f"{why} (flow {flow.name})"))
    if problems:
        raise ConfigError(problems)
