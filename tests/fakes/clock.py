"""A clock the test moves by hand: the ``now`` callable that classes under test take as a collaborator."""

from __future__ import annotations


class Clock:
    """Returns ``now`` when called; tests set or advance ``now`` themselves (it never moves alone)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
