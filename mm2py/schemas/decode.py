"""Records decoded with their own cluster's registry, for comparing two clusters by value
(``mm2py verify --decode``); its parsed schemas also serve decoded transforms (``mm2py.transforms.decoded``).

A framed key or value (the Confluent wire format; the key only when it starts with magic byte 0,
as ``mm2py.schemas.translate`` decides) becomes the fastavro fingerprint of its writer schema
followed by its datum as sorted JSON, so the same record reads equal on two clusters whose
registries gave the schema different ids. An id header becomes that schema's fingerprint. Bytes
that do not decode stay as they are behind an ``undecodable`` mark, so they compare as different
from anything decoded. Schemas are kept per id for the life of the decoder.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from fastavro import schemaless_reader
from fastavro.schema import parse_schema

from mm2py.errors import SchemaRegistryError
from mm2py.schemas import frames
from mm2py.schemas.canonical import NotAvro, fingerprint
from mm2py.schemas.registry import Registry, registry_for

_UNDECODABLE = b"undecodable:"
Headers = Sequence[tuple[str, bytes | None]]


def _plain(value: Any) -> Any:
    """JSON-able: bytes as hex, everything else as fastavro gives it (dicts, lists, numbers, text)."""
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


class RecordDecoder:
    """Decodes records of one cluster with its registry; the constructor does no I/O."""

    def __init__(self, alias: str, settings: Mapping[str, str]):
        self.registry: Registry = registry_for(alias, settings)
        self.schemas: dict[int, tuple[str, Any] | None] = {}  # id -> (fingerprint, parsed), None: not Avro

    def parsed(self, schema_id: int) -> Any | None:
        """The fastavro-parsed schema of ``schema_id`` (references resolved), None where the registry holds
        no Avro schema under it; a registry that does not answer raises ``SchemaRegistryError``."""
        known = self._schema(schema_id)
        return None if known is None else known[1]

    def _schema(self, schema_id: int) -> tuple[str, Any] | None:
        if schema_id not in self.schemas:
            found = None
            schema = self.registry.schema(schema_id)
            if schema is not None and (schema.schema_type or "AVRO").upper() == "AVRO":
                refs = self.registry.resolved_references(list(schema.references or []))
                try:
                    named: dict = {}
                    for text in refs:
                        parse_schema(json.loads(text), named_schemas=named)
                    own = schema.schema_str
                    if own is None:
                        raise TypeError("a schema without its text")  # as json.loads(None) did: not decodable
                    parsed = parse_schema(json.loads(own), named_schemas=named)
                    found = (fingerprint(own, refs), parsed)
                except (NotAvro, ValueError, TypeError, KeyError):
                    found = None
            self.schemas[schema_id] = found
        return self.schemas[schema_id]

    def _id(self, data: bytes) -> bytes:
        try:
            known = self._schema(frames.schema_id(data))
        except (frames.FrameError, SchemaRegistryError):
            known = None
        return known[0].encode() if known else _UNDECODABLE + data

    def _datum(self, data: bytes, schema_id: int | None) -> bytes:
        try:
            if schema_id is None:
                schema_id, body = frames.schema_id(data), data[frames.PREFIX:]
            else:
                body = data
            known = self._schema(schema_id)
            if known is None:
                return _UNDECODABLE + data
            datum = schemaless_reader(io.BytesIO(body), known[1], None)
            return known[0].encode() + json.dumps(_plain(datum), sort_keys=True).encode()
        except (frames.FrameError, SchemaRegistryError, ValueError, EOFError, IndexError, TypeError, KeyError):
            return _UNDECODABLE + data

    def record(self, key: bytes | None, value: bytes | None,
               headers: Headers) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) in their compared form."""
        carried = {name: v for name, v in headers if name in (frames.KEY_HEADER, frames.VALUE_HEADER) and v}
        key_id = frames.schema_id(carried[frames.KEY_HEADER]) if frames.KEY_HEADER in carried \
            and _framed(carried[frames.KEY_HEADER]) else None
        value_id = frames.schema_id(carried[frames.VALUE_HEADER]) if frames.VALUE_HEADER in carried \
            and _framed(carried[frames.VALUE_HEADER]) else None
        if key is not None and (key_id is not None or _framed(key)):
            key = self._datum(key, key_id)
        if value is not None:
            value = self._datum(value, value_id)
        out = [(name, self._id(v) if name in carried and v else v) for name, v in headers]
        return key, value, out


def _framed(data: bytes) -> bool:
    return len(data) >= frames.PREFIX and data[0] == frames.MAGIC
