"""Python transforms on decoded Avro values (``decoded = True``), in a ``schemas.mode = translate`` flow.

A record transform class with ``decoded = True`` (``DecodedTransform``) is called with each record's
value decoded with the source registry's schema: a dict, as fastavro reads it. It returns the new
value (a dict) or None to drop the record; mm2py encodes it with the same writer schema and frames
it with the same source id, and the id translation that follows in the writer
(``mm2py.source.copy.translating_writer``) names the target registry's id for that schema. So the
value is decoded with the source registry and encoded with the target's, and what the transform
returns must fit the schema the value was written with. Keys are handed as they are (bytes).
An Arrow batch transform with ``decoded = True`` gets the decoded values as a struct column
(``DecodedBatchLink``); a pandas one is refused at start.

Invariants:
- a value is decoded with the schema its frame names: the Confluent wire format (magic 0, 4-byte
  id, Avro body), or a bare body with the id in a ``__value_schema_id`` header; the value returned
  is framed the same way, with the same id, headers unchanged;
- a tombstone (value None) passes the link untouched: it has no schema (``RecordIsTombstone`` with
  ``Filter`` drops tombstones);
- a value that is not framed, an id the source registry holds no Avro schema under, a body that
  does not decode, a raise, or a return that is not a dict or None or does not fit the writer
  schema is ``LinkFailed`` naming the link and why (``errors.tolerance`` decides: the flow fails,
  or the record is dead-lettered or skipped); a registry that does not answer raises
  ``SchemaRegistryError`` (the task fails and is retried: no record is at fault);
- parsed schemas are kept per id for the life of the link, built once per copy task;
- a decoded link is refused at start outside a ``schemas.mode = translate`` flow: only that has
  the source registry (``mm2py.transforms.build.source_registry``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

import pyarrow as pa
from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from mm2py.schemas import frames
from mm2py.schemas.decode import RecordDecoder
from mm2py.transforms.batch import BatchLink, to_arrow
from mm2py.transforms.chain import LinkFailed, Record, Transform


@dataclass(frozen=True)
class SourceRegistry:
    """The source cluster's alias, its registry client settings (``{alias}.schema.registry.*``), and
    which remote topics carry schema-framed records (``SchemaSettings.carries_schemas``: not heartbeats)."""

    alias: str
    settings: Mapping[str, str]
    carries_schemas: Callable[[str], bool] = field(default=lambda topic: True)


class DecodedTransform(Protocol):
    """A record transform on decoded Avro values: ``decoded = True``; built as ``RecordTransform``.

    Call: ``transform(topic, record, value)``: ``record`` as ``RecordTransform`` gets it (key,
    value and header bytes), ``value`` its value decoded with the source registry (a dict). Return
    the new value (a dict fitting the writer schema) or None to drop the record. Same promises as
    ``RecordTransform``: pure, no I/O, no state across records.
    """

    decoded: ClassVar[bool]

    def __call__(self, topic: str, record: Record, value: dict[str, Any]) -> dict[str, Any] | None: ...


class AvroValues:
    """Values of one source registry decoded and encoded again; schemas parsed once per id. No I/O here."""

    def __init__(self, registry: SourceRegistry):
        self.alias = registry.alias
        self.carries_schemas = registry.carries_schemas
        self.decoder = RecordDecoder(registry.alias, registry.settings)

    def decoded(self, record: Record) -> tuple[Any, Any]:
        """(writer schema, datum) of ``record``'s value; raises ``ValueError`` saying why it is not Avro."""
        value = record.value
        assert value is not None, "a tombstone passes undecoded"
        carried = next((v for k, v in record.headers if k == frames.VALUE_HEADER), None)
        try:
            schema_id = frames.schema_id(carried if carried is not None else value)
        except frames.FrameError as e:
            raise ValueError(f"the value is not registry-framed Avro: {e}") from None
        parsed = self.decoder.parsed(schema_id)
        if parsed is None:
            raise ValueError(f"schema id {schema_id} names no Avro schema in {self.alias}'s registry")
        body = value if carried is not None else value[frames.PREFIX:]
        try:
            return parsed, schemaless_reader(io.BytesIO(body), parsed, None)
        except (ValueError, EOFError, IndexError, TypeError, KeyError) as e:
            raise ValueError(f"the value does not decode with schema id {schema_id}: {type(e).__name__}: {e}") from e

    @staticmethod
    def encoded(record: Record, parsed: Any, datum: object) -> bytes:
        """``datum`` written with ``parsed`` and framed as ``record``'s value was; ``ValueError`` if it does not fit."""
        if not isinstance(datum, dict):
            raise ValueError(f"returned {type(datum).__name__}, not a dict (the decoded value) or None")
        try:
            validate(datum, parsed, raise_errors=True)
            out = io.BytesIO()
            schemaless_writer(out, parsed, datum)
        except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as e:
            reason = " ".join(str(e).split())
            raise ValueError(f"returned a value that does not fit its writer schema: {reason}") from e
        assert record.value is not None, "a tombstone passes undecoded"
        carried = any(k == frames.VALUE_HEADER for k, _ in record.headers)
        return out.getvalue() if carried else record.value[:frames.PREFIX] + out.getvalue()


