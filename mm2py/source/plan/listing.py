"""The planner's reads of every source partition: offsets and log sizes, one request per broker."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from mm2py.config.model import FlowConfig
from mm2py.kafka.retry import retrying
from mm2py.types import TP

if TYPE_CHECKING:
    from mm2py.kafka.leader_epochs import EpochEnd
    from mm2py.kafka.wire import RawClient


class OffsetLister(Protocol):
    def list_offsets(self, tps: list[TP], spec: str) -> dict[TP, int]: ...


class SourceListing:
    """Offsets and log sizes of a flow's source partitions through one raw client, kept open.

    An admin client's ListOffsets makes a Python future per partition, which at thousands of
    partitions is a good part of every plan; here each leader answers one request. The
    constructor does no I/O; the client is opened at first use (the driver-side runner imports
    kafka-python only then). Retriable errors (a leader moving, a topic just made) are retried
    for the flow's admin timeout, as ``mm2py.kafka.admin.Admin`` does; the rest name topic and
    partition.
    """

    def __init__(self, flow: FlowConfig):
        self.flow = flow
        self._client: RawClient | None = None

    def _raw(self) -> RawClient:
        if self._client is None:
            from mm2py.kafka.wire import RawClient

            self._client = RawClient(self.flow.source, client_id=f"mm2py-planner-{self.flow.name}",
                                     timeout_ms=self.flow.admin_timeout_ms, role="admin")
        return self._client

    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        wanted = list(tps)
        return retrying(lambda: self._raw().list_offsets(wanted, spec), self.flow.admin_timeout_ms / 1000)

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Topic ids as the last listing's metadata answer gave them (a re-created topic has a new one)."""
        return self._raw().topic_ids(topics)

    def leader_epochs(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Leader epochs as the last listing's metadata answer gave them (mm2py.source.plan.divergence)."""
        return self._raw().leader_epochs(tps)

    def epoch_ends(self, epochs: Mapping[TP, int]) -> dict[TP, EpochEnd]:
        """Where each partition's leader ends the epoch asked (OffsetsForLeaderEpoch); a partition's
        retriable error (a leader moving) is retried for the admin timeout, another one raised."""
        def ask() -> dict[TP, EpochEnd]:
            answers = self._raw().epoch_ends(epochs)
            for (topic, partition), answer in sorted(answers.items()):
                if answer.error_code:
                    from mm2py.kafka.wire import to_kafka_error

                    raise to_kafka_error(answer.error_code, cluster=self.flow.source.alias, topic=topic,
                                         partition=partition, detail="OffsetsForLeaderEpoch")
            return answers
        return retrying(ask, self.flow.admin_timeout_ms / 1000)

    def log_sizes(self, topics: set[str]) -> dict[TP, int]:
        """Bytes on the source's disk per partition of ``topics`` (DescribeLogDirs), not retried:
        sizes only tune planning, and the caller plans with a default when they fail."""
        return self._raw().log_sizes(topics)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
