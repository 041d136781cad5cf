"""The checkpoint and heartbeat queries wait for the sources' first micro-batches (mm2py.engine.queries)."""

from __future__ import annotations

from mm2py.engine.queries import await_first_batches


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Source:
    """A source query whose first batch is in ``states[i]`` at the i-th look (the last one after that)."""

    def __init__(self, *states: str):
        self.states = list(states)
        self.looks = 0

    def first_batch(self) -> str:
        self.looks += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]


def wait(*sources: Source, stopped=lambda: False) -> tuple[str, float]:
    clock = Clock()
    why = await_first_batches(sources, stopped=stopped, wait_s=20, running_s=3, clock=clock, sleep=clock.sleep)
    return why, round(clock.now, 1)


def test_it_ends_when_every_source_ran_its_first_batch():
    assert wait(Source("planning", "planning", "running", "done"), Source("done")) == ("done", 0.3)


def test_it_ends_when_every_first_batch_has_run_a_while():
    # a tail's first micro-batch runs for its window: its tasks copy long before it is done
    assert wait(Source("planning", "running"), Source("running")) == ("running", 3.1)


def test_one_source_still_planning_keeps_it_waiting_until_the_deadline():
    assert wait(Source("running"), Source("planning")) == ("waited", 20.0)


def test_a_stop_ends_it_at_once():
    assert wait(Source("planning"), stopped=lambda: True) == ("stopped", 0.0)


def test_no_source_no_wait():
    assert wait() == ("done", 0.0)
