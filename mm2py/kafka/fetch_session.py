"""Incremental fetch sessions (KIP-227) with one broker: a request names only what changed.

A sessionless Fetch lists every partition, and the broker reads and answers every one of
them. In a session the broker keeps the partitions and their fetch offsets; each request
after the first names only the partitions whose fetch offset or size changed (or are new),
and forgets those no longer wanted, and the answer holds only partitions with records, a
moved watermark or log start, or an error. At thousands of partitions that are mostly idle,
the work per round, on both sides, follows what moved instead of what is mirrored.

Request kinds, by (session id, epoch): ``(0, 0)`` opens a session with a full request;
``(id, n >= 1)`` is incremental; ``(id or 0, -1)`` is a full sessionless fetch that also closes
the session ``id``.

Invariants:
- the broker's view (``known``: each partition's fetch offset and size) changes only with an
  answered request of the session, so an incremental request names every difference between
  what is wanted and what the broker holds;
- at most one request of a session is unanswered: building a request while another is
  unanswered, or after one failed, opens a new session (its effect on the broker is unknown);
- a top-level error (an unknown session, a wrong epoch) or a broker that declined to open one
  leaves no session: the next session request opens one with every partition;
- epochs run 1 .. 2**31 - 1, then wrap to 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.types import TP

INITIAL_EPOCH = 0  # with session id 0: open a session
FINAL_EPOCH = -1  # a full sessionless fetch; closes the session named beside it
_MAX_EPOCH = (1 << 31) - 1


@dataclass(frozen=True)
class SessionRequest:
    """What one Fetch request carries: session id and epoch, partitions to fetch, partitions to forget."""

    session_id: int
    epoch: int
    partitions: Mapping[TP, int]  # fetch offsets of the partitions the request names
    forgotten: tuple[TP, ...]
    wanted: Mapping[TP, tuple[int, int]]  # what the broker holds once it answers: (fetch offset, max bytes)

    @property
    def incremental(self) -> bool:
        return self.epoch > INITIAL_EPOCH


class FetchSession:
    """The fetch session with one broker, as the broker holds it (mm2py.kafka.wire.RawClient.fetch)."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.known: dict[TP, tuple[int, int]] = {}
        self._pending: SessionRequest | None = None

    def request(self, positions: Mapping[TP, int], partition_max_bytes: int, *, use_session: bool) -> SessionRequest:
        """The next request for ``positions``: incremental when ``use_session`` and a session is open."""
        if self._pending is not None:
            self._reset()  # the last request was never answered
        wanted = {tp: (offset, partition_max_bytes) for tp, offset in positions.items()}
        if not use_session:
            closing = self.session_id
            self._reset()
            return SessionRequest(closing, FINAL_EPOCH, positions, (), wanted)
        if self.session_id == 0:
            request = SessionRequest(0, INITIAL_EPOCH, positions, (), wanted)
        else:
            known = self.known
            changed = {tp: offset for tp, (offset, size) in wanted.items() if known.get(tp) != (offset, size)}
            forgotten = tuple(tp for tp in known if tp not in wanted)
            request = SessionRequest(self.session_id, self.epoch, changed, forgotten, wanted)
        self._pending = request
        return request

    def answered(self, request: SessionRequest, error_code: int, session_id: int) -> None:
        """The broker answered ``request`` (top-level ``error_code``, the ``session_id`` it names)."""
        if request is not self._pending:
            return  # a sessionless request, or one this session has given up on
        self._pending = None
        if error_code or (request.epoch == INITIAL_EPOCH and session_id == 0):
            self._reset()  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, or no room for a session
            return
        if request.epoch == INITIAL_EPOCH:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < _MAX_EPOCH else 1
        self.known = dict(request.wanted)

    def failed(self, request: SessionRequest) -> None:
        """``request`` got no answer (a lost connection, a timeout)."""
        if request is self._pending:
            self._reset()

    def _reset(self) -> None:
        self.session_id, self.epoch, self.known, self._pending = 0, INITIAL_EPOCH, {}, None
