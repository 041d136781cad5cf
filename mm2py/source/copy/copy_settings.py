"""What a copy task is given besides its ranges: its tuning (``CopySettings``) and, in
exactly-once mode, the producer state it stamps batches with (``ProducerState``). Both picklable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.config.model import FlowConfig

# the broker keeps sequence state for the last 5 batches of a producer per partition
MAX_IN_FLIGHT_PER_PARTITION = 5


@dataclass(frozen=True)
class CopySettings:
    """Tuning of one copy task; picklable, sent with the task.

    ``for_flow`` reads them from the flow's replication consumer and data producer settings (the
    Java client setting each field stands for is named beside it); mm2py's defaults apply where the
    file says nothing.
    """

    partition_max_bytes: int = 8 << 20  # max.partition.fetch.bytes
    fetch_max_bytes: int = 64 << 20  # fetch.max.bytes (also bounds what a task holds unsent)
    fetch_max_wait_ms: int = 200  # fetch.max.wait.ms
    fetch_min_bytes: int = 1  # fetch.min.bytes
    produce_timeout_ms: int = 30000  # the data producer's request.timeout.ms, sent in each Produce request
    request_timeout_ms: int = 60000  # admin.timeout.ms: the longest wait for any answer
    verify_crc: bool = False  # check.crcs
    offset_lag_max: int = 100
    retry_backoff_ms: int = 200  # retry.backoff.ms: the pause before fetching again after a leader moved
    produce_backoff_ms: int = 100  # the producer's retry.backoff.ms: the pause before a refused write is resent
    delivery_timeout_ms: int = 120000  # delivery.timeout.ms: the longest a partition's writes go refused
    max_in_flight_per_partition: int = MAX_IN_FLIGHT_PER_PARTITION  # the producer's max.in.flight..., up to 5
    coalesce_bytes: int = 0  # batch.coalesce.bytes: merge runs of small batches up to this size (0: never)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> CopySettings:
        """The copy settings of ``flow`` (``flow.source.consumer``, ``flow.target.producer``)."""
        consumer, producer = flow.source.consumer, flow.target.producer

        def number(settings: Mapping[str, str], key: str, default: int) -> int:
            return int(settings[key]) if key in settings else default

        in_flight = number(producer, "max.in.flight.requests.per.connection", MAX_IN_FLIGHT_PER_PARTITION)
        return cls(
            # 0 is legal in Kafka (a fetch still returns a first batch whole); here it would fetch nothing
            partition_max_bytes=max(1, number(consumer, "max.partition.fetch.bytes", cls.partition_max_bytes)),
            fetch_max_bytes=max(1, number(consumer, "fetch.max.bytes", cls.fetch_max_bytes)),
            fetch_max_wait_ms=number(consumer, "fetch.max.wait.ms", cls.fetch_max_wait_ms),
            fetch_min_bytes=number(consumer, "fetch.min.bytes", cls.fetch_min_bytes),
            produce_timeout_ms=number(producer, "request.timeout.ms", cls.produce_timeout_ms),
            request_timeout_ms=flow.admin_timeout_ms,
            verify_crc=consumer.get("check.crcs", str(cls.verify_crc)).strip().lower() == "true",
            offset_lag_max=flow.checkpoints.offset_lag_max,
            retry_backoff_ms=number(consumer, "retry.backoff.ms", cls.retry_backoff_ms),
            produce_backoff_ms=number(producer, "retry.backoff.ms", cls.produce_backoff_ms),
            delivery_timeout_ms=number(producer, "delivery.timeout.ms", cls.delivery_timeout_ms),
            max_in_flight_per_partition=max(1, min(in_flight, MAX_IN_FLIGHT_PER_PARTITION)),
            coalesce_bytes=flow.copy.batch_coalesce_bytes,
        )


@dataclass(frozen=True)
class ProducerState:
    """The producer id and epoch the copier stamps batches with; ``transactional_id`` in exactly-once mode."""

    producer_id: int
    epoch: int
    transactional_id: str | None = None
