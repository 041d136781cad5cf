"""A record batch's records section compressed and decompressed with the batch's own codec.

Codec ids are the v2 batch attribute's low three bits: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
LZ4 is written as Kafka's own producer writes it (independent 64 KiB blocks, no content size),
so a section compressed here is one any Kafka client reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lz4.frame
from kafka.codec import gzip_decode, gzip_encode, snappy_decode, snappy_encode, zstd_decode, zstd_encode


def _lz4_encode(data: bytes | bytearray) -> bytes:
    return lz4.frame.compress(data, block_linked=False, store_size=False)


_DECODE: dict[int, Callable[[bytes], bytes]] = {1: gzip_decode, 2: snappy_decode, 4: zstd_decode}
_ENCODE: dict[int, Callable[[Any], bytes]] = {1: gzip_encode, 2: snappy_encode, 3: _lz4_encode, 4: zstd_encode}


def decompressed(codec: int, body: bytes | memoryview) -> bytearray:
    """The records section ``body`` of a batch with ``codec``, uncompressed (a new, writable copy)."""
    if codec == 3:
        return lz4.frame.decompress(body, return_bytearray=True)
    return bytearray(_DECODE[codec](bytes(body)) if codec else body)


def compressed(codec: int, data: bytes | bytearray) -> bytes | bytearray:
    """``data`` (an uncompressed records section) compressed with ``codec``; as it is for codec 0."""
    if not codec:
        return data
    return _ENCODE[codec](data if codec == 3 else bytes(data))
