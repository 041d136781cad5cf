"""When a checkpoint pass lists the source's groups again, and when it also syncs group offsets.

MM2's checkpoint connector lists consumer groups every ``refresh.groups.interval.seconds``
(never again with ``refresh.groups.enabled = false``) and hands them to its tasks; a task
emits checkpoints every ``emit.checkpoints.interval.seconds`` and commits translated offsets
to idle target groups every ``sync.group.offsets.interval.seconds``. Here the listing lives
with the checkpoint query's driver-side reader, and passes are numbered ticks of the emit
interval, so whether a pass syncs is a function of its tick alone (a restarted query neither
skips nor repeats a sync interval's decision).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


def sync_due(tick: int, interval_s: float, sync_interval_s: float) -> bool:
    """Whether the pass of ``tick`` (every ``interval_s``) starts a new ``sync_interval_s`` window."""
    if sync_interval_s <= interval_s:
        return True
    return int(tick * interval_s // sync_interval_s) != int((tick - 1) * interval_s // sync_interval_s)


@dataclass
class GroupListing:
    """The source's groups as last listed; listed again once ``interval_s`` passed (when enabled)."""

    enabled: bool
    interval_s: float
    clock: Callable[[], float] = time.monotonic
    groups: tuple[str, ...] | None = None
    listed_at: float = field(default=0.0)

    def current(self, list_groups: Callable[[], Iterable[str]]) -> tuple[str, ...]:
        now = self.clock()
        if self.groups is None or (self.enabled and now - self.listed_at >= self.interval_s):
            self.groups = tuple(sorted(list_groups()))
            self.listed_at = now
        return self.groups
