"""Work of the next plan done beside a tailing micro-batch, so the plan does not wait for it.

A tailing micro-batch (mm2py.source.copy.tail) keeps the planner idle for its whole window, and a
record that arrives between two micro-batches waits for everything the next plan does. A
topic refresh (listing the source, creating remote topics, the due metadata sync) is the
largest part of that plan which does not depend on the micro-batch's outcome: it runs on a
timer shortly before the tail ends, beside the copy tasks, as MM2's connector refreshes its
topics beside its tasks. The next plan then finds it done and not due again.

Invariants:
- the work never overlaps a plan: it starts after the plan of the tailing micro-batch, and
  ``settle``, which the next plan calls before anything else, cancels it if it has not started
  and waits for it if it has, so the planner and the work never touch the catalogue at once;
- a failure is not dropped: ``settle`` returns it, and the plan then does the work itself, where
  a failure that lasts takes its usual path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mm2py.config.model import SelectionConfig

# The work starts this long before the tail ends: time for a refresh that creates remote
# topics, and fresh enough that the plan after the tail finds the topic listing not due.
AHEAD_SECONDS = 2.0


class AheadWork:
    """``work()`` on a daemon timer ``delay`` seconds from ``start``; ``settle`` before the next plan."""

    def __init__(self, work: Callable[[], None], delay: float):
        self._work = work
        self._error: Exception | None = None
        self._timer = threading.Timer(max(delay, 0.0), self._run)
        self._timer.daemon = True  # a query stopped mid-tail does not wait for it

    def start(self) -> AheadWork:
        self._timer.start()
        return self

    def _run(self) -> None:
        try:
            self._work()
        except Exception as e:  # handed to the next plan by settle
            self._error = e

    def settle(self) -> Exception | None:
        """Cancel the work if it has not started, wait for it if it has; the error it raised, if any."""
        self._timer.cancel()
        self._timer.join()
        return self._error


def ahead_delay(tail_seconds: float, selection: SelectionConfig) -> float | None:
    """When to refresh beside a tail of ``tail_seconds``: None when the plan after it would list again anyway.

    ``selection``: the flow's, whose ``refresh.topics.interval.seconds`` and ``refresh.topics.enabled``
    count. A listing done ``AHEAD_SECONDS`` before the plan is due again at the plan when the interval
    is shorter than that; a tail shorter than it leaves no room.
    """
    enabled, interval_seconds = selection.refresh_topics_enabled, selection.refresh_topics_interval_seconds
    if tail_seconds <= AHEAD_SECONDS or (enabled and interval_seconds <= AHEAD_SECONDS):
        return None
    return tail_seconds - AHEAD_SECONDS
