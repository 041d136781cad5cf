"""Retrying retriable Kafka errors until a deadline, then failing with the last one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaException

from mm2py.errors import KafkaError
from mm2py.kafka.classify import action_for

T = TypeVar("T")


def is_retriable(exc: BaseException) -> bool:
    if isinstance(exc, KafkaError):
        return exc.retriable
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        code = getattr(err, "code", None)
        said = bool(getattr(err, "retriable", lambda: False)())
        return action_for(code(), library_says_retriable=said).retriable if callable(code) else said
    return False


def retrying(call: Callable[[], T], timeout: float, backoff: float = 0.2) -> T:
    """``call()`` until it succeeds, retrying retriable errors (leader moves, new topics)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except (KafkaError, KafkaException) as e:
            if not is_retriable(e) or time.monotonic() + backoff > deadline:
                raise
        time.sleep(backoff)
        backoff = min(backoff * 2, 2.0)
