"""Every confluent-kafka (librdkafka) client mm2py builds is made here: producers, consumers, admins.

A client signing in with OAUTHBEARER is given ``oauth_cb`` (``mm2py.kafka.oauth.TokenSource``).
librdkafka asks for a token by queueing a refresh event when the client is made and again
before the token expires. confluent-kafka serves that event on a background thread from
``OAUTH_BACKGROUND_SINCE`` (2.13) on; before, only from ``poll()`` (or ``flush()``/``consume()``).
A client of such a version that makes a request before its first poll (an admin's metadata, a
consumer's watermarks, a transactional producer's ``init_transactions``) has no token and waits
until its timeout, and an admin client that is never polled lets its token expire.

Invariants:
- every ``Producer``, ``Consumer`` and ``AdminClient`` of mm2py comes from ``producer``,
  ``consumer`` or ``admin_client``;
- on a confluent-kafka that serves ``oauth_cb`` from poll only, a client made with one has been
  polled once (``poll(0)``) before it is handed out, so its first request carries a token (its
  token source's failure is raised there, naming the cluster); a consumer is then unassigned,
  so that poll takes no record;
- ``serve_token`` polls an admin client before each request on such a version, so a long-lived
  admin renews its token; producers and consumers renew in their own ``flush``/``poll``;
- on 2.13 and later nothing is polled here: the library's background thread serves the token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mm2py.errors import KafkaError

# confluent-kafka 2.13.0 serves OAuth token refreshes on a background thread (its PR #2130)
OAUTH_BACKGROUND_SINCE = (2, 13)
_VERSION = re.compile(r"(\d+)\.(\d+)")


def oauth_served_by_poll_only(version: str) -> bool:
    """Whether confluent-kafka ``version`` ("2.12.2") calls ``oauth_cb`` only from ``poll()``.

    A version that does not start with major.minor is taken as one that does (a poll then costs
    nothing where it was not needed; a missing one hangs).
    """
    match = _VERSION.match(version.strip())
    if match is None:
        return True
    return (int(match.group(1)), int(match.group(2))) < OAUTH_BACKGROUND_SINCE


POLL_SERVES_OAUTH = oauth_served_by_poll_only(confluent_kafka.version()[0])


def needs_poll(conf: Mapping[str, object]) -> bool:
    """Whether a client made with ``conf`` gets its tokens only when polled (this process's library)."""
    return POLL_SERVES_OAUTH and conf.get("oauth_cb") is not None


def producer(conf: dict[str, Any]) -> Producer:
    """A ``Producer`` of ``conf``, polled once if its token comes only from a poll."""
    client = Producer(conf)
    if needs_poll(conf):
        client.poll(0)
    return client


def consumer(conf: dict[str, Any]) -> Consumer:
    """A ``Consumer`` of ``conf``, polled once (unassigned: no record taken) if its token comes only from a poll."""
    client = Consumer(conf)
    if needs_poll(conf):
        client.poll(0)
    return client


def admin_client(conf: dict[str, Any]) -> AdminClient:
    """An ``AdminClient`` of ``conf``, polled once if its token comes only from a poll."""
    client = AdminClient(conf)
    serve_token(client, conf)
    return client


def serve_token(client: AdminClient, conf: Mapping[str, object]) -> None:
    """Before an admin request: serve a due token refresh of ``client`` (made with ``conf``) where
    only a poll serves it. An admin's poll takes nothing else: its results come by futures."""
    if needs_poll(conf):
        client.poll(0)


def settle(producer: Producer | None, timeout_ms: int, failures: list[str], what: str, cluster: str,
           topic: str) -> None:
    """Every record ``producer`` was given written (its delivery reports' errors in ``failures``), or a
    retriable ``KafkaError`` naming ``what`` was not all written, the cluster and the topic."""
    if producer is None:
        return
    try:
        left = producer.flush(timeout_ms / 1000)
    except confluent_kafka.KafkaException as e:
        failures.append(str(e))
        left = -1
    if left or failures:
        raise KafkaError(f"{what} not all written ({left} unsent): {'; '.join(failures[:3])}", cluster=cluster,
                         topic=topic, retriable=True)
