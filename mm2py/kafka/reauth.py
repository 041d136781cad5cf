"""Kept raw connections sign in again before the broker's SASL session ends (KIP-368).

A broker that gives a SASL session a lifetime (``connections.max.reauth.ms``, and always for
OAUTHBEARER: the token's expiry) closes the connection on the first request it receives after
that lifetime without re-authentication, unanswered. kafka-python (3.0.12) re-authenticates on a
timer at 85-95 % of the lifetime its SaslAuthenticate v1 answer gave, but its timers fire only
while the client is polled: a connection kept idle between two Spark tasks (mm2py.worker) would
send the next task's first request on an expired session and lose the connection.

``renew_ending_session`` is called before every request a ``RawClient`` sends: an idle connection
past ``SHARE`` of its session is closed there, so the request goes out on a new connection that
authenticates afresh (with a fresh token). A busy connection is polled, so kafka-python's own
re-authentication runs in time. A request that still meets an expired session was not processed
by the broker: it fails as a lost connection, which ``RawClient`` reports as a retriable
``KafkaError`` (as librdkafka's ``_TRANSPORT`` in mm2py.kafka.classify), and the copier sends it
again in place (a fetch to the current leader, a produce with its sequence numbers unchanged).
"""

from __future__ import annotations

import time

# The share of a session's lifetime after which an idle connection is renewed: before
# kafka-python's own timer (85 % at the earliest), well before the broker's deadline.
SHARE = 0.8


def session_ending(conn: object, now: float | None = None) -> bool:
    """Whether ``conn`` (a kafka-python connection) is past ``SHARE`` of its SASL session's lifetime."""
    reauth = getattr(conn, "_reauth", None)
    lifetime_ms = getattr(reauth, "session_lifetime_ms", 0) or 0
    since = getattr(reauth, "authenticated_at", None)
    if not lifetime_ms or since is None:
        return False  # no SASL, or a session without a lifetime
    now = time.monotonic() if now is None else now
    return now - since >= SHARE * lifetime_ms / 1000


def renew_ending_session(conn: object | None) -> bool:
    """Close ``conn`` when it is idle and its session is ending; True when it was closed.

    A connection with requests in flight, or re-authenticating, is left to kafka-python.
    """
    if conn is None or not getattr(conn, "connected", False) or getattr(conn, "in_flight_requests", None):
        return False
    if getattr(getattr(conn, "_reauth", None), "is_reauthenticating", False) or not session_ending(conn):
        return False
    conn.close()  # type: ignore[attr-defined]
    return True
