"""The data path's socket I/O: responses received in place, produce requests sent from pieces.

kafka-python (pinned at 3.0.12) reads a socket 4 KiB at a time, joins the pieces, slices them
into a fresh frame buffer and copies the frame out again before decoding: a 64 MB Fetch
response costs 16,000 ``recv`` calls and five copies of every byte before its records reach
us (docs/design.md has the profile). ``adapt`` switches one established connection to reading each response frame
with ``recv_into`` straight into a buffer kept by the connection, and decoding it in place:
one copy by the kernel, one where the decoder cuts the records field out as ``bytes``.

On the way out, a ``ChunkedProduce`` request is written with ``sendmsg`` from its pieces: the
small encoded fields and each batch as (patched 61-byte header, body still inside the fetch
response), where kafka-python would copy every batch into its encode buffer and out again.

Connection setup, SASL and TLS stay kafka-python's. A connection is adapted once it is idle
between frames, and a reconnect (new transport, new parser) is adapted again by the next
send. With another kafka-python version nothing is adapted, and a ``ChunkedProduce`` is
encoded whole by kafka-python's own parser.

Invariants:
- a response is decoded only once its whole frame is in the buffer;
- the buffer is replaced, never resized, so a view still held elsewhere stays valid;
- the buffers of a request are written in order, whole, before the next request's.
"""

from __future__ import annotations

import io
import ssl
import struct
import sys
import types
from dataclasses import dataclass
from typing import Any

import kafka
import kafka.errors as kerr
from kafka.protocol.parser import KafkaProtocol
from kafka.protocol.producer import ProduceRequest

from mm2py.kafka.fetch_response import FetchedPartition, MalformedResponse, TopicKey, parse_fetch
from mm2py.kafka.varint import uvarint
from mm2py.types import TP

Pieces = tuple[bytes | memoryview, ...]

SUPPORTED_VERSION = "3.0.12"
# a response header is a correlation id and (flexible versions) tagged fields: a few bytes
_HEADER_PEEK = 64
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
_SIZE = struct.Struct(">i")
_PRODUCE = ProduceRequest[12]
# a piece at least this large is sent from where it lies; smaller ones are copied together
_LARGE = 4096
_MAX_IOV = 512
_FETCH_KEY, _FETCH_VERSIONS = 1, (12, 13)
# frame buffers kept per connection; more are made while older ones are still referenced
_POOL = 4
_STEP = 16 << 20


@dataclass(frozen=True, slots=True)
class RawFetch:
    """A FetchResponse v12 or v13 whose partitions' records are views of the frame it arrived in.

    ``partitions`` are keyed by topic name (v12) or topic id (v13: ``RawClient.fetched`` names them).
    """

    error_code: int
    partitions: dict[tuple[TopicKey, int], FetchedPartition]
    session_id: int = 0  # the fetch session the broker answered in (KIP-227), 0 for none


