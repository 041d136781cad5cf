"""The offset-sync history: the syncs translation needs, kept where compaction cannot erase them.

MM2's syncs topic is compacted by (topic, partition), so once the log cleaner has run only the
newest sync of each partition survives there, and a group committed behind it could no longer
be translated. mm2py also writes, in the same step, ``mm2-offset-syncs-history.{alias}.internal``
next to it: a one-partition topic with ``cleanup.policy = delete`` holding every sync that
starts a linear run (``history_syncs``). Between two run starts the mapping is linear, so the
syncs dropped from the history (MM2's ``offset.lag.max`` syncs, a range's end, a range's start
that continues the run before it) change no translation; the newest sync of each partition,
which ends the last run, is what compaction keeps in MM2's topic.

Invariants:
- history records reach the cluster in the same write as the syncs topic's, before positions
  move (or in the same transaction): the history holds every run start of data that counts as
  mirrored;
- the history's ``retention.ms`` is at least the longest ``retention.ms`` of the source topics
  whose syncs it holds, ``-1`` once one of them keeps records forever (``retention.ms = -1``
  or compacted): a sync is written after the record it maps, so it outlives that record on the
  source, and every committed offset whose record still exists translates;
- retention is only ever raised, never lowered, by mm2py, and is never below Kafka's default
  ``log.retention.ms`` (7 days).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import AuthorizationError, KafkaError
from mm2py.flow_policy import offset_syncs_history_location
from mm2py.formats import OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.kafka.resources import TopicConfigEntry
from mm2py.source.ranges import RangeResult
from mm2py.types import TP

log = structlog.get_logger(__name__)

FOREVER = -1
# The least the history keeps: Kafka's default log.retention.ms (7 days).
FLOOR_MS = 7 * 24 * 3600 * 1000


class TopicAdmin(Protocol):
    def topics(self) -> Collection[str]: ...
    def broker_count(self) -> int: ...
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     config: Mapping[str, str] | None = None) -> bool: ...
    def topic_configs(self, topics: Iterable[str]) -> dict[str, list[TopicConfigEntry]]: ...
    def alter_topic_configs(self, changes: Mapping[str, Mapping[str, str | None]]) -> None: ...


def _value(entries: Sequence[TopicConfigEntry], name: str) -> str | None:
    return next((e.value for e in entries if e.name == name), None)


def retention_needed(configs: Mapping[str, Sequence[TopicConfigEntry]]) -> int:
    """The retention the history needs for syncs of these source topics (ms, -1 = forever).

    Never less than ``FLOOR_MS``.
    """
    longest = FLOOR_MS
    for entries in configs.values():
        if "compact" in (_value(entries, "cleanup.policy") or ""):
            return FOREVER
        retention = int(_value(entries, "retention.ms") or FOREVER)
        if retention < 0:
            return FOREVER
        longest = max(longest, retention)
    return longest


def run_starts(pairs: Sequence[tuple[int, int]], before: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """The (upstream, downstream) syncs of one range that start a linear run, in order.

    A sync on the line of the run start kept before it (``before``: the partition's last sync
    known from an earlier range) continues that run; the first sync of a range with no
    ``before`` is kept.
    """
    out: list[tuple[int, int]] = []
    last = before
    for up, down in pairs:
        if last is None or down - last[1] != up - last[0] or up < last[0]:
            out.append((up, down))
            last = (up, down)
    return out


def all_syncs(results: Iterable[RangeResult],
              last: Mapping[TP, tuple[int, int]] | None = None) -> list[OffsetSync]:
    """The syncs of ``results`` in order: what MM2's syncs topic gets.

    A range's first sync that repeats its partition's last sync (``last``: the previous range's
    end, where a steady flow's next range starts) is left out: the topic holds that pair already.
    Where the range starts past skipped records with others' records before it on the target,
    a bridge leads in (``bridged``).
    """
    out = []
    for r in results:
        before = last.get((r.topic, r.partition)) if last is not None else None
        out += [OffsetSync(r.topic, r.partition, up, down) for i, (up, down) in enumerate(bridged(r.syncs, before))
                if i or (up, down) != before]
    return out


def bridged(syncs: Sequence[tuple[int, int]], before: tuple[int, int] | None) -> Sequence[tuple[int, int]]:
    """A range's syncs, led by ``(before upstream, first downstream)`` where both sides jumped.

    ``before`` (the last sync written, where the previous range expected its next record) is a
    guess when the target takes records of others (identity cycles): if the range's first copied
    record comes later upstream (records skipped: gone home, aborted) and later downstream (others'
    records between), the skipped stretch maps flat onto it, which supersedes the guess and keeps
    the run before it of known length (mm2py.checkpoint.translation).
    """
    if before is None or not syncs:
        return syncs
    up, down = syncs[0]
    if up > before[0] and down > before[1]:
        return [(before[0], down), *syncs]
    return syncs


def unwritten(results: Iterable[RangeResult],
              last: Mapping[TP, tuple[int, int]]) -> tuple[list[RangeResult], dict[TP, tuple[int, int]]]:
    """``results`` less the leading syncs their tasks wrote while tailing (mm2py.source.copy.tail_commit).

    Returns the results to write syncs for, and the last sync per partition to write them after:
    a range's last sync written by its task stands first (so ``all_syncs`` leaves it out and
    ``run_starts`` continues its run), and the syncs topic gets no sync twice.
    """
    before = dict(last)
    out = []
    for r in results:
        if r.syncs_written:
            before[(r.topic, r.partition)] = r.syncs[r.syncs_written - 1]
            r = replace(r, syncs=r.syncs[r.syncs_written - 1:])
        out.append(r)
    return out, before


def to_commit(results: Iterable[RangeResult],
              last: Mapping[TP, tuple[int, int]]) -> tuple[list[OffsetSync], list[OffsetSync]]:
    """The syncs, and the history records, a micro-batch's commit writes for ``results``, in order.

    A partition may have several rows, each going on from the one before (a released resident
    copier's, then the snapshot of the task that released it): they are taken one after the
    other, each after the sync its own task wrote last (``unwritten``), else the row before's
    last, else ``last``. So no sync is written twice, and none after a newer one of its partition
    (which would supersede it, mm2py.checkpoint.translation).
    """
    rounds: list[list[RangeResult]] = []
    seen: dict[TP, int] = {}
    for r in results:
        tp = (r.topic, r.partition)
        i = seen[tp] = seen.get(tp, -1) + 1
        if i == len(rounds):
            rounds.append([])
        rounds[i].append(r)
    known = dict(last)
    syncs: list[OffsetSync] = []
    history: list[OffsetSync] = []
    for rows in rounds:
        pending, before = unwritten(rows, known)
        syncs += all_syncs(pending, before)
        history += history_syncs(pending, before)
        known.update({(r.topic, r.partition): r.syncs[-1] for r in rows if r.syncs})
    return syncs, history


def history_syncs(results: Iterable[RangeResult],
                  last: Mapping[TP, tuple[int, int]] | None = None) -> list[OffsetSync]:
    """The syncs of ``results`` that go to the history (``last``: each partition's last sync seen)."""
    out = []
    for r in results:
        before = last.get((r.topic, r.partition)) if last is not None else None
        out += [OffsetSync(r.topic, r.partition, up, down) for up, down in run_starts(bridged(r.syncs, before), before)]
    return out


def longer(a: int, b: int) -> int:
    """The longer of two retentions (-1 = forever)."""
    return FOREVER if FOREVER in (a, b) else max(a, b)


class SyncHistory:
    """Keeps the history topic present, with a retention covering every source topic seen.

    ``source`` describes the source topics, ``syncs`` is the cluster holding the syncs. The
    constructor does no I/O; ``cover(topics)`` creates the topic or raises its retention when
    topics not seen before need longer.
    """

    def __init__(self, source: TopicAdmin, syncs: TopicAdmin, topic: str, replication_factor: int):
        self.source, self.syncs, self.topic, self.replication_factor = source, syncs, topic, replication_factor
        self.seen: set[str] = set()
        self.retention_ms: int | None = None  # what the topic has, once known

    def cover(self, topics: Iterable[str]) -> None:
        """Make sure the topic exists and keeps syncs of ``topics`` as long as their records live."""
        new = set(topics) - self.seen
        if self.retention_ms is not None and not new:
            return
        needed = retention_needed(self._live_configs(new))
        if self.retention_ms is None:
            self.retention_ms = self._ensure(needed)
        if longer(self.retention_ms, needed) != self.retention_ms:
            self.syncs.alter_topic_configs({self.topic: {"retention.ms": str(needed)}})
            log.info("offset-sync history retention raised", topic=self.topic, retention_ms=needed)
            self.retention_ms = needed
        self.seen |= new

    def _live_configs(self, topics: set[str]) -> Mapping[str, Sequence[TopicConfigEntry]]:
        """The source configs of ``topics``; one deleted on the source since its records were copied is
        left out (its records are gone, so its syncs need no retention)."""
        try:
            return self.source.topic_configs(topics)
        except KafkaError as e:
            if isinstance(e, AuthorizationError) or e.topic not in topics or e.topic in self.source.topics():
                raise
            return self._live_configs(topics - {e.topic})

    def _ensure(self, needed: int) -> int:
        """Create the topic with ``needed``, or return the retention it already has."""
        if self.topic not in self.syncs.topics():
            rf = min(self.replication_factor, self.syncs.broker_count())
            if self.syncs.create_topic(self.topic, 1, rf, {"cleanup.policy": "delete", "retention.ms": str(needed)}):
                return needed
        entries = self.syncs.topic_configs([self.topic]).get(self.topic, [])
        return int(_value(entries, "retention.ms") or FOREVER)


def prepare_history(flow: FlowConfig) -> FlowConfig:
    """``flow`` with its history topic present, or with the history off when the principal may not have it.

    A missing ACL turns the history off with one WARNING naming the ACL (MM2's own ACLs cover only
    its syncs topic); other errors are left to the writes, which wait out outages.
    """
    if not (flow.checkpoints.emit_offset_syncs_enabled and flow.checkpoints.offset_syncs_history_enabled):
        return flow
    try:
        history_for(flow).cover(())
    except AuthorizationError as e:
        log.warning("offset-sync history off: groups behind the newest sync of a partition stop translating "
                    "once the syncs topic is compacted; add the ACL, or set offset-syncs.history.enabled = false "
                    "to silence this", flow=flow.name, error=str(e))
        return replace(flow, checkpoints=replace(flow.checkpoints, offset_syncs_history_enabled=False))
    except KafkaError:
        pass  # an outage: the committer creates the topic once the cluster answers
    return flow


def history_for(flow: FlowConfig) -> SyncHistory:
    """The history keeper of ``flow``, over its real clusters."""
    cluster, topic = offset_syncs_history_location(flow)
    return SyncHistory(Admin(flow.source, timeout_ms=flow.admin_timeout_ms),
                       Admin(cluster, timeout_ms=flow.admin_timeout_ms), topic,
                       flow.checkpoints.offset_syncs_topic_replication_factor)
