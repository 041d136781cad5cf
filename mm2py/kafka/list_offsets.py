"""ListOffsets as the planner asks it: read_committed, the same thousands of partitions every plan.

``latest`` is the last stable offset (read_committed), ``earliest`` the log start offset.
``OffsetRequests`` keeps the request built for a broker and reuses it while the partitions asked
stay the same: building its objects anew costs more than the broker's answer. The header (and
its correlation id) is set by the client at each send, so a kept request is sent as often as wanted.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka.protocol.consumer import ListOffsetsRequest

from mm2py.kafka.fetch_request import READ_COMMITTED, by_topic
from mm2py.types import TP

LATEST, EARLIEST = -1, -2
TIMESTAMPS = {"latest": LATEST, "earliest": EARLIEST}


def list_offsets_request(tps: Iterable[TP], timestamp: int) -> object:
    """A read_committed ListOffsets request for ``tps`` at ``timestamp`` (``LATEST`` or ``EARLIEST``)."""
    req = ListOffsetsRequest[7]
    return req(
        replica_id=-1,
        isolation_level=READ_COMMITTED,
        topics=[req.ListOffsetsTopic(name=topic, partitions=[
            req.ListOffsetsTopic.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
            for p in partitions]) for topic, partitions in by_topic((tp, tp[1]) for tp in tps).items()],
    )


class OffsetRequests:
    """The ListOffsets request last built per (broker, timestamp), with the partitions it names."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, int], tuple[list[TP], object]] = {}

    def request(self, node: int, tps: list[TP], timestamp: int) -> object:
        """The request of ``tps`` to ``node``: the one built last time when they are the same."""
        key = (node, timestamp)
        last = self._last.get(key)
        if last is not None and last[0] == tps:
            return last[1]
        built = list_offsets_request(tps, timestamp)
        self._last[key] = (tps, built)
        return built
