"""When a copy task sends a refused write again: the retriable produce errors, kept in place.

A leader that moved, a broker restarting, too few in-sync replicas or a request timed out does
not fail the task (which would copy its ranges again from their start): the refused
partition's in-flight batches go back to the head of its queue, bytes and sequence numbers
unchanged, and are sent again after ``retry.backoff.ms`` to the leader the target names then.

Invariants:
- a resend keeps each batch's producer id, epoch and sequence numbers, so the target writes it
  once and in order whether or not the refused request was written (the broker answers a
  duplicate of one of a producer's last five batches with the offset it was written at; the
  copier never has more than five in flight per partition);
- answers to requests sent before a resend are moot (``PartitionCopy.generation``);
- a partition refused without a success for ``delivery.timeout.ms`` fails the task, naming
  the partition and the last error: no write is retried forever;
- only idempotent writes are resent here; a transactional task fails (its transaction aborts
  and the task is copied again, mm2py.source.copy.transactional).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mm2py.errors import KafkaError
from mm2py.kafka.classify import Action, action_for
from mm2py.types import TP

# codes whose write is resent in place; the other retriable ones (a producer id the target lost,
# out-of-order sequences) mean the producer state is gone, and the task starts again
RESEND = (Action.RETRY, Action.REFRESH)


def resendable(code: int) -> bool:
    """True when a write refused with ``code`` may be sent again as it is."""
    return action_for(code) in RESEND


@dataclass
class ResendBook:
    """The partitions a copy task is resending: since when, until when they wait, whose leaders to look up.

    ``backoff_s`` is the pause before a resend, ``deadline_s`` the longest a partition may go
    refused without a success (``delivery.timeout.ms``).
    """

    backoff_s: float
    deadline_s: float
    refused_since: dict[TP, float] = field(default_factory=dict)
    held_until: dict[TP, float] = field(default_factory=dict)
    stale_topics: set[str] = field(default_factory=set)
    lookup_at: float = 0.0  # stale topics' leaders are looked up from then on, once per backoff
    resends: int = 0

    def refused(self, tp: TP, error: KafkaError, now: float | None = None) -> None:
        """``tp``'s write was refused with a retriable ``error``: hold it, or raise past the deadline."""
        now = time.monotonic() if now is None else now
        since = self.refused_since.setdefault(tp, now)
        if now - since > self.deadline_s:
            raise KafkaError(
                f"writes refused for {now - since:.0f} s, over delivery.timeout.ms "
                f"({self.deadline_s * 1000:.0f} ms); last error: {error}",
                cluster=error.cluster, topic=tp[0], partition=tp[1], cause=error, retriable=True) from error
        self.held_until[tp] = now + self.backoff_s
        if not self.stale_topics:
            self.lookup_at = now + self.backoff_s
        self.stale_topics.add(tp[0])
        self.resends += 1

    def lookup_due(self, now: float) -> bool:
        """True when stale topics' leaders should be looked up now; the next lookup is a backoff later."""
        if not self.stale_topics or now < self.lookup_at:
            return False
        self.lookup_at = now + self.backoff_s
        return True

    def waiting(self, tp: TP, now: float) -> bool:
        """True while ``tp`` waits out its backoff."""
        until = self.held_until.get(tp)
        if until is None:
            return False
        if now < until:
            return True
        del self.held_until[tp]
        return False

    def written(self, tp: TP) -> None:
        """``tp``'s write succeeded: its deadline starts again at the next refusal."""
        if self.refused_since:
            self.refused_since.pop(tp, None)

    def next_wake(self) -> float | None:
        """The monotonic time the first held partition may be sent again."""
        return min(self.held_until.values(), default=None)
