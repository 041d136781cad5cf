"""Admission control: how many source bytes the next micro-batch of a flow may plan.

A micro-batch carries about ``batch.duration.ms`` of data at the rate the flow copies, up to
``max.batch.bytes``. Every micro-batch also has a fixed cost (planning, commit, task launch;
it grows with the partitions a flow has), so a cycle of ``B`` bytes takes about
``fixed + B * per_byte`` seconds. The budget is ``max(duration, DATA_PER_FIXED * fixed) /
per_byte``: the data part of a cycle lasts the duration, and never less than three times the
fixed part, so a flow whose fixed cost is a good part of the duration (thousands of partitions)
spends three quarters of a cycle or more copying, rather than shrinking its batches until
overhead is most of what it does.

Invariants:
- the budget stays within ``[MIN_BATCH_BYTES, ceiling]``;
- only a batch that used its whole budget says what the flow can move (a caught-up flow's
  batches are as small as what arrived): the model is fitted on those alone, the first
  batch of a run excepted; a copy interval (mm2py.source.copy.continuous) is measured by the
  bytes it copied, as its tasks copy past what was planned;
- until full batches of different sizes let the fixed cost be fitted, it counts as 0, and
  the budget is the measured rate times the duration;
- until a batch is measured, the budget is ``FIRST_BATCH_BYTES`` (within the ceiling), so
  the first two batches of a backlog carry it: large enough that their fixed cost is a small
  part of them at a local rate (500 MB/s and more);
- up at once, down halfway: one slow batch (a GC, a leader move) does not halve the next.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

MIN_BATCH_BYTES = 16 << 20
FIRST_BATCH_BYTES = 512 << 20
FITTED_BATCHES = 8  # the most recent full batches the fixed cost is fitted on
SPREAD = 1.3  # their sizes must differ by this factor for a fit
DATA_PER_FIXED = 3.0  # a cycle's data part lasts at least this many times its fixed part
# a copy interval (mm2py.source.copy.continuous) plans this share of what it is measured to copy:
# its tasks reach their planned ends before it closes, and copy the rest past them
PLANNED_SHARE = 0.75


@dataclass
class BatchSizer:
    ceiling: int
    duration_s: float
    budget: float = float(FIRST_BATCH_BYTES)
    fixed_s: float = 0.0  # fitted cost of a micro-batch besides its bytes
    _last: tuple[float, float] | None = None  # (when, bytes) of the last batch that used its whole budget
    _batches: int = 0
    _full: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=FITTED_BATCHES))

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
            if elapsed > 0 and planned > 0:
                self._full.append((planned, elapsed))
                self._fit()
                # seconds per byte of this batch, its fixed part taken out (never all of it)
                per_byte = max(elapsed - self.fixed_s, 0.1 * elapsed) / planned
                target = max(self.duration_s, DATA_PER_FIXED * self.fixed_s) / per_byte
                self.budget = self.clamp(target if target > self.budget else (self.budget + target) / 2)
        self._last = None
        return int(self.budget)

    def planned(self, now: float, planned_bytes: float, budget: int) -> None:
        """Record the batch just planned; it measures the rate only if it was cut to its budget.

        The first batch is not measured: it pays for starting connections and remote topics.
        """
        self._last = (now, planned_bytes) if planned_bytes >= budget * 0.9 and self._batches else None
        self._batches += 1

    def unmeasured(self) -> None:
        """The batch just planned is not measured (its tasks tail: it lasts the tail's window)."""
        self._last = None

    def copied(self, when: float, copied_bytes: float) -> None:
        """A copy interval planned at ``when`` (mm2py.source.copy.continuous) copied ``copied_bytes``
        by the next plan: its tasks copied for the interval whatever was planned, so what they
        copied, not what was planned, says what the flow can move. Call before ``next_budget``."""
        self._last = (when, copied_bytes) if copied_bytes > 0 else None

    def _fit(self) -> None:
        """Least squares of seconds on bytes over the recent full batches, when their sizes spread."""
        sizes = [b for b, _ in self._full]
        if len(sizes) < 2 or max(sizes) < SPREAD * min(sizes):
            return
        n = len(self._full)
        mean_b = sum(sizes) / n
        mean_e = sum(e for _, e in self._full) / n
        var = sum((b - mean_b) ** 2 for b in sizes)
        slope = sum((b - mean_b) * (e - mean_e) for b, e in self._full) / var
        if slope <= 0:
            return  # bytes cost nothing measurable here: noise, keep the last fit
        fixed = mean_e - slope * mean_b
        self.fixed_s = min(max(fixed, 0.0), 0.9 * min(e for _, e in self._full))


class IntervalMeter:
    """What a copy interval (mm2py.source.copy.continuous) copied, measured at the next plan.

    ``planned`` keeps each plan's time and partition starts; ``continuing`` marks the last one as
    a copy interval; ``measure`` gives, at the next plan, the bytes between those starts and the
    new ones (Spark's ends, or recorded positions a task copied past them) and forgets the
    interval. A partition whose start went back (a reset) counts 0. Constructor does no I/O.
    """

    def __init__(self) -> None:
        self._plan: tuple[float, dict[str, int]] | None = None
        self._interval: tuple[float, dict[str, int]] | None = None

    def planned(self, now: float, begin: dict[str, int]) -> None:
        self._plan = (now, dict(begin))

    def continuing(self) -> None:
        self._interval = self._plan

    def measure(self, begin: dict[str, int], bytes_per_offset: Callable[[str], float]) -> tuple[float, float] | None:
        """(when the interval was planned, bytes it copied), or None when the last plan was no interval."""
        interval, self._interval = self._interval, None
        if interval is None:
            return None
        when, before = interval
        return when, sum(max(0, begin[k] - at) * bytes_per_offset(k) for k, at in before.items() if k in begin)
