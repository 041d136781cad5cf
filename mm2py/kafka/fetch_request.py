"""Fetch requests as the copy path sends them, and kafka-python's Fetch answers as ``FetchedPartition``s.

A request reads committed data only (read_committed) and lists partitions in the order given: the
first partition of a request gets its first batch whole even when larger than the limits (KIP-74).
Within a fetch session (mm2py.kafka.fetch_session) topics are named by id (Fetch v13), else by
name (v12).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kafka.protocol.consumer import FetchRequest

from mm2py.kafka.fetch_response import FetchedPartition
from mm2py.kafka.fetch_session import SessionRequest
from mm2py.types import TP

FETCH = FetchRequest[12]  # topics by name
FETCH_BY_ID = FetchRequest[13]  # topics by id (KIP-516): what fetch sessions use
READ_COMMITTED = 1

_V = TypeVar("_V")


def by_topic(items: Iterable[tuple[TP, _V]]) -> dict[str, list[_V]]:
    """``((topic, partition), value)`` pairs grouped by topic, in the order given."""
    out: dict[str, list[_V]] = {}
    for (topic, _), value in items:
        out.setdefault(topic, []).append(value)
    return out


def fetch_request(plan: SessionRequest, *, topic_id: Callable[[str], uuid.UUID] | None, partition_max_bytes: int,
                  max_bytes: int, max_wait_ms: int, min_bytes: int, rack: str) -> Any:
    """The Fetch request of ``plan``: by topic id when ``topic_id`` is given (a session, pinned topics),
    else by name."""
    kind = FETCH_BY_ID if topic_id is not None else FETCH

    def topic_key(topic: str) -> dict[str, object]:
        return {"topic_id": topic_id(topic)} if topic_id is not None else {"topic": topic}

    grouped = by_topic(
        ((tp, kind.FetchTopic.FetchPartition(
            partition=tp[1],
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=partition_max_bytes,
        )) for tp, offset in plan.partitions.items())
    )
    return kind(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=READ_COMMITTED,
        session_id=plan.session_id,
        session_epoch=plan.epoch,
        topics=[kind.FetchTopic(**topic_key(t), partitions=ps) for t, ps in grouped.items()],
        forgotten_topics_data=[kind.ForgottenTopic(**topic_key(t), partitions=ps)
                               for t, ps in by_topic((tp, tp[1]) for tp in plan.forgotten).items()],
        rack_id=rack,  # KIP-392
    )


def parsed_fetch(response: Any) -> dict[tuple[str | uuid.UUID, int], FetchedPartition]:
    """A kafka-python Fetch answer's partitions, keyed by topic name (v12) or id (v13)."""
    out: dict[tuple[str | uuid.UUID, int], FetchedPartition] = {}
    for topic in response.responses:
        key = topic.topic or topic.topic_id  # v12 fills the name, v13 the id
        for p in topic.partitions:
            aborted = tuple((a.producer_id, a.first_offset) for a in (p.aborted_transactions or ()))
            out[(key, p.partition_index)] = FetchedPartition(
                p.error_code,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
                aborted,
                p.records or b"",
                getattr(p, "preferred_read_replica", -1),
            )
    return out
