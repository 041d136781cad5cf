"""LoginWatch: a refused login reported through error_cb ends a metadata wait within a slice."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import KafkaException

from mm2py.errors import AuthenticationError
from mm2py.kafka.login_watch import LoginWatch


class FakeClient:
    """list_topics fails as librdkafka does while no broker answers; poll serves queued callbacks."""

    def __init__(self, watch: LoginWatch, refuse_after: int | None, answer_after: int | None = None):
        self.conf = watch.watching({})
        self.refuse_after = refuse_after
        self.answer_after = answer_after
        self.asked: list[float] = []
        self.pending: list[CKafkaError] = []

    def list_topics(self, topic=None, timeout=-1.0):
        self.asked.append(timeout)
        if self.answer_after is not None and len(self.asked) > self.answer_after:
            return "metadata"
        if self.refuse_after is not None and len(self.asked) > self.refuse_after:
            self.pending.append(CKafkaError(CKafkaError._AUTHENTICATION, "SASL authentication error: bad password"))
        raise KafkaException(CKafkaError(CKafkaError._TRANSPORT, "Broker transport failure"))

    def poll(self, timeout=0):
        while self.pending:
            self.conf["error_cb"](self.pending.pop(0))


def test_a_refused_login_ends_the_wait_at_the_slice_that_saw_it():
    watch = LoginWatch("B")
    client = FakeClient(watch, refuse_after=1)
    with pytest.raises(KafkaException):
        watch.metadata(client, "t", timeout=60)
    assert client.asked == [1.0, 2.0], "two slices, not sixty seconds"
    refused = watch.refused(client, "reading", topic="t")
    assert isinstance(refused, AuthenticationError) and not refused.retriable
    assert "authentication failed (reading)" in str(refused) and "bad password" in str(refused)
    assert "cluster=B" in str(refused) and "topic=t" in str(refused)


def test_no_refused_login_is_no_authentication_error_and_slices_grow_to_the_timeout():
    watch = LoginWatch("B")
    client = FakeClient(watch, refuse_after=None, answer_after=3)
    assert watch.metadata(client, None, timeout=60) == "metadata"
    assert client.asked == [1.0, 2.0, 4.0, 8.0]
    assert watch.refused(client, "reading") is None


def test_other_client_errors_are_not_a_refused_login():
    watch = LoginWatch("B")
    watch.watching({})["error_cb"](CKafkaError(CKafkaError._TRANSPORT, "connection refused"))
    assert watch.failure is None
