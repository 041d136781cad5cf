"""The Confluent wire format: byte 0 is 0, bytes 1-4 the big-endian schema id, then the body.

Newer clients may carry the id in a ``__key_schema_id`` / ``__value_schema_id`` header instead;
there the header value is the same 5-byte prefix (magic 0 and the id; magic 1 and a 16-byte
GUID are not translatable here), and the record's key or value is the bare body.
"""

from __future__ import annotations

import struct

MAGIC = 0
PREFIX = 5
KEY_HEADER = "__key_schema_id"
VALUE_HEADER = "__value_schema_id"
_ID = struct.Struct(">I")


class FrameError(ValueError):
    """Bytes that are not a translatable frame; the message says why."""


def schema_id(data: bytes) -> int:
    """The schema id a framed key, value or id header names."""
    if len(data) < PREFIX:
        raise FrameError(f"{len(data)} bytes, shorter than the 5-byte wire-format prefix")
    if data[0] != MAGIC:
        raise FrameError(f"magic byte {data[0]}, not 0 (the Confluent wire format)")
    return int(_ID.unpack_from(data, 1)[0])


def with_id(data: bytes, new_id: int) -> bytes:
    """``data`` naming ``new_id`` instead; the body is unchanged."""
    return b"\x00" + _ID.pack(new_id) + data[PREFIX:]
