"""Avro schemas compared across registries: fastavro's parsing canonical form and its fingerprint.

Two registries agree on a schema when their texts have the same parsing canonical form (whitespace,
field order of attributes, docs and defaults that do not change how data decodes are left out),
with the named types of its references parsed first, in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from fastavro.schema import SchemaParseException, parse_schema, to_parsing_canonical_form


class NotAvro(ValueError):
    """A schema text fastavro cannot parse as Avro."""


def canonical_forms(schema: str, references: Sequence[str] = ()) -> list[str]:
    """Parsing canonical forms of ``references`` (texts of the schemas it names, in order) and ``schema``."""
    named: dict = {}
    forms = []
    try:
        for text in (*references, schema):
            forms.append(str(to_parsing_canonical_form(parse_schema(json.loads(text), named_schemas=named))))
    except (ValueError, SchemaParseException, TypeError, KeyError, AttributeError) as e:
        raise NotAvro(f"not an Avro schema: {e}") from e
    return forms


def fingerprint(schema: str, references: Sequence[str] = ()) -> str:
    """SHA-256 (hex) over the canonical forms of the references and the schema, in order."""
    digest = hashlib.sha256()
    for form in canonical_forms(schema, references):
        digest.update(form.encode())
        digest.update(b"\0")
    return digest.hexdigest()
