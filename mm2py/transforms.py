"""MM2's connector transforms (Kafka Connect SMTs) on the mirrored records: the keys, the chain, the built-ins.

An MM2 file names a chain with ``transforms = a, b`` and configures each link with
``transforms.<name>.type`` and the transform's own keys, ``transforms.<name>.predicate`` and
``.negate``; predicates likewise under ``predicates``. Top level and ``A->B.`` keys merge key by
key, the flow's winning (``FlowConfig.raw``), as they reach MM2's connectors.

Records are transformed as MM2's source connector hands them to Connect: bytes, already named
for the remote topic (so ``TopicNameMatches`` sees ``A.orders``), headers as they came.

A ``transforms.<name>.type`` outside ``org.apache.kafka.`` is a Python class by dotted path
(``mypkg.module.ClassName``): the contract is ``RecordTransform``. It is imported and constructed
at start, so a path that does not import, a missing class or a constructor that refuses its keys
stops the start naming the key.

Invariants:
- a chain runs its links in the order ``transforms`` lists them; a link with a predicate runs
  only where the predicate holds (``negate`` inverts it); a record dropped by a link reaches no
  later link;
- a transform or predicate class mm2py does not implement is refused at start, naming the key
  (``TransformError``): never skipped;
- transforms are pure functions of the record: no I/O, no state across records (Connect's
  built-ins are; a Python transform promises it, ``RecordTransform``);
- a Python transform that raises, or returns anything but a ``Record`` or None, fails the copy
  with ``LinkFailed`` (the writer names the flow and the record: ``TransformFailedError``),
  never a skipped record.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from mm2py.config.model import FlowConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.kafka.batches import Record as Record  # re-exported: the record a RecordTransform gets

_JAVA = "org.apache.kafka."
_CONNECT = "org.apache.kafka.connect.transforms."
_PREDICATES = _CONNECT + "predicates."
# Connect transforms that need a schema: with MM2's ByteArrayConverter they fail on every record
_NEED_SCHEMA = ("MaskField", "ReplaceField", "InsertField", "Cast", "ExtractField", "Flatten", "HoistField",
                "ValueToKey", "SetSchemaMetadata", "TimestampConverter", "HeaderFrom")
# Connect transforms that rename the remote topic: not yet composed with policies, checkpoints, failover
_ROUTERS = ("RegexRouter", "TimestampRouter")

Transform = Callable[[str, Record], Record | None]
Predicate = Callable[[str, Record], bool]
# a link's own keys that configure the chain, not the transform (left out of a Python transform's config)
_CHAIN_KEYS = ("type", "predicate", "negate")


class RecordTransform(Protocol):
    """A Python transform, named ``transforms.<name>.type = mypkg.module.ClassName``.

    Construction: ``ClassName(config)``, ``config`` a ``dict[str, str]`` of the link's own keys
    without ``transforms.<name>.`` and without ``type``, ``predicate`` and ``negate``
    (``transforms.mask.keep = 4`` gives ``{"keep": "4"}``); values as the file has them, stripped.
    Raise to refuse the keys: the start stops naming ``transforms.<name>.type``. mm2py constructs
    it at start (to check it) and again in every copy task (it is never pickled).

    Call: ``transform(topic, record)`` for each record of a topic the link may touch (its
    predicate, if any, held), in source order per partition. ``topic`` is the remote topic name
    (``A.orders``, as Connect's transforms see it); ``record`` a frozen ``mm2py.transforms.Record``
    (``offset``, ``timestamp`` ms, ``key`` and ``value`` bytes or None, ``headers`` a tuple of
    ``(str, bytes | None)``). Return the record, changed with ``dataclasses.replace`` (key, value,
    headers, timestamp; the offset is the source's whatever it returns), or None to drop it.

    Promises: a pure function of the record, no state across records and no I/O; a task retried
    or a flow restarted hands the same records again. An exception, or a return that is not a
    ``Record`` or None, fails the flow naming it, the transform and the record (flow, topic,
    partition, offset): the record is never skipped.
    """

    def __call__(self, topic: str, record: Record) -> Record | None: ...


class LinkFailed(Exception):
    """A Python transform raised or returned what is not a record; ``link`` its name, ``path`` its class."""

    def __init__(self, link: str, path: str, reason: str):
        self.link, self.path, self.reason = link, path, reason
        super().__init__(f"transform {link!r} ({path}) {reason}")


class TransformError(ConfigError):
    """A transform or predicate key mm2py cannot honour; ``key`` as the flow sees it (``transforms.x.type``)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.reason = message
        super().__init__(ConfigProblem(key, message))


@dataclass(frozen=True)
class Link:
    """One transform of a chain, with its predicate (None: every record) and ``negate``."""

    name: str
    transform: Transform
    predicate: Predicate | None = None
    negate: bool = False
    topic_only: bool = False  # the predicate looks at the topic alone (decidable per topic)

    def applies(self, topic: str, record: Record) -> bool:
        if self.predicate is None:
            return True
        return self.predicate(topic, record) != self.negate


@dataclass(frozen=True)
class Chain:
    """A flow's transforms in order. Picklable only through ``chain_for`` (rebuilt from the flow's keys)."""

    links: tuple[Link, ...] = ()

    def for_topic(self, topic: str) -> Chain:
        """The links that may touch records of remote topic ``topic`` (topic-decided predicates resolved)."""
        probe = Record(0, 0, None, b"", ())
        return Chain(tuple(link for link in self.links if not link.topic_only or link.applies(topic, probe)))

    def apply(self, topic: str, record: Record, counts: dict[str, list[int]] | None = None) -> Record | None:
        """``record`` through every link (None: dropped).

        ``counts``, when given, gains per link name ``[in, out, dropped, failed]``: a record is *in*
        where it reaches the link (no earlier link dropped it), then exactly one of out (passed on:
        the predicate did not hold, or a record came back), dropped (None) or failed (``LinkFailed``,
        re-raised), so in = out + dropped + failed.
        """
        current: Record | None = record
        for link in self.links:
            if current is None:
                return None
            tally = None
            if counts is not None:
                tally = counts.get(link.name)
                if tally is None:
                    tally = counts[link.name] = [0, 0, 0, 0]
                tally[0] += 1
            if link.applies(topic, current):
                try:
                    current = link.transform(topic, current)
                except LinkFailed:
                    if tally is not None:
                        tally[3] += 1
                    raise
            if tally is not None:
                tally[1 if current is not None else 2] += 1
        return current


def _filter(_topic: str, _record: Record) -> Record | None:
    return None


def _drop_headers(names: frozenset[str]) -> Transform:
    def drop(_topic: str, record: Record) -> Record:
        return replace(record, headers=tuple(h for h in record.headers if h[0] not in names))
    return drop


def _insert_header(name: str, value: bytes | None) -> Transform:
    def insert(_topic: str, record: Record) -> Record:
        return replace(record, headers=(*record.headers, (name, value)))
    return insert


def _topic_matches(pattern: re.Pattern[str]) -> Predicate:
    return lambda topic, _record: pattern.fullmatch(topic) is not None


def _has_header(name: str) -> Predicate:
    return lambda _topic, record: any(h[0] == name for h in record.headers)


def _tombstone(_topic: str, record: Record) -> bool:
    return record.value is None


def _keys_of(raw: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k.removeprefix(prefix): v.strip() for k, v in raw.items() if k.startswith(prefix)}


def _names(raw: Mapping[str, str], key: str) -> list[str]:
    return [n.strip() for n in raw.get(key, "").split(",") if n.strip()]


def _predicate(raw: Mapping[str, str], name: str) -> tuple[Predicate, bool]:
    """Predicate ``name`` and whether it is decided by the topic alone."""
    own = _keys_of(raw, f"predicates.{name}.")
    kind = own.get("type", "")
    key = f"predicates.{name}.type"
    if kind == _PREDICATES + "TopicNameMatches":
        try:
            return _topic_matches(re.compile(own.get("pattern", ""))), True
        except re.error as e:
            raise TransformError(f"predicates.{name}.pattern", f"no regular expression: {e}") from None
    if kind == _PREDICATES + "HasHeaderKey":
        if not own.get("name"):
            raise TransformError(f"predicates.{name}.name", "required: the header key")
        return _has_header(own["name"]), False
    if kind == _PREDICATES + "RecordIsTombstone":
        return _tombstone, False
    if not kind:
        raise TransformError(key, f"missing: predicate {name!r} is listed in 'predicates'")
    raise TransformError(key, f"{kind}: mm2py implements TopicNameMatches, HasHeaderKey and "
                         "RecordIsTombstone (org.apache.kafka.connect.transforms.predicates)")


def _transform(own: Mapping[str, str], name: str) -> Transform:
    kind = own.get("type", "")
    key = f"transforms.{name}.type"
    short = kind.removeprefix(_CONNECT).split("$")[0]
    if kind == _CONNECT + "Filter":
        return _filter
    if kind == _CONNECT + "DropHeaders":
        headers = frozenset(n.strip() for n in own.get("headers", "").split(",") if n.strip())
        if not headers:
            raise TransformError(f"transforms.{name}.headers", "required: the header names to drop")
        return _drop_headers(headers)
    if kind == _CONNECT + "InsertHeader":
        return _insert_header_for(own, name)
    if not kind:
        raise TransformError(key, f"missing: transform {name!r} is listed in 'transforms'")
    if not kind.startswith(_JAVA):
        return _python_transform(own, name, kind)
    if kind.startswith(_CONNECT) and short in _NEED_SCHEMA:
        raise TransformError(key, f"{kind} needs a schema, and MM2 copies bytes (ByteArrayConverter): "
                             "it fails on every record in MM2 too")
    if kind.startswith(_CONNECT) and short in _ROUTERS:
        raise TransformError(key, f"{kind}: renaming remote topics by transform is not supported yet; "
                             "replication.policy.class names them")
    raise TransformError(key, f"{kind}: mm2py implements Filter, DropHeaders and InsertHeader "
                         "(org.apache.kafka.connect.transforms) and Python classes by dotted path, "
                         "and refuses any other class")


def _python_transform(own: Mapping[str, str], name: str, path: str) -> Transform:
    """The ``RecordTransform`` at ``path``, constructed with the link's keys, its returns checked."""
    key = f"transforms.{name}.type"
    module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise TransformError(key, f"{path!r}: not a Python class path (package.module.ClassName)")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except ImportError as e:
        raise TransformError(key, f"{path}: cannot import module {module_name!r}: {e} (mm2py runs Connect's "
                             "Filter, DropHeaders, InsertHeader and Python classes; another Java transform "
                             "needs a Python port)") from None
    except AttributeError:
        raise TransformError(key, f"{path}: module {module_name!r} has no {attr!r}") from None
    except Exception as e:  # a user module failing at import is a configuration problem
        raise TransformError(key, f"{path}: importing module {module_name!r} failed: "
                             f"{type(e).__name__}: {e}") from None
    if not isinstance(cls, type):
        raise TransformError(key, f"{path}: not a class (mm2py.transforms.RecordTransform)")
    config = {k: v for k, v in own.items() if k not in _CHAIN_KEYS}
    try:
        instance = cls(config)
    except Exception as e:
        # the keys, not their values: a value may be a secret
        raise TransformError(key, f"{path} built with the keys {sorted(config)} raised "
                             f"{type(e).__name__}: {e}") from None
    if not callable(instance):
        raise TransformError(key, f"{path}: its instances are not callable as (topic, record) "
                             "(mm2py.transforms.RecordTransform)")
    return _checked(name, path, instance)


def _checked(name: str, path: str, transform: RecordTransform) -> Transform:
    def run(topic: str, record: Record) -> Record | None:
        try:
            out = transform(topic, record)
        except Exception as e:
            raise LinkFailed(name, path, f"raised {type(e).__name__}: {e}") from e
        if out is None:
            return None
        if not isinstance(out, Record):
            raise LinkFailed(name, path, f"returned {type(out).__name__}, not a Record or None")
        if not (isinstance(out.key, bytes | None) and isinstance(out.value, bytes | None)
                and isinstance(out.timestamp, int) and isinstance(out.headers, tuple)
                and all(isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str)
                        and isinstance(h[1], bytes | None) for h in out.headers)):
            raise LinkFailed(name, path, "returned a Record whose key or value is not bytes or None, timestamp "
                             "not an int, or headers not a tuple of (str, bytes or None)")
        return out
    return run


def _insert_header_for(own: Mapping[str, str], name: str) -> Transform:
    """Connect's InsertHeader as MM2 runs it: the header appended (existing ones of that name stay).

    Connect parses ``value.literal`` into a typed value (``Values.parseString``: a string, number,
    boolean, list, map) and MM2's header converter, ByteArrayConverter, refuses every typed value:
    "Invalid schema type for ByteArrayConverter: STRING", failing MM2's task on the first record.
    Only the literal ``null`` (a header without a value) copies, so only it is accepted.
    """
    if "header" not in own:
        raise TransformError(f"transforms.{name}.header", "required: the name of the header to insert")
    if "value.literal" not in own:
        raise TransformError(f"transforms.{name}.value.literal", "required: the header's value")
    literal = own["value.literal"]
    if literal != "null":
        raise TransformError(f"transforms.{name}.value.literal",
                             f"{literal!r}: Connect parses it to a typed value, which MM2's header converter "
                             "(ByteArrayConverter) refuses on every record (\"Invalid schema type for "
                             "ByteArrayConverter\"); only null (a header without a value) is copied by MM2; a Python "
                             "transform (mm2py.transforms.RecordTransform) can insert bytes")
    return _insert_header(own["header"], None)


def chain_for(raw: Mapping[str, str]) -> Chain:
    """The chain ``raw`` (a flow's merged keys, ``FlowConfig.raw``) configures; raises ``TransformError``."""
    predicates = {name: _predicate(raw, name) for name in _names(raw, "predicates")}
    links = []
    for name in _names(raw, "transforms"):
        own = _keys_of(raw, f"transforms.{name}.")
        transform = _transform(own, name)
        predicate_name = own.get("predicate", "")
        if predicate_name and predicate_name not in predicates:
            raise TransformError(f"transforms.{name}.predicate", f"{predicate_name} is not listed in 'predicates'")
        negate = own.get("negate", "false").lower()
        if negate not in ("true", "false"):
            raise TransformError(f"transforms.{name}.negate", f"{negate!r}: true or false")
        predicate, topic_only = predicates[predicate_name] if predicate_name else (None, False)
        links.append(Link(name, transform, predicate, negate == "true", topic_only))
    return Chain(tuple(links))


def transform_keys(raw: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The keys of ``raw`` that configure transforms and predicates: what a copy task rebuilds its chain from."""
    return tuple(sorted((k, v) for k, v in raw.items()
                        if k in ("transforms", "predicates") or k.startswith(("transforms.", "predicates."))))


def refusal(raw: Mapping[str, str], *, provenance: bool, translate: bool, rehash: bool) -> str | None:
    """Why a flow's transforms cannot run with its other settings (None: they can, or there are none)."""
    if not _names(raw, "transforms"):
        return None
    if provenance:
        return "transforms on a flow of an identity cycle (provenance) are not supported"
    if translate:
        return "transforms with schemas.mode = translate are not supported"
    if rehash:
        return "transforms with partition.mismatch = hash are not supported"
    return None


def check_flows(flows: Iterable[FlowConfig], provenance: Callable[[FlowConfig], bool]) -> None:
    """Refuse, before Spark starts, every flow whose transforms cannot run; one ConfigError naming each key."""
    problems: list[ConfigProblem] = []
    for flow in flows:
        try:
            chain_for(flow.raw)
        except TransformError as e:
            problems.append(ConfigProblem(e.key, f"{e.reason} (flow {flow.name})"))
            continue
        why = refusal(flow.raw, provenance=provenance(flow), translate=flow.schemas.mode == "translate",
                      rehash=flow.delivery.partition_mismatch == "hash")
        if why is not None:
            problems.append(ConfigProblem("transforms", f"{why} (flow {flow.name})"))
    if problems:
        raise ConfigError(problems)
