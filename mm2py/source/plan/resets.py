"""Source partitions gone back: found at plan time, and what ``source.reset.policy`` does about them.

A partition goes back when its topic is deleted and created again (a new topic id) or its log
is truncated below the flow's position (same id: an unclean leader election; one whose new log
end has passed the position again is found by its leader epoch, mm2py.source.plan.divergence). Planning from the
old position would wait for offsets the new log may never reach, then skip what it holds below
them: a silent loss. ``detect`` finds both from what a plan reads anyway (each partition's next
offset to copy, the source's log end, the topic ids of the same metadata answer) against the
topic id the flow last copied under (mm2py.stores.ledger). Records deleted before they were
mirrored (retention, DeleteRecords: a log start above the position) are found by the copy, which
skips them and reports the range (mm2py.source.copy.copier); the committer records it (``gap_entry``).
A remote topic deleted on the target (the catalogue creates it again) has its partitions copied
again from the source's log start (``refill_entry``).

The actions (``decide``):
- ``continue`` (default): the partition is copied again from its new log start (a diverged
  log: from the divergence point, mm2py.source.plan.divergence), its records landing after what the
  remote topic holds, in order; nothing is lost, and a WARNING says so;
- ``stop``: the partition is not planned again (other partitions go on), an ERROR says why;
- ``recreate`` (a re-created topic only; a truncated log is handled as ``continue``): the remote
  topic is deleted and created again, so the target mirrors the new topic offset for offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.stores.ledger import GAP, RECREATED, REMOTE_DELETED, TRUNCATED, LedgerEntry, now_ms
from mm2py.types import TP

CONTINUE, STOP, RECREATE, SKIPPED, REFILL = "continue", "stop", "recreate", "skipped", "refill"


@dataclass(frozen=True)
class Reset:
    """One partition found gone back: where the flow stood, what the source holds now."""

    kind: str  # RECREATED | TRUNCATED
    topic: str
    partition: int
    position: int  # the next source offset the flow would have copied
    log_end: int  # the source log's end now
    old_id: str | None = None
    new_id: str | None = None
    # a log that diverged under the flow (mm2py.source.plan.divergence): where the leader's log leaves
    # what the flow copied, the epoch of the last batch copied and the leader's epoch now
    diverged_at: int | None = None
    copied_epoch: int | None = None
    leader_epoch: int | None = None

    @property
    def tp(self) -> TP:
        return self.topic, self.partition

    def resumes_from(self, log_start: int) -> int:
        """Where ``continue`` copies the partition again: the new log start, or the divergence point above it."""
        return log_start if self.diverged_at is None else max(self.diverged_at, log_start)


def detect(begin: Mapping[TP, int], log_ends: Mapping[TP, int], known_ids: Mapping[str, str],
           ids: Mapping[str, str]) -> list[Reset]:
    """The partitions of ``begin`` (next offset to copy of each) that went back.

    A topic whose id differs from the one it was last copied under was re-created, whatever its
    offsets; one with its id unchanged (or unknown) went back when its log ends below ``begin``.
    """
    out = []
    for tp, position in sorted(begin.items()):
        topic = tp[0]
        old, new = known_ids.get(topic), ids.get(topic)
        end = log_ends.get(tp)
        if old and new and old != new:
            out.append(Reset(RECREATED, topic, tp[1], position, end if end is not None else -1, old, new))
        elif end is not None and end < position:
            out.append(Reset(TRUNCATED, topic, tp[1], position, end, old, new))
    return out


def decide(policy: str, reset: Reset) -> str:
    """The action ``source.reset.policy`` takes for ``reset``: only a re-created topic is re-created."""
    if policy == RECREATE and reset.kind != RECREATED:
        return CONTINUE
    return policy if policy in (CONTINUE, STOP, RECREATE) else CONTINUE


def entry_for(flow: str, reset: Reset, action: str, *, log_start: int, remote_end: int | None,
              lands_at: int | None) -> LedgerEntry:
    """The ledger event of ``reset``: the old and new ranges on both sides, and the action."""
    source_old: dict = {"end": reset.position}
    source_new: dict = {"start": reset.resumes_from(log_start), "end": reset.log_end}
    if reset.diverged_at is not None:  # the old log's records from there to the position are not the source's
        source_old.update(start=reset.diverged_at, leader_epoch=reset.copied_epoch)
        source_new.update(diverged_at=reset.diverged_at, leader_epoch=reset.leader_epoch)
    if reset.old_id:
        source_old["topic_id"] = reset.old_id
    if reset.new_id:
        source_new["topic_id"] = reset.new_id
    return LedgerEntry(reset.kind, flow, reset.topic, reset.partition, action, source_old, source_new,
                       {"end": remote_end} if remote_end is not None else {},
                       {"start": lands_at} if lands_at is not None else {}, now_ms())


def from_entry(entry: LedgerEntry) -> Reset:
    """The reset a stop recorded in the ledger stands for (a stop outlives a restart)."""
    diverged_at = entry.source_new.get("diverged_at")
    return Reset(entry.kind, entry.topic, entry.partition, int(entry.source_old.get("end", 0)),
                 int(entry.source_new.get("end", -1)), entry.source_old.get("topic_id"),
                 entry.source_new.get("topic_id"), None if diverged_at is None else int(diverged_at),
                 entry.source_old.get("leader_epoch"), entry.source_new.get("leader_epoch"))


def gap_entry(flow: str, topic: str, partition: int, lost_start: int, lost_end: int,
              downstream: int | None = None) -> LedgerEntry:
    """The ledger event of records deleted from the source before they were mirrored (skipped)."""
    return LedgerEntry(GAP, flow, topic, partition, SKIPPED, {"start": lost_start, "end": lost_end},
                       {"start": lost_end}, {}, {"start": downstream} if downstream is not None else {}, now_ms())


def refill_entry(flow: str, topic: str, partition: int, position: int, log_start: int, log_end: int) -> LedgerEntry:
    """The ledger event of a remote topic deleted on the target: its partition is copied again from the log start.

    The source records below ``log_start`` that the deleted remote partition held are gone from
    the target for good (``source_new.start`` above 0 says so).
    """
    return LedgerEntry(REMOTE_DELETED, flow, topic, partition, REFILL, {"end": position},
                       {"start": log_start, "end": log_end}, {}, {"start": 0}, now_ms())


def describe(reset: Reset) -> str:
    if reset.kind == RECREATED:
        return "source topic was deleted and created again (new topic id)"
    if reset.kind == TRUNCATED and reset.diverged_at is not None:
        return (f"source log diverged at offset {reset.diverged_at}, below the flow's position {reset.position} "
                f"(unclean leader election: leader epoch {reset.copied_epoch} -> {reset.leader_epoch}); the "
                f"mirrored records from {reset.diverged_at} are no longer the source's")
    if reset.kind == TRUNCATED:
        return "source log ends below the flow's position (truncated, or re-created)"
    return reset.kind
