"""Admission control: how many source bytes the next micro-batch of a flow may plan.

A micro-batch carries about ``batch.duration.ms`` of data at the rate the flow has been
moving, up to ``max.batch.bytes``. Every micro-batch has a fixed cost (planning, commit,
task launch), so a fixed byte budget either wastes time on many small batches on a fast
machine or makes batches long on a slow one.

Invariants:
- the budget stays within ``[MIN_BATCH_BYTES, ceiling]``;
- only a batch that used its whole budget says what the flow can move (a caught-up flow's
  batches are as small as what arrived): the rate is measured from those alone, the first
  batch of a run excepted.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_BATCH_BYTES = 16 << 20
FIRST_BATCH_BYTES = 128 << 20


@dataclass
class BatchSizer:
    ceiling: int
    duration_s: float
    budget: float = float(FIRST_BATCH_BYTES)
    _last: tuple[float, float] | None = None  # (when, bytes) of the last batch that used its whole budget
    _batches: int = 0

    def __post_init__(self) -> None:
        self.budget = float(self.clamp(self.budget))

    def clamp(self, n: float) -> int:
        return int(max(min(MIN_BATCH_BYTES, self.ceiling), min(n, self.ceiling)))

    def next_budget(self, now: float) -> int:
        """The byte budget of the batch planned at ``now`` (monotonic seconds)."""
        if self.duration_s <= 0:
            return self.ceiling
        if self._last is not None:
            when, planned = self._last
            elapsed = now - when
            if elapsed > 0:
                # up at once, down halfway: a slow batch (a GC, a leader move) does not halve the next
                measured = planned / elapsed * self.duration_s
                self.budget = self.clamp(measured if measured > self.budget else (self.budget + measured) / 2)
        self._last = None
        return int(self.budget)

    def planned(self, now: float, planned_bytes: float, budget: int) -> None:
        """Record the batch just planned; it measures the rate only if it was cut to its budget.

        The first batch is not measured: it pays for starting connections and remote topics.
        """
        self._last = (now, planned_bytes) if planned_bytes >= budget * 0.9 and self._batches else None
        self._batches += 1
