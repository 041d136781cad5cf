"""Which partitions a copy task fetches next, from which broker, and what a failed fetch does.

Invariants:
- memory is bounded in bytes: queued batches are views of the fetch responses they came in, so
  a partition with ``max.partition.fetch.bytes`` still queued, or a task with ``fetch.max.bytes``
  queued, is not fetched until produce catches up;
- a partition whose last answer held only part of a batch (behind other partitions' data) leads
  the next request to its broker, where the broker returns its first batch whole (KIP-74); the
  others rotate, so that ``fetch.max.bytes`` starves none of them;
- with client.rack set, a partition is fetched from the replica its leader names (KIP-392)
  until an error or an empty answer sends it back to the leader;
- a fetch that fails at the connection is sent again to the leader the source names then;
  failures for longer than the request timeout, with no answer in between, fail the task.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

from mm2py.errors import AuthenticationError, KafkaError
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.partition import PartitionCopy
from mm2py.types import TP


class FetchSchedule:
    """The fetch side of one copy task. ``leaders`` is filled by the copier's start; no I/O here until then."""

    def __init__(self, src: RawClient, settings: CopySettings):
        self.src, self.settings = src, settings
        self.leaders: dict[TP, int] = {}
        self.read_from: dict[TP, int] = {}  # a replica other than the leader to fetch from (client.rack)
        self.ask_first: set[TP] = set()  # partitions whose last answer was part of a batch
        self._turn = 0  # rotates the order of partitions in fetch requests
        self._failing_since: float | None = None

    def plan(self, parts: Mapping[TP, PartitionCopy]) -> dict[int, list[TP]]:
        """Partitions to fetch next, by broker (see the byte bound above)."""
        plan: dict[int, list[TP]] = {}
        if sum(p.queued_bytes for p in parts.values()) >= self.settings.fetch_max_bytes:
            return plan
        for tp, part in parts.items():
            if not part.done and part.queued_bytes < self.settings.partition_max_bytes:
                plan.setdefault(self.read_from.get(tp, self.leaders[tp]), []).append(tp)
        self._turn += 1
        for tps in plan.values():
            turn = self._turn % len(tps)
            tps[:] = sorted(tps[turn:] + tps[:turn], key=lambda tp: tp not in self.ask_first)
        return plan

    def answered(self) -> None:
        """A fetch was answered: the connection works."""
        self._failing_since = None

    def failed(self, error: KafkaError) -> None:
        """A fetch failed at the connection (a source broker restarting): look the leaders up again and go on.

        Nothing was read, so nothing is lost or repeated; raises ``error`` when it is not
        retriable or fetches kept failing for longer than the request timeout.
        """
        now = time.monotonic()
        since = self._failing_since = self._failing_since or now
        if not error.retriable or isinstance(error, AuthenticationError) or (
                now - since > self.settings.request_timeout_ms / 1000):
            raise error
        with contextlib.suppress(KafkaError):  # a failed lookup is tried again after the next failure
            self.moved()

    def moved(self) -> None:
        """After retry.backoff.ms, fetch from the leaders the source names now."""
        time.sleep(self.settings.retry_backoff_ms / 1000)
        self.read_from.clear()
        self.leaders = self.src.leaders({tp[0] for tp in self.leaders})
