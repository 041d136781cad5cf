"""The handover between resident copiers (mm2py.source.copy.resident) of one flow on one host.

Spark gives a micro-batch's task to any idle Python worker, so the copier a task must take over
may run in another worker process. Each process that runs resident copiers of a flow listens on
a Unix socket in the flow's folder (``folder``: private to the user, named by the flow and its
clusters, so a replicator restarted after a kill finds the copiers its dead run left); a task
asks every one of them, and its own process, to release the copiers holding any of its
partitions, and gets back their rows past their last snapshot.

Invariants:
- ``release`` returns only after every copier holding one of the partitions ended, or raises:
  a listener that does not answer in time fails the task rather than letting two copiers write,
  and a copier that did not end in time stays registered, so the task's retry waits for it too;
- a socket that refuses connections belongs to a process that is gone, and is removed;
- requests and answers are length-prefixed pickles between processes of the same user, over a
  folder only that user can enter.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import socket
import struct
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from mm2py.source.copy.resident import ResidentCopy
from mm2py.source.ranges import RangeResult
from mm2py.types import TP

_HEADER = struct.Struct(">I")

_residents: dict[str, list[ResidentCopy]] = {}  # by flow key: this process's copiers
_listeners: dict[str, socket.socket] = {}
_lock = threading.Lock()


def flow_key(flow: str, source: str, target: str) -> str:
    """A short name for the flow between these clusters (its folder's)."""
    return hashlib.sha256(f"{flow}\0{source}\0{target}".encode()).hexdigest()[:16]


def folder(key: str) -> Path:
    base = Path(tempfile.gettempdir()) / f"mm2py-resident-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    path = base / key
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def register(key: str, resident: ResidentCopy) -> None:
    """Make ``resident`` releasable by every task of the flow on this host."""
    with _lock:
        _residents.setdefault(key, []).append(resident)
        if key not in _listeners:
            _listeners[key] = _listen(key)


Handed = tuple[list[RangeResult], set[TP], dict[TP, tuple[int, int]]]


def release(key: str, tps: Iterable[TP], timeout_s: float) -> Handed:
    """End every copier of the flow on this host holding one of ``tps``: their rows past their last
    snapshot, the partitions they held, and where each copier ended (``resident.ends_of``)."""
    wanted = frozenset(tps)
    rows, held, ends = release_here(key, wanted, timeout_s)
    own = _socket_path(key)
    for path in sorted(folder(key).glob("*.sock")):
        if path == own:
            continue
        try:
            got_rows, got_held, got_ends = _ask(path, wanted, timeout_s)
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # its process is gone, and its copiers with it
            continue
        rows += got_rows
        held |= got_held
        ends.update(got_ends)
    return rows, held, ends


def release_here(key: str, wanted: frozenset[TP], timeout_s: float) -> Handed:
    """``release`` for this process's copiers."""
    with _lock:
        mine = [r for r in _residents.get(key, []) if r.tps & wanted]
    rows: list[RangeResult] = []
    held: set[TP] = set()
    ends: dict[TP, tuple[int, int]] = {}
    for resident in mine:
        got, their_ends = resident.release(timeout_s)  # raises while it runs: it stays registered
        with _lock:
            _residents[key] = [r for r in _residents.get(key, []) if r is not resident and not r.ended.is_set()]
        rows += got
        held |= resident.tps
        ends.update(their_ends)
    return rows, held, ends


def _socket_path(key: str) -> Path:
    return folder(key) / f"{os.getpid()}.sock"


def _listen(key: str) -> socket.socket:
    path = _socket_path(key)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    threading.Thread(target=_serve, args=(key, server), name="mm2py-handover", daemon=True).start()
    return server


def _serve(key: str, server: socket.socket) -> None:
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                wanted, timeout_s = pickle.loads(_read(conn))
                answer: object = release_here(key, frozenset(wanted), timeout_s)
            except Exception as e:  # the asking task fails with it, naming it
                answer = e
            with contextlib.suppress(OSError):
                _send(conn, pickle.dumps(answer))


def _ask(path: Path, wanted: frozenset[TP], timeout_s: float) -> Handed:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s + 5)
        conn.connect(str(path))
        _send(conn, pickle.dumps((sorted(wanted), timeout_s)))
        answer = pickle.loads(_read(conn))
    if isinstance(answer, Exception):
        raise RuntimeError(f"the resident copier at {path} could not be released: {answer}") from answer
    return answer


def _send(conn: socket.socket, data: bytes) -> None:
    conn.sendall(_HEADER.pack(len(data)) + data)


def _read(conn: socket.socket) -> bytes:
    head = _exactly(conn, _HEADER.size)
    return _exactly(conn, _HEADER.unpack(head)[0])


def _exactly(conn: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = conn.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("the resident copier's process closed the connection")
        chunks += chunk
    return bytes(chunks)
