"""Runs of small batches merged into one write (``batch.coalesce.bytes``)."""

from __future__ import annotations

from mm2py.kafka import batches as rb


class SmallRun:
    """Consecutive small batches of one partition's fetch, to be written as one (``batch.coalesce.bytes``).

    A batch joins when it is plain (v2, contiguous offsets, CreateTime, not transactional, not
    control), at most an eighth of ``limit`` bytes, and of the codec of the run's first batch;
    the run is full at ``limit`` bytes (never above the remote topic's ``max_batch_bytes``).
    Offsets stay in source order, so the merged batch maps its records one for one.
    """

    def __init__(self, limit: int, max_batch_bytes: int = 0):
        self.limit = min(limit, max_batch_bytes) if max_batch_bytes else limit
        self.views: list[rb.BatchView] = []
        self.size = 0
        self.codec = -1

    def eligible(self, view: rb.BatchView) -> bool:
        """Whether ``view`` may be merged at all: plain and small."""
        return (view.passes_unchanged and not view.is_transactional and not view.is_control
                and view.size * 8 <= self.limit)

    def fits(self, codec: int, view: rb.BatchView) -> bool:
        """Whether an eligible ``view`` of ``codec`` may join the run as it stands."""
        return not self.views or (codec == self.codec and self.size + view.size <= self.limit)

    def add(self, codec: int, view: rb.BatchView) -> None:
        self.views.append(view)
        self.size += view.size
        self.codec = codec

    def full(self) -> bool:
        return self.size * 8 >= self.limit * 7

    def take(self) -> list[rb.BatchView]:
        views, self.views, self.size, self.codec = self.views, [], 0, -1
        return views
