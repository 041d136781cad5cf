"""The topic refresh beside a tailing micro-batch (mm2py.source.plan.ahead)."""

from __future__ import annotations

import threading
import time

from mm2py.config.model import SelectionConfig
from mm2py.source.plan.ahead import AHEAD_SECONDS, AheadWork, ahead_delay


def refresh(interval_seconds: float, enabled: bool) -> SelectionConfig:
    return SelectionConfig(refresh_topics_interval_seconds=interval_seconds, refresh_topics_enabled=enabled)


def test_the_refresh_starts_ahead_of_the_tail_end_only_where_the_next_plan_would_not_list_again():
    assert ahead_delay(60.0, refresh(5.0, True)) == 60.0 - AHEAD_SECONDS
    assert ahead_delay(60.0, refresh(600.0, False)) == 60.0 - AHEAD_SECONDS, "the due metadata sync still runs"
    assert ahead_delay(60.0, refresh(AHEAD_SECONDS, True)) is None, "listed again at the plan: due by then"
    assert ahead_delay(AHEAD_SECONDS, refresh(600.0, True)) is None, "no room before the tail ends"


def test_settle_cancels_work_that_has_not_started():
    ran = []
    work = AheadWork(lambda: ran.append(1), 30.0).start()
    assert work.settle() is None
    time.sleep(0.05)
    assert ran == []


def test_settle_waits_for_work_under_way_and_hands_its_error_over():
    started, release = threading.Event(), threading.Event()
    done = []

    def refresh() -> None:
        started.set()
        release.wait(5)
        done.append(1)
        raise RuntimeError("source unreachable")

    work = AheadWork(refresh, 0.0).start()
    assert started.wait(5)
    threading.Timer(0.1, release.set).start()
    error = work.settle()
    assert done == [1], "settle returned only once the refresh was over"
    assert isinstance(error, RuntimeError) and str(error) == "source unreachable"