def _capacity(size: int) -> int:
    """Room for a frame of ``size`` with headroom, so later frames of similar size fit too."""
    if size <= _STEP:
        return 1 << max(size - 1, 1 << 15).bit_length()
    return -(-size // _STEP) * _STEP


def _unused(pool: list[bytearray], i: int) -> bool:
    # held only by the pool's slot and getrefcount's argument: no memoryview of it is alive
    return sys.getrefcount(pool[i]) <= 2


class Chunks(list):
    """Bytes to send as several buffers, in order (one request or more)."""


class ChunkedProduce:
    """ProduceRequest v12 (acks=all; a transactional id when the batches are transactional) sent from its pieces.

    Duck-types the kafka-python request interface its connection uses (``API_VERSION``,
    ``expect_response``, ``with_header``, ``header``, ``encode``); the response is decoded as
    kafka-python's ProduceResponse v12.
    """

    API_KEY = 0
    API_VERSION = 12

    def __init__(self, batches: dict[TP, Pieces], timeout_ms: int, transactional_id: str | None = None):
        self.batches = batches
        self.timeout_ms = timeout_ms
        self.transactional_id = transactional_id
        self.header = None
        self._correlation_id = 0
        self._client_id = ""

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        carrier = _PRODUCE(transactional_id=None, acks=-1, timeout_ms=self.timeout_ms, topic_data=[])
        carrier.with_header(correlation_id=correlation_id, client_id=client_id)
        self.header = carrier.header
        self._correlation_id, self._client_id = correlation_id, client_id

    def pieces(self) -> Chunks:
        """The framed request: size, header v2, body; large batch pieces by reference."""
        by_topic: dict[str, list[tuple[int, Pieces]]] = {}
        for (topic, partition), batch in self.batches.items():
            by_topic.setdefault(topic, []).append((partition, batch))
        cid = self._client_id.encode()
        small = bytearray(struct.pack(">hhih", self.API_KEY, self.API_VERSION, self._correlation_id, len(cid)))
        small += cid
        small += b"\x00"  # header tagged fields
        if self.transactional_id is None:
            small += b"\x00"  # transactional_id: null
        else:
            txn = self.transactional_id.encode()
            small += uvarint(len(txn) + 1) + txn
        small += struct.pack(">hi", -1, self.timeout_ms)
        small += uvarint(len(by_topic) + 1)
        out = Chunks()
        for topic, parts in by_topic.items():
            name = topic.encode()
            small += uvarint(len(name) + 1) + name + uvarint(len(parts) + 1)
            for partition, batch in parts:
                small += struct.pack(">i", partition)
                small += uvarint(sum(len(p) for p in batch) + 1)
                for piece in batch:
                    if len(piece) >= _LARGE:
                        out.append(small)
                        out.append(piece)
                        small = bytearray()
                    else:
                        small += piece
                small += b"\x00"  # partition tagged fields
            small += b"\x00"  # topic tagged fields
        small += b"\x00"  # request tagged fields
        out.append(small)
        out.insert(0, _SIZE.pack(sum(len(p) for p in out)))
        return out

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        """The whole framed request as one buffer: for a connection that is not adapted."""
        if not (header and framed):
            raise ValueError("ChunkedProduce is only encoded framed, with its header")
        return b"".join(self.pieces())

    def __str__(self) -> str:
        return f"ChunkedProduce(v12, {len(self.batches)} partitions)"


class FrameProtocol(KafkaProtocol):
    """kafka-python's protocol state machine with frames received in place.

    Made by switching the class of a connection's ``KafkaProtocol`` (so its correlation ids,
    in-flight requests and unsent bytes carry over) and calling ``_start_frames``.
    """

    _size_buf: bytearray
    _size_filled: int
    _pool: list[bytearray]
    _buf: Any  # the frame being received (a bytearray), None between frames
    _frame_size: int  # -1 while the 4-byte size is being read
    _filled: int
    _ready: list
    bytes_to_send: list  # kafka-python's: what is still to be sent, now also Chunks

    def _start_frames(self) -> None:
        self._size_buf = bytearray(4)
        self._size_filled = 0
        self._pool = []
        self._buf = None
        self._frame_size = -1
        self._filled = 0
        self._ready = []

    def free_space(self) -> memoryview:
        """Where the next received bytes go: the rest of the size prefix or of the frame."""
        if self._frame_size < 0:
            return memoryview(self._size_buf)[self._size_filled:]
        return memoryview(self._buf)[self._filled:self._frame_size]

    def received(self, n: int) -> None:
        """Account for ``n`` bytes written into ``free_space()``; decode a completed frame."""
        if self._frame_size < 0:
            self._size_filled += n
            if self._size_filled < 4:
                return
            size = _SIZE.unpack(self._size_buf)[0]
            self._validate_frame_size(size)
            self._buf = self._buffer_for(size)
            self._frame_size, self._filled, self._size_filled = size, 0, 0
            if size > 0:
                return
        else:
            self._filled += n
            if self._filled < self._frame_size:
                return
        frame = memoryview(self._buf)[:self._frame_size]
        self._frame_size, self._buf = -1, None
        self._ready.append(self._decode_frame(frame))

    def _buffer_for(self, size: int) -> bytearray:
        """A pooled buffer of at least ``size`` bytes that no earlier response still points into.

        Reusing buffers is the point: records are handed on as views of the frame, and a
        fresh buffer would fault in every page again.
        """
        pool = self._pool
        free = [i for i in range(len(pool)) if _unused(pool, i)]
        for i in free:
            if len(pool[i]) >= size:
                return pool[i]
        if len(pool) >= _POOL and free:  # make room: drop the smallest unused buffer
            pool.pop(min(free, key=lambda i: len(pool[i])))
        buf = bytearray(_capacity(size))
        pool.append(buf)
        return buf

    def _decode_frame(self, frame: memoryview) -> tuple[int, object]:
        if not self.in_flight_requests:
            raise kerr.CorrelationIdError("No in-flight-request found for server response")
        header = self.in_flight_requests.popleft()
        response_type = header.get_response_class()
        if response_type is None:
            raise kerr.KafkaProtocolError(f"no response type for api {header.api_key} v{header.api_version}")
        if header.request_api_key == _FETCH_KEY and header.request_api_version in _FETCH_VERSIONS:
            return header.correlation_id, self._raw_fetch(frame, header.correlation_id, header.request_api_version)
        peek = io.BytesIO(bytes(frame[:_HEADER_PEEK]))
        response_header = response_type.parse_header(peek)
        if peek.tell() >= _HEADER_PEEK:  # tagged fields beyond the peek: parse from the whole frame
            peek = io.BytesIO(bytes(frame))
            response_header = response_type.parse_header(peek)
        if response_header.correlation_id != header.correlation_id:
            raise kerr.CorrelationIdError(
                f"Correlation IDs do not match: sent {header.correlation_id}, recv {response_header.correlation_id}")
        try:
            response = response_type.decode(frame[peek.tell():])
        except (ValueError, struct.error) as e:
            raise kerr.KafkaProtocolError(f"Unable to decode {len(frame)}-byte response: {e}") from e
        return header.correlation_id, response

    @staticmethod
    def _raw_fetch(frame: memoryview, correlation_id: int, version: int) -> RawFetch:
        try:
            received, error, session_id, partitions = parse_fetch(frame, version)
        except MalformedResponse as e:
            raise kerr.KafkaProtocolError(str(e)) from e
        if received != correlation_id:
            raise kerr.CorrelationIdError(f"Correlation IDs do not match: sent {correlation_id}, recv {received}")
        return RawFetch(error, partitions, session_id)

    def send_request(self, request: object, correlation_id: int | None = None) -> int:
        if not isinstance(request, ChunkedProduce):
            return super().send_request(request, correlation_id)
        if correlation_id is None:
            correlation_id = self._next_correlation_id()
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        self.bytes_to_send.append(request.pieces())
        self.in_flight_requests.append(request.header)
        return correlation_id

    def send_bytes(self) -> bytes | Chunks:
        if not any(isinstance(item, Chunks) for item in self.bytes_to_send):
            return super().send_bytes()
        out = Chunks()
        for item in self.bytes_to_send:
            out.extend(item if isinstance(item, Chunks) else (item,))
        self.bytes_to_send = []
        return out

    def receive_bytes(self, data: bytes) -> list:
        """The responses completed since the last call (bytes arrive through ``received``)."""
        if data:  # never expected: the adapted transport hands over nothing
            raise kerr.KafkaProtocolError("bytes passed around an adapted connection's frame buffer")
        ready, self._ready = self._ready, []
        return ready


def _sock_recv_frames(transport: object) -> tuple[bytes, Exception | None]:
    """``_sock_recv`` of an adapted transport: fill the parser's frame buffer until the socket is dry."""
    parser = transport._protocol.parser  # type: ignore[attr-defined]
    sock = transport._sock  # type: ignore[attr-defined]
    while True:
        try:
            n = sock.recv_into(parser.free_space())
        except _WOULD_BLOCK:
            return b"", None
        except Exception as e:  # the transport aborts the connection with it
            return b"", kerr.KafkaConnectionError(e)
        if n == 0:
            return b"", kerr.KafkaConnectionError("socket disconnected")
        try:
            parser.received(n)
        except kerr.KafkaError as e:
            return b"", e


def _sock_send_pieces(transport: object) -> tuple[int, Exception | None]:
    """``_sock_send`` of an adapted transport: buffers go out with ``sendmsg`` (one copy, by the kernel)."""
    sock = transport._sock  # type: ignore[attr-defined]
    queue = transport._write_buffer  # type: ignore[attr-defined]
    if sock is None:
        return 0, kerr.KafkaConnectionError("Connection closed during send")
    gather = not isinstance(sock, ssl.SSLSocket)  # TLS sockets write one buffer at a time
    total = 0
    while queue:
        item = queue.popleft()
        views = [memoryview(b) for b in item] if isinstance(item, Chunks) else [memoryview(item)]
        first = 0
        while first < len(views):
            try:
                sent = sock.sendmsg(views[first:first + _MAX_IOV]) if gather else sock.send(views[first])
            except _WOULD_BLOCK:
                queue.appendleft(Chunks(views[first:]))
                return total, None
            except Exception as e:  # the transport aborts the connection with it
                return total, kerr.KafkaConnectionError(e)
            total += sent
            while sent:
                if sent >= len(views[first]):
                    sent -= len(views[first])
                    first += 1
                else:
                    views[first] = views[first][sent:]
                    sent = 0
    return total, None


def supported() -> bool:
    return kafka.__version__ == SUPPORTED_VERSION


def adapt(conn: object) -> bool:
    """Switch ``conn`` (a kafka-python connection) to in-place frames; True once it is adapted."""
    parser = getattr(conn, "parser", None)
    transport = getattr(conn, "transport", None)
    if parser is None or transport is None or not supported():
        return False
    if isinstance(parser, FrameProtocol):
        return True
    if type(parser) is not KafkaProtocol or parser._receiving or parser._header.tell():
        return False  # mid-frame: the next send tries again
    parser.__class__ = FrameProtocol
    parser._start_frames()
    transport._sock_recv = types.MethodType(_sock_recv_frames, transport)
    transport._sock_send = types.MethodType(_sock_send_pieces, transport)
    return True
