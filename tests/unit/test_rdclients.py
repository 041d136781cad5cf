"""rdclients: which confluent-kafka serves ``oauth_cb`` from poll only, and that every client it
makes with one has asked for its token by the time it is handed out, on this process's library.

The clients are real librdkafka clients of a bootstrap that answers nothing (127.0.0.1:1): the
token refresh is queued when a client is made, before any broker answers, so no broker is needed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import confluent_kafka
import pytest

from mm2py.kafka import rdclients

BACKGROUND_WAIT_S = 5.0


@pytest.mark.parametrize("version, poll_only", [
    ("2.10.0", True), ("2.12.2", True), ("2.12.99", True), ("1.9.2", True),
    ("2.13.0", False), ("2.13.2", False), ("2.16.1", False), ("3.0.0", False), ("2.13.0rc1", False),
    ("unknown", True),
])
def test_versions_before_2_13_serve_oauth_cb_from_poll_only(version: str, poll_only: bool) -> None:
    assert rdclients.oauth_served_by_poll_only(version) is poll_only


def test_this_process_library_is_judged_by_its_version() -> None:
    assert rdclients.POLL_SERVES_OAUTH is rdclients.oauth_served_by_poll_only(confluent_kafka.version()[0])
    assert rdclients.needs_poll({"oauth_cb": print}) is rdclients.POLL_SERVES_OAUTH
    assert not rdclients.needs_poll({"sasl.mechanism": "PLAIN"}), "no token source, nothing to poll for"


class Tokens:
    """An ``oauth_cb`` counting its calls; each token lives ``lifetime`` seconds."""

    def __init__(self, lifetime: float = 3600.0):
        self.lifetime = lifetime
        self.calls = 0
        self.called = threading.Event()

    def __call__(self, _config: str | None = None) -> tuple[str, float, str, dict[str, str]]:
        self.calls += 1
        self.called.set()
        return "header.payload.signature", time.time() + self.lifetime, "mm2", {}


def conf(tokens: Tokens) -> dict[str, object]:
    return {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": tokens,
            "logger": logging.getLogger("rdclients-test")}  # the refused connections: not on stderr


MAKERS: dict[str, Callable[[dict], object]] = {
    "producer": rdclients.producer,
    "consumer": lambda c: rdclients.consumer({**c, "group.id": "rdclients-test"}),
    "admin": rdclients.admin_client,
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_client_with_oauth_cb_has_asked_for_its_token_when_handed_out(kind: str) -> None:
    tokens = Tokens()
    client = MAKERS[kind](conf(tokens))
    try:
        if rdclients.POLL_SERVES_OAUTH:
            assert tokens.calls == 1, "polled once before it was handed out"
        else:  # the library's background thread asks
            assert tokens.called.wait(BACKGROUND_WAIT_S)
    finally:
        if kind == "consumer":
            client.close()  # type: ignore[attr-defined]


def test_an_admin_client_renews_its_token_when_served_before_a_request() -> None:
    tokens = Tokens(lifetime=2.0)  # librdkafka queues a refresh at 80 % of a token's life
    client = rdclients.admin_client(conf(tokens))
    deadline = time.monotonic() + BACKGROUND_WAIT_S
    while tokens.calls < 2 and time.monotonic() < deadline:
        time.sleep(0.25)
        rdclients.serve_token(client, conf(tokens))
    assert tokens.calls >= 2, "a second token before the first expired"
