"""Kafka Connect's transforms and predicates that mean something on MM2's byte records, as MM2 runs them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from mm2py.transforms.chain import Predicate, Record, Transform, TransformError

JAVA = "org.apache.kafka."
CONNECT = "org.apache.kafka.connect.transforms."
PREDICATES = CONNECT + "predicates."
# Connect transforms that need a schema: with MM2's ByteArrayConverter they fail on every record
NEED_SCHEMA = ("MaskField", "ReplaceField", "InsertField", "Cast", "ExtractField", "Flatten", "HoistField",
                "ValueToKey", "SetSchemaMetadata", "TimestampConverter", "HeaderFrom")
# Connect transforms that rename the remote topic: not yet composed with policies, checkpoints, failover
ROUTERS = ("RegexRouter", "TimestampRouter")


def filter_all(_topic: str, _record: Record) -> Record | None:
    return None


def drop_headers(names: frozenset[str]) -> Transform:
    def drop(_topic: str, record: Record) -> Record:
        return replace(record, headers=tuple(h for h in record.headers if h[0] not in names))
    return drop


def insert_header(name: str, value: bytes | None) -> Transform:
    def insert(_topic: str, record: Record) -> Record:
        return replace(record, headers=(*record.headers, (name, value)))
    return insert


def topic_matches(pattern: re.Pattern[str]) -> Predicate:
    return lambda topic, _record: pattern.fullmatch(topic) is not None


def has_header(name: str) -> Predicate:
    return lambda _topic, record: any(h[0] == name for h in record.headers)


def tombstone(_topic: str, record: Record) -> bool:
    return record.value is None


def insert_header_for(own: Mapping[str, str], name: str) -> Transform:
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
    return insert_header(own["header"], None)
