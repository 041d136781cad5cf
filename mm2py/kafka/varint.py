"""Kafka's variable-length integers: unsigned (compact lengths) and zigzag-signed (record fields)."""

from __future__ import annotations

_ONE_BYTE = [bytes([n << 1]) for n in range(64)]  # zigzag varints of 0..63


def read_zigzag(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """The signed (zigzag) varint at ``pos`` and the position after it."""
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def uvarint(n: int) -> bytes:
    """``n`` (at least 0) as an unsigned varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> bytes:
    """``n`` as a signed (zigzag) varint."""
    return _ONE_BYTE[n] if 0 <= n < 64 else uvarint((n << 1) ^ (n >> 63))
