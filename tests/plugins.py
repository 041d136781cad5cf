"""Plugin classes as an operator writes them, loaded by dotted path (``tests.plugins.X``).

The replicator subprocess of the integration tests runs with the checkout as its working
directory, and Spark's Python workers inherit it, so this module is importable everywhere a
flow builds its filters or its transforms. None of these classes subclasses anything of mm2py's
but the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from mm2py.policy import ReplicationPolicy
from mm2py.transforms import Record


class SuffixTopics:
    """Topic filter: exactly the topics ending with ``filter.topic.suffix`` (default ``.internal``).

    Every other topic is left out, whatever ``topics`` says: the default ``topics.exclude`` would
    keep ``*.internal`` home, and the default ``topics = .*`` would take the rest.
    """

    def __init__(self) -> None:
        self.suffix = ".internal"
        self.props: dict[str, object] = {}

    def configure(self, props: Mapping[str, object]) -> None:
        self.props = dict(props)
        self.suffix = str(props.get("filter.topic.suffix", self.suffix))

    def should_replicate_topic(self, topic: str) -> bool:
        return topic.endswith(self.suffix)


class PrefixGroups:
    """Group filter: exactly the groups starting with ``filter.group.prefix`` (default ``console-consumer-``)."""

    def __init__(self) -> None:
        self.prefix = "console-consumer-"
        self.props: dict[str, object] = {}

    def configure(self, props: Mapping[str, object]) -> None:
        self.props = dict(props)
        self.prefix = str(props.get("filter.group.prefix", self.prefix))

    def should_replicate_group(self, group: str) -> bool:
        return group.startswith(self.prefix)


class NoRetention:
    """Config property filter without ``configure``: copies every topic config but ``retention.*``."""

    def should_replicate_config_property(self, prop: str) -> bool:
        return not prop.startswith("retention.")


class FromSuffix(ReplicationPolicy):
    """Policy: ``orders`` of A is ``orders-from-A`` on the target (hops stack: ``orders-from-A-from-B``)."""

    MARK = "-from-"

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{topic}{self.MARK}{source_cluster_alias}"

    def topic_source(self, topic: str) -> str | None:
        head, mark, alias = topic.rpartition(self.MARK)
        return alias if mark and head and alias else None

    def upstream_topic(self, topic: str) -> str | None:
        head, mark, alias = topic.rpartition(self.MARK)
        return head if mark and head and alias else None


class VaultProvider:
    """Config provider as a vault plug-in is written: ``configure(params)``, ``get(path, keys)``.

    Its "vault" is the ``secrets`` parameter, ``path/key=value`` pairs separated by ``;``; a path
    named ``sealed`` fails as an unreachable vault would.
    """

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, str]] = {}

    def configure(self, params: Mapping[str, str]) -> None:
        for pair in filter(None, params.get("secrets", "").split(";")):
            where, _, value = pair.partition("=")
            path, _, key = where.rpartition("/")
            self.secrets.setdefault(path, {})[key] = value

    def get(self, path: str, keys: set[str] | None = None) -> Mapping[str, str]:
        if path == "sealed":
            raise ConnectionError("vault is sealed")
        found = self.secrets.get(path, {})
        return {k: v for k, v in found.items() if keys is None or k in keys}


class MaskDigits:
    """Record transform (``mm2py.transforms.RecordTransform``): digits of the value masked with ``*``
    but the last ``keep`` (default 4), a header ``masked-by`` naming ``by``, and records whose value
    holds ``drop`` (default ``DROP``) or that are tombstones dropped.

    ``fail.offset`` (optional): raise on the records at these source offsets (a comma-separated
    list), as a buggy transform would.
    """

    def __init__(self, config: dict[str, str]) -> None:
        self.keep = int(config.get("keep", "4"))
        self.by = config.get("by", "").encode()
        self.drop = config.get("drop", "DROP").encode()
        self.fail_offsets = {int(o) for o in config.get("fail.offset", "").split(",") if o.strip()}

    def __call__(self, topic: str, record: Record) -> Record | None:
        if record.offset in self.fail_offsets:
            raise ValueError(f"cannot mask {record.value!r}")
        if record.value is None or self.drop in record.value:
            return None
        positions = [i for i, b in enumerate(record.value) if 48 <= b <= 57]
        masked = bytearray(record.value)
        for i in positions[:max(len(positions) - self.keep, 0)]:
            masked[i] = ord("*")
        return replace(record, value=bytes(masked), headers=(*record.headers, ("masked-by", self.by)))


class MaskDigitsArrow:
    """Batch transform (``mm2py.transforms.BatchTransform``, Arrow), vectorised with ``pyarrow.compute``:
    each value's digits masked with ``*`` but those in its last ``keep`` bytes (default 4), and rows
    whose value holds ``drop`` (default ``DROP``) or that are tombstones dropped. Row-wise: a row's
    output depends on that row alone.

    ``fail.offset`` (optional): raise when the batch holds a record at one of these source offsets (a
    comma-separated list), as a transform failing on one bad row of its batch would.
    """

    batch_format = "arrow"

    def __init__(self, config: dict[str, str]) -> None:
        self.keep = int(config.get("keep", "4"))
        self.drop = config.get("drop", "DROP").encode()
        self.fail_offsets = pa.array([int(o) for o in config.get("fail.offset", "").split(",") if o.strip()],
                                     pa.int64())

    def __call__(self, topic: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        if pc.any(pc.is_in(batch.column("offset"), value_set=self.fail_offsets)).as_py():
            raise ValueError(f"cannot mask the batch at offsets {batch.column('offset').to_pylist()[:3]}...")
        value = batch.column("value")
        keep = pc.and_(pc.is_valid(value), pc.invert(pc.fill_null(pc.match_substring(value, self.drop), True)))
        value = value if self.keep == 0 else pc.binary_join_element_wise(
            pc.replace_substring_regex(pc.binary_slice(value, 0, -self.keep), "[0-9]", "*"),
            pc.binary_slice(value, -self.keep), b"")
        masked = batch.set_column(batch.schema.get_field_index("value"), "value", value)
        return masked.filter(keep)


class MaskAvroField:
    """Record transform on decoded Avro values (``mm2py.transforms.DecodedTransform``, ``decoded = True``):
    the value's field ``field`` (default ``email``) replaced with ``mask`` (default ``***``); a value
    without that field raises, as a transform written for one schema would."""

    decoded = True

    def __init__(self, config: dict[str, str]) -> None:
        self.field = config.get("field", "email")
        self.mask = config.get("mask", "***")

    def __call__(self, topic: str, record: Record, value: dict) -> dict | None:
        if self.field not in value:
            raise KeyError(f"no field {self.field!r} in {sorted(value)}")
        return {**value, self.field: self.mask}


class MaskAvroFieldArrow:
    """Arrow batch transform on decoded Avro values (``decoded = True``, ``batch_format = "arrow"``): in the
    struct column ``value``, the field ``field`` (default ``email``) set to ``mask`` (default ``***``) on
    every row that has a value; a batch whose values lack that field raises. Row-wise."""

    batch_format = "arrow"
    decoded = True

    def __init__(self, config: dict[str, str]) -> None:
        self.field = config.get("field", "email")
        self.mask = config.get("mask", "***")

    def __call__(self, topic: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        value = batch.column("value")
        at = value.type.get_field_index(self.field)
        if at < 0:
            raise KeyError(f"no field {self.field!r} in {value.type}")
        children = value.flatten()
        children[at] = pc.if_else(pc.is_valid(children[at]), pa.scalar(self.mask, children[at].type),
                                  pa.scalar(None, children[at].type))
        masked = pa.StructArray.from_arrays(children, fields=list(value.type), mask=pc.is_null(value))
        return batch.set_column(batch.schema.get_field_index("value"), "value", masked)
