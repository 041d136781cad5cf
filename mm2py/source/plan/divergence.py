"""Source logs that diverged under the flow after an unclean leader election (KIP-320), found at plan time.

An unclean election makes a replica that lacked the newest records leader: the records the flow
copied from the old leader past the new leader's log end are gone, and the new leader writes
new records at those offsets. Once its log end passes the flow's position, the log-end check
(mm2py.source.plan.resets ``detect``) sees nothing wrong: the flow would copy on after records it
never saw, the divergent head of the new log missed for good.

The check is the Java consumer's (``SubscriptionState.maybeCompleteValidation``): each copy
task reports the partitionLeaderEpoch of the last batch it copied (``RangeResult.leader_epoch``),
recorded with the partition's position (``"leaderEpoch"`` beside MM2's ``"offset"``,
mm2py.formats ``SourceOffset``); when the partition's leader epoch in the plan's metadata answer
is newer, its leader is asked where that epoch ends in its log (OffsetsForLeaderEpoch). An end
below the copied position means the records from that end up to the position are not the
source's any more: a ``TRUNCATED`` reset with ``diverged_at`` that end, handled by
``source.reset.policy`` (mm2py.source.plan.reset_guard; ``continue`` copies the partition again
from the divergence point, after what the remote topic holds).

A leader that moves while a copy task runs is caught the same way: a batch of a newer epoch
from another broker than the batch before ends the partition's copy there (mm2py.source.copy.intake),
so the next plan checks the new leader's log before a record of it is copied.

Falls back to the log-end check where the epoch is unknown: a position written by MM2 or by a
reset, a legacy (magic 0/1) batch, a position recorded before this check existed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from mm2py.kafka.leader_epochs import EpochEnd
from mm2py.source.plan.resets import Reset
from mm2py.stores.ledger import TRUNCATED
from mm2py.types import TP


class EpochSource(Protocol):
    def leader_epochs(self, tps: list[TP]) -> dict[TP, int]: ...
    def epoch_ends(self, epochs: Mapping[TP, int]) -> dict[TP, EpochEnd]: ...


class Copied(Protocol):
    """The recorded positions and the leader epoch of the batch holding each (``PositionTail``)."""

    positions: dict[TP, int]
    epochs: dict[TP, int]


class DivergenceCheck:
    """Asks a partition's leader about the epoch the flow last copied, once per change of what it knows.

    ``source`` gives the leader epochs of the plan's metadata answer (read with its log ends) and
    asks OffsetsForLeaderEpoch; ``copied`` gives the positions and epochs as last read from the
    target (the stall book's tail, read before each plan).

    Invariants:
    - a partition is asked about only when its leader epoch is newer than the epoch of its copied
      position's batch, and once per (copied epoch, position, leader epoch) found consistent: the
      requests grow with the partitions whose leader changed, not with the partitions mirrored;
    - a divergence found is not remembered: it is reported at each plan until the reset guard
      acts on it (its position then carries no epoch), so a plan that failed to act finds it again;
    - an answer with an undefined end (-1: the leader holds no epoch up to the one asked) falls
      back to the log-end check;
    - the constructor does no I/O.
    """

    def __init__(self, source: EpochSource, copied: Callable[[], Copied]):
        self.source = source
        self.copied = copied
        self._consistent: dict[TP, tuple[int, int, int]] = {}  # (copied epoch, position, leader epoch)
        self.asked = 0  # partitions asked about so far (for tests and logs)

    def find(self, begin: Mapping[TP, int], log_ends: Mapping[TP, int]) -> list[Reset]:
        """The partitions of ``begin`` (next offset to copy of each) whose log diverged below the copied position."""
        copied = self.copied()
        current = self.source.leader_epochs(sorted(begin))
        wanted: dict[TP, tuple[int, int, int]] = {}
        for tp in sorted(begin):
            epoch, position, leader = copied.epochs.get(tp), copied.positions.get(tp), current.get(tp)
            if epoch is None or position is None or leader is None or leader <= epoch:
                continue
            if self._consistent.get(tp) != (epoch, position, leader):
                wanted[tp] = (epoch, position, leader)
        if not wanted:
            return []
        self.asked += len(wanted)
        answers = self.source.epoch_ends({tp: epoch for tp, (epoch, _, _) in wanted.items()})
        out = []
        for tp, (epoch, position, leader) in wanted.items():
            answer = answers.get(tp)
            if answer is None:
                continue  # no leader now: asked again at the next plan
            if 0 <= answer.end_offset <= position and answer.leader_epoch >= 0:
                out.append(Reset(TRUNCATED, tp[0], tp[1], begin[tp], log_ends.get(tp, -1),
                                 diverged_at=answer.end_offset, copied_epoch=epoch, leader_epoch=leader))
            else:
                self._consistent[tp] = (epoch, position, leader)
        return out
