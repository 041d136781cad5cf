"""Leaving out aborted transactional data, as a read_committed consumer does."""

from __future__ import annotations

from mm2py.kafka.batches import BatchView


class AbortedFilter:
    """Tracks which producers' open batches belong to aborted transactions.

    A fetch lists ``(producer_id, first_offset)`` of aborted transactions overlapping it.
    A producer's transactional batch is aborted data once its base offset reaches the
    first offset of one of those; its ABORT control batch ends that state.

    Every batch of the fetch must pass through ``left_out``, in offset order, control batches
    included: a control batch that skipped it would leave its producer aborted for good, and
    that producer's next, committed transactions would be left out too.
    """

    def __init__(self, aborted: tuple[tuple[int, int], ...]):
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._active: set[int] = set()

    def left_out(self, view: BatchView) -> bool:
        """Whether the batch stays off the target: a control batch, or aborted transactional data."""
        while self._pending and self._pending[0][1] <= view.base_offset:
            self._active.add(self._pending.pop(0)[0])
        if view.is_control:
            self._active.discard(view.producer_id)
            return True
        return view.is_transactional and view.producer_id in self._active