def decoded_transform(name: str, path: str, transform: DecodedTransform, values: AvroValues) -> Transform:
    """``transform`` as a chain link over framed records: values decoded, its return encoded back."""

    def run(topic: str, record: Record) -> Record | None:
        if record.value is None or not values.carries_schemas(topic):
            return record
        try:
            parsed, datum = values.decoded(record)
        except ValueError as e:
            raise LinkFailed(name, path, f"cannot decode the value: {e}") from e
        try:
            out = transform(topic, record, datum)
        except Exception as e:
            raise LinkFailed(name, path, f"raised {type(e).__name__}: {e}") from e
        if out is None:
            return None
        try:
            return replace(record, value=values.encoded(record, parsed, out))
        except ValueError as e:
            raise LinkFailed(name, path, str(e)) from e

    return run


class DecodedBatchLink(BatchLink):
    """An Arrow batch transform with ``decoded = True``: the batch's ``value`` column holds the decoded
    values as a struct column (the type pyarrow infers from the batch's dicts: every field any of
    them has, null where a row's schema lacks it), and must come back of that same type. Each row
    it keeps is written back with its record's writer schema, framed as it came. Tombstones pass
    untouched, never in the batch (as with a record transform), and so do heartbeats. A record that does not decode, or
    a row that does not fit its schema, fails the batch, which ``BatchLink.run`` then runs row by
    row: exactly those records fail.
    """

    def __init__(self, name: str, path: str, transform: Any, kind: str, values: AvroValues):
        super().__init__(name, path, transform, kind)
        self.values = values

    def _whole(self, topic: str, records: Sequence[Record]) -> list[Record | LinkFailed | None]:
        framed = [r for r in records if r.value is not None] if self.values.carries_schemas(topic) else []
        if not framed:
            return list(records)
        schemas: dict[int, Any] = {}  # offset -> writer schema
        datums: list[object] = []
        for r in framed:
            try:
                schemas[r.offset], datum = self.values.decoded(r)
            except ValueError as e:
                raise self._fail(f"cannot decode the value at offset {r.offset}: {e}") from e
            datums.append(datum)
        plain = to_arrow(framed)
        try:
            batch = plain.set_column(plain.schema.get_field_index("value"), "value", pa.array(datums))
        except (pa.ArrowException, ValueError, TypeError) as e:
            raise self._fail(f"cannot hold the decoded values as one Arrow column: {type(e).__name__}: {e}") from e
        try:
            out = self.transform(topic, batch)
        except Exception as e:
            raise self._fail(f"raised {type(e).__name__}: {e}") from e
        got: dict[int, Record | None] = dict(self._checked(self._as_arrow(out), framed, batch.schema))
        by_offset = {r.offset: r for r in framed}
        for offset, kept in got.items():
            try:
                assert kept is not None, "a kept row"
                got[offset] = replace(kept, value=self.values.encoded(by_offset[offset], schemas[offset], kept.value))
            except ValueError as e:
                raise self._fail(f"at offset {offset}: {e}") from e
        return [r if r.value is None else got.get(r.offset) for r in records]
