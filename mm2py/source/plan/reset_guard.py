"""The planner's check for source partitions gone back, and the actions it takes (mm2py.source.plan.resets).

``ResetGuard.review`` runs in every plan, over what the plan read anyway; only when a partition
went back does it ask more (the new log starts, the remote topics' ends) and write (the ledger,
the positions, an offset sync).

Invariants:
- a case is recorded in the ledger (acks=all) before the flow acts on it, and a topic's id is
  recorded before a plan of that topic generation is returned;
- ``continue``: the partition's recorded position moves to just before its new log start (a
  diverged log: its divergence point, mm2py.source.plan.divergence) and an offset sync ``(that
  offset, remote end)`` is written before any record of the new log is
  planned: a restart resumes from the new log, and a group offset of the new log never
  translates through a sync of the old one (a later sync at or below an upstream offset
  supersedes every earlier one above it: mm2py.checkpoint.translation);
- ``stop``: the partition is never planned again in this run, nor after a restart while the
  ledger's last event of it is that stop (recorded once: a restart that finds the same case
  again does not record it again); other partitions go on;
- ``recreate``: the remote topic is deleted and created again before its partitions are planned
  from the new log start; positions and syncs restart at 0;
- a topic re-created with fewer partitions than its remote topic holds is never continued (its
  remote topic would keep partitions no source partition feeds): its partitions are stopped with
  an ERROR naming the topics and both counts; ``recreate`` gives the remote topic the new count,
  and a topic re-created with more partitions is continued (the catalogue grows its remote topic);
- a remote topic deleted on the target and created again by the catalogue (``remote_lost``) has
  its partitions planned again from the source's log start, after a ledger event and an offset
  sync ``(log start, 0)``; an ERROR names the records below the log start it held, gone for good;
- before it records or acts on a partition, ``settle`` ended every copier still writing it
  (resident copiers outlive their tasks): nothing of the old run is written after the reset's
  positions and syncs;
- the constructor does no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from mm2py.formats import OffsetSync
from mm2py.source.plan.divergence import DivergenceCheck
from mm2py.source.plan.resets import (
    CONTINUE,
    RECREATE,
    STOP,
    Reset,
    decide,
    describe,
    detect,
    entry_for,
    from_entry,
    refill_entry,
)
from mm2py.stores.ledger import GAP, RECREATED, REMOTE_DELETED, LedgerEntry, LedgerState
from mm2py.types import TP

if TYPE_CHECKING:
    from mm2py.kafka.admin import Admin

log = structlog.get_logger(__name__)

# the remote topic being deleted is waited for this long before it is created again
RECREATE_WAIT_SECONDS = 60


class LedgerIO(Protocol):
    def ensure_topic(self, admin: Admin) -> None: ...
    def load(self) -> LedgerState: ...
    def append(self, entries: Iterable[LedgerEntry] = (), topic_ids: Mapping[str, str] | None = None) -> None: ...


class Offsets(Protocol):
    def list_offsets(self, tps: list[TP], spec: str) -> dict[TP, int]: ...


class TargetIO(Protocol):
    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]: ...
    def topics(self) -> dict[str, int]: ...
    def delete_topic(self, name: str) -> None: ...


@dataclass(frozen=True)
class ResetOutcome:
    """What the plan does: partitions to start again at an exact offset, and partitions not to plan."""

    restart: dict[TP, int] = field(default_factory=dict)
    stopped: frozenset[TP] = frozenset()


class ResetGuard:
    """Finds source partitions gone back in each plan and acts by the flow's ``source.reset.policy``.

    ``topic_ids`` gives the source's topic ids as the plan's last metadata answer had them;
    ``save_positions`` and ``write_syncs`` record positions and offset syncs; ``recreate_remote``
    creates a deleted remote topic again (the catalogue's refresh); ``source_partitions`` lists
    the source's topics with their partition counts (a re-created topic's count is checked).
    """

    def __init__(self, flow_name: str, policy: str, *, ledger: LedgerIO, source: Offsets, target: TargetIO,
                 remote_topic: Callable[[str], str], topic_ids: Callable[[Iterable[str]], dict[str, str]],
                 save_positions: Callable[[Mapping[TP, int]], None],
                 write_syncs: Callable[[Sequence[OffsetSync]], None] | None = None,
                 recreate_remote: Callable[[str], None] | None = None,
                 source_partitions: Callable[[], Mapping[str, int]] | None = None,
                 sleep: Callable[[float], None] = time.sleep, divergence: DivergenceCheck | None = None,
                 settle: Callable[[set[TP]], None] | None = None):
        self.flow_name, self.policy = flow_name, policy
        self.ledger, self.source, self.target = ledger, source, target
        self.remote_topic, self.topic_ids = remote_topic, topic_ids
        self.save_positions, self.write_syncs, self.recreate_remote = save_positions, write_syncs, recreate_remote
        self.source_partitions = source_partitions
        self.sleep = sleep
        self.divergence = divergence  # logs diverged after an unclean election (None: log ends only)
        # ends the flow's copiers still running past their tasks (mm2py.source.copy.resident_task.settle)
        self.settle = settle
        self._state: LedgerState | None = None
        self._stopped: dict[TP, Reset] = {}
        self._stops: dict[TP, LedgerEntry] = {}  # stops the ledger holds, by partition (``_note``)
        self._lost: set[str] = set()  # source topics whose remote topic was created again (``remote_lost``)

    def prepare(self, admin: Admin) -> None:
        """Before the first plan: the ledger topic exists on the target."""
        self.ledger.ensure_topic(admin)

    def remote_lost(self, topic: str) -> None:
        """The remote topic of ``topic``, mirrored before, was created again: refilled at the next review."""
        self._lost.add(topic)

    def stopped(self) -> frozenset[TP]:
        return frozenset(self._stopped)

    def known_ids(self) -> Mapping[str, str]:
        """The source topic ids the last review accepted: the topics the flow's copy goes on reading."""
        return self._state.topic_ids if self._state is not None else {}

    def review(self, begin: Mapping[TP, int], log_ends: Mapping[TP, int]) -> ResetOutcome:
        """Check every partition of a plan (``begin``: next offset to copy; ``log_ends``: the source's ends)."""
        state = self._load()
        ids = self.topic_ids({t for t, _ in begin})
        unknown = {t: i for t, i in ids.items() if t not in state.topic_ids}
        found = [r for r in detect(begin, log_ends, state.topic_ids, ids) if r.tp not in self._stopped]
        if self.divergence is not None:  # a log end back past the position hides a truncation: leader epochs
            skip = self._stopped.keys() | {r.tp for r in found}
            found += self.divergence.find({tp: p for tp, p in begin.items() if tp not in skip}, log_ends)
        seen = {r.tp for r in found}
        # a stop outlives a restart: the ledger's last event of the partition says so (found again: not recorded twice)
        recorded = {r.tp for r in found if r.tp in self._stops and self._stops[r.tp].kind == r.kind}
        for tp, last in sorted(self._stops.items()):
            if tp in begin and tp not in seen and tp not in self._stopped:
                found.append(from_entry(last))
                recorded.add(tp)
        # a partition gone back is handled by its reset, which lands its records on the new remote topic
        lost = {tp: position for tp, position in begin.items()
                if tp[0] in self._lost and tp not in seen and tp not in self._stopped}
        self._lost -= {t for t, _ in begin}
        if self.settle is not None and (found or lost):
            self.settle({r.tp for r in found} | set(lost))
        refilled = self._refill(lost, log_ends, state) if lost else {}
        if unknown and not found:
            state.topic_ids.update(unknown)
            self.ledger.append(topic_ids=unknown)
        if not found:
            return ResetOutcome(refilled, self.stopped())
        outcome = self._act(found, state, unknown, recorded)
        return ResetOutcome({**refilled, **outcome.restart}, outcome.stopped)

    def _refill(self, lost: Mapping[TP, int], log_ends: Mapping[TP, int], state: LedgerState) -> dict[TP, int]:
        """Record the remote partitions lost on the target and plan them again from the source's log start."""
        starts = self.source.list_offsets(sorted(lost), "earliest")
        entries = [refill_entry(self.flow_name, t, p, position, starts.get((t, p), 0), log_ends.get((t, p), -1))
                   for (t, p), position in sorted(lost.items())]
        self.ledger.append(entries)  # recorded before the flow acts on it
        state.entries.extend(entries)
        for e in entries:
            start = e.source_new["start"]
            fields = dict(flow=self.flow_name, topic=e.topic, partition=e.partition, kind=REMOTE_DELETED,
                          remote_topic=self.remote_topic(e.topic), position=e.source_old["end"], log_start=start,
                          action=e.action, ledger="mm2py-ledger")
            if start > 0:
                log.error(f"remote topic was deleted on the target: copying the partition again from the source's "
                          f"log start {start}; the records below source offset {start} it held are lost on the "
                          "target (the source no longer has them)", **fields)
            else:
                log.warning("remote topic was deleted on the target: copying the partition again from the source's "
                            "log start 0; nothing is lost", **fields)
        restart = {tp: starts.get(tp, 0) for tp in lost}
        self.save_positions({tp: offset - 1 for tp, offset in restart.items()})
        if self.write_syncs is not None:
            self.write_syncs([OffsetSync(t, p, offset, 0) for (t, p), offset in sorted(restart.items())])
        return restart

    def _load(self) -> LedgerState:
        if self._state is None:
            self._state = self.ledger.load()
            self._note(self._state.entries)
        return self._state

    def _note(self, entries: Iterable[LedgerEntry]) -> None:
        """Keep each partition's standing stop: its last event (a gap aside) when that is a stop."""
        for e in entries:
            if e.kind in (GAP, REMOTE_DELETED):
                continue
            if e.action == STOP:
                self._stops[(e.topic, e.partition)] = e
            else:
                self._stops.pop((e.topic, e.partition), None)

    def _act(self, found: list[Reset], state: LedgerState, unknown: dict[str, str],
             recorded: set[TP]) -> ResetOutcome:
        """Record ``found`` in the ledger (but stops it holds already: ``recorded``), then act on each."""
        tps = [r.tp for r in found]
        starts = self.source.list_offsets(tps, "earliest")
        remote = {r.tp: (self.remote_topic(r.topic), r.partition) for r in found}
        remote_ends = self.target.list_offsets(list(remote.values()), "latest")
        actions = {r.tp: decide(self.policy, r) for r in found}
        shrunk = self._shrunk({r.topic for r in found if actions[r.tp] == CONTINUE and r.kind == RECREATED})
        actions.update({r.tp: STOP for r in found if r.topic in shrunk})
        entries, ids = [], dict(unknown)
        for r in found:
            action, start = actions[r.tp], starts.get(r.tp, 0)
            end = remote_ends.get(remote[r.tp])
            lands = None if action == STOP else 0 if action == RECREATE else end
            entry = entry_for(self.flow_name, r, action, log_start=start, remote_end=end, lands_at=lands)
            if r.topic in shrunk:
                entry.source_new["partitions"], entry.target_old["partitions"] = shrunk[r.topic]
            entries.append(entry)
            if action != STOP and r.new_id:
                ids[r.topic] = r.new_id
        new = [e for r, e in zip(found, entries, strict=True) if not (r.tp in recorded and actions[r.tp] == STOP)]
        self.ledger.append(new, ids)  # recorded before the flow acts on it
        state.entries.extend(new)
        self._note(new)
        state.topic_ids.update(ids)
        for topic in sorted({r.topic for r in found if actions[r.tp] == RECREATE}):
            self._recreate(topic)
        restart: dict[TP, int] = {}
        for r, entry in zip(found, entries, strict=True):
            action = actions[r.tp]
            fields = dict(flow=self.flow_name, topic=r.topic, partition=r.partition, kind=r.kind,
                          old_range=entry.source_old, new_range=entry.source_new, target_before=entry.target_old,
                          target_after=entry.target_new, action=action, ledger="mm2py-ledger")
            if action == STOP and r.topic in shrunk:
                self._stopped[r.tp] = r
                count, have = shrunk[r.topic]
                log.error(f"source topic {r.topic} was re-created with {count} partitions; its remote topic "
                          f"{self.remote_topic(r.topic)} has {have}: continuing would leave partitions no source "
                          "partition feeds, so the partition is stopped (other topics go on). Set "
                          "source.reset.policy = recreate (or delete the remote topic) and restart",
                          source_partitions=count, remote_partitions=have, **fields)
                continue
            if action == STOP:
                self._stopped[r.tp] = r
                log.error(f"{describe(r)}: partition stopped (source.reset.policy = stop); other partitions go "
                          "on. Set source.reset.policy = continue and restart to copy its new records", **fields)
                continue
            restart[r.tp] = r.resumes_from(starts.get(r.tp, 0))
            log.warning(f"{describe(r)}: copying its records from offset {restart[r.tp]} of the new log, after "
                        f"what the remote topic holds (source.reset.policy = {self.policy})" if action == CONTINUE else
                        f"{describe(r)}: remote topic deleted and created again; mirroring from offset 0",
                        **fields)
        if restart:
            self.save_positions({tp: offset - 1 for tp, offset in restart.items()})
            if self.write_syncs is not None:
                self.write_syncs([OffsetSync(tp[0], tp[1], offset,
                                             0 if actions[tp] == RECREATE else max(remote_ends.get(remote[tp], 0), 0))
                                  for tp, offset in sorted(restart.items())])
        return ResetOutcome(restart, self.stopped())

    def _shrunk(self, topics: set[str]) -> dict[str, tuple[int, int]]:
        """Of re-created ``topics``, those with fewer partitions than their remote topic: (source, remote) counts."""
        if not topics or self.source_partitions is None:
            return {}
        counts, remote = self.source_partitions(), self.target.topics()
        out = {}
        for topic in sorted(topics):
            count, have = counts.get(topic), remote.get(self.remote_topic(topic))
            if count is not None and have is not None and have > count:
                out[topic] = (count, have)
        return out

    def _recreate(self, topic: str) -> None:
        """Delete the remote topic of ``topic`` and create it again (its partitions planned after)."""
        name = self.remote_topic(topic)
        self.target.delete_topic(name)
        deadline = time.monotonic() + RECREATE_WAIT_SECONDS
        while name in self.target.topics() and time.monotonic() < deadline:
            self.sleep(0.5)
        if self.recreate_remote is not None:
            self.recreate_remote(topic)
        self._lost.discard(topic)  # created again on purpose, planned from the new log start

