"""A refused login on a librdkafka client (admin or consumer), named as one within seconds.

librdkafka reports a refused login (wrong SASL password, an untrusted certificate) only through
the client's ``error_cb``; the request that met it fails later as a transport error or a
timeout, which would read as "unreachable" and be retried until the admin timeout. A
``LoginWatch`` is the ``error_cb``; ``metadata`` asks for metadata in growing slices and, between
them, serves the callback, so a refused login ends the wait within a slice.

Invariants:
- ``refused`` is an ``AuthenticationError`` (not retriable) once the callback saw a refused login,
  else None; nothing else turns into one;
- ``metadata`` serves callbacks with ``poll(0)`` only: on a consumer it runs before any
  assignment, so no record is taken from the stream;
- the constructor does no I/O.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import KafkaException

from mm2py.errors import AuthenticationError

REFUSED_LOGIN = (CKafkaError._AUTHENTICATION, CKafkaError.SASL_AUTHENTICATION_FAILED, CKafkaError._SSL)
# answers that mean "no broker answered yet": asked again, twice as long each time
WAITING = (CKafkaError._TRANSPORT, CKafkaError._ALL_BROKERS_DOWN, CKafkaError._TIMED_OUT)
FIRST_SLICE_S = 1.0


class MetadataClient(Protocol):
    def list_topics(self, topic: str | None = ..., timeout: float = ...) -> Any: ...
    def poll(self, timeout: float = ...) -> Any: ...


class LoginWatch:
    """The ``error_cb`` of one librdkafka client of cluster ``alias``. Constructor does no I/O."""

    def __init__(self, alias: str):
        self.alias = alias
        self.failure: str | None = None

    def watching(self, conf: dict[str, Any]) -> dict[str, Any]:
        """``conf`` with this watch as its ``error_cb``."""
        return {**conf, "error_cb": self._on_error}

    def _on_error(self, err: CKafkaError) -> None:
        if err.code() in REFUSED_LOGIN:
            self.failure = err.str()

    def refused(self, client: MetadataClient, action: str, cause: BaseException | None = None,
                topic: str | None = None) -> AuthenticationError | None:
        """The refused login ``client`` met, if any (its callbacks served first)."""
        client.poll(0)
        if self.failure is None:
            return None
        return AuthenticationError(f"authentication failed ({action}): {self.failure}; check the "
                                   "sasl.*/ssl.* settings of this cluster", cluster=self.alias, topic=topic,
                                   cause=cause)

    def metadata(self, client: MetadataClient, topic: str | None, timeout: float) -> Any:
        """``client.list_topics(topic)`` within ``timeout``, asked in growing slices while no broker
        answers; raises the last ``KafkaException`` (``refused`` then names a refused login)."""
        deadline, wait = time.monotonic() + timeout, FIRST_SLICE_S
        while True:
            left = deadline - time.monotonic()
            try:
                return client.list_topics(topic, timeout=max(min(wait, left), 0.1))
            except KafkaException as e:
                client.poll(0)  # serves error_cb
                code = e.args[0].code() if e.args and isinstance(e.args[0], CKafkaError) else None
                if self.failure is not None or left <= wait or code not in WAITING:
                    raise
            wait *= 2
