"""A copy task of a flow with ``copy.resident.enabled``: the handover, then a resident copier.

Every at-least-once copy task of such a flow first releases the resident copiers holding its
partitions (mm2py.source.copy.handover) and starts each partition where the released copier's
acknowledged writes ended (``continue_after``). A tailing task then runs its copier as a resident
one (mm2py.source.copy.resident): it returns at its window's end with a snapshot, and the copier
goes on until the next task releases it or its lease (the grace) runs out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import structlog

from mm2py import worker
from mm2py.config.model import FlowConfig
from mm2py.source.copy import handover
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.resident import ResidentCopy, SnapshotProgress
from mm2py.source.copy.tail import TailWindow, may_tail
from mm2py.source.copy.tail_commit import TailProgress
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.types import TP

log = structlog.get_logger(__name__)

WAIT_STEP_S = 0.02


@dataclass(frozen=True)
class ResidentLease:
    """A resident flow's handover settings, sent with each of its copy tasks (picklable).

    ``key``: the flow's handover folder (``handover.flow_key``); ``grace_s``: how long a copier goes on
    after its task returned; ``one_host``: every executor runs on the driver's host (a local master),
    so every copier is reachable through the folder; ``timeout_s``: the longest wait for a release.
    """

    key: str
    grace_s: float
    one_host: bool
    timeout_s: float


def resident_lease(flow: FlowConfig, *, provenance: bool, one_host: bool) -> ResidentLease | None:
    """``flow``'s lease when its tails copy as resident copiers: the setting (unset: on with
    ``one_host``), at-least-once, tailing, no provenance."""
    enabled = one_host if flow.copy.resident_enabled is None else flow.copy.resident_enabled
    if not (enabled and may_tail(flow, provenance)):
        return None
    return ResidentLease(handover.flow_key(flow.name, flow.source.bootstrap_servers, flow.target.bootstrap_servers),
                         flow.copy.resident_grace_ms / 1000, one_host, flow.admin_timeout_ms / 1000 + 30)


def handed_over(lease: ResidentLease, ranges: list[PartitionRange],
                sleep: Callable[[float], None] = time.sleep) -> tuple[list[PartitionRange], list[RangeResult]]:
    """``ranges`` after the release of the copiers holding their partitions, and those copiers' rows."""
    tps = {(r.topic, r.partition) for r in ranges}
    rows, held, ends = handover.release(lease.key, tps, lease.timeout_s)
    if not lease.one_host and not tps <= held:
        sleep(lease.grace_s)  # a copier on another host stops by its lease, which began before this task
    back = went_back(ranges, ends)
    last = {(r.topic, r.partition): r.syncs[-1] for r in rows if r.syncs}  # the closing sync each copier wrote
    return continue_after(ranges, ends, last), [r for r in rows if (r.topic, r.partition) not in back]


def went_back(ranges: list[PartitionRange], ends: Mapping[TP, tuple[int, int]]) -> set[TP]:
    """The partitions planned below a released copier's planned end: a reset (re-created, truncated)
    or a stall planned again. Their released rows are not committed: the copier recorded its progress
    itself, and syncs or positions of the old run written after the plan went back would supersede
    the reset's (mm2py.source.plan.reset_guard) and this task's own."""
    return {(r.topic, r.partition) for r in ranges
            if (r.topic, r.partition) in ends and r.start < ends[(r.topic, r.partition)][1]}


def settle(lease: ResidentLease, tps: set[TP], sleep: Callable[[float], None] = time.sleep) -> None:
    """End the flow's resident copiers holding any of ``tps`` before the planner acts on them (a
    reset, mm2py.source.plan.reset_guard): on one host they are released; with executors on other
    hosts the grace is waited, which outlasts every lease the last micro-batch's tasks left.

    The released copiers recorded their progress themselves; their rows are not committed (as
    ``handed_over`` drops them for partitions planned back). Their other partitions are copied
    again from Spark's offsets by the next tasks: at-least-once, with duplicates."""
    if not lease.one_host:
        sleep(lease.grace_s)
        return
    rows, held, _ = handover.release(lease.key, tps, lease.timeout_s)
    if held:
        log.info("resident copiers ended before a reset is acted on", partitions=len(held),
                 records_after_snapshot=sum(r.records for r in rows))


def continue_after(ranges: list[PartitionRange], ends: Mapping[TP, tuple[int, int]],
                   last_syncs: Mapping[TP, tuple[int, int]] | None = None) -> list[PartitionRange]:
    """Each range starting where a released copier's acknowledged writes ended (``ends``: that, and
    the copier's planned end, per partition), when that lies past its start and the range continues
    the copier's (starts at or past the copier's planned end: a reset plans below it, and is kept
    as planned). A continued range carries the copier's last sync (``last_syncs``) as its
    ``prior_sync``: it is the one writer of the partition since then."""
    out = []
    for r in ranges:
        tp = (r.topic, r.partition)
        next_offset, copier_end = ends.get(tp, (-1, -1))
        if next_offset > r.start and r.start >= copier_end:
            # the planned end stays: past it the range only tails (Copier), and the copier that takes
            # this over compares the next plan with it
            r = replace(r, start=next_offset, exact=True, prior_sync=(last_syncs or {}).get(tp))
        out.append(r)
    return out


def run_resident(lease: ResidentLease, tail: TailWindow, lent: worker.Lent,
                 make: Callable[[TailWindow], Copier]) -> list[RangeResult]:
    """Copy as a resident copier until ``tail`` closes; the snapshot rows then.

    ``make(window)`` builds the copier over the ``lent`` clients with ``window``; the copier gives
    the clients back when it ends.
    """
    assert isinstance(tail.progress, TailProgress)
    progress = SnapshotProgress(tail.progress)
    window = TailWindow(tail.until + lease.grace_s, tail.stop, progress)
    try:
        copier = make(window)
    except BaseException:
        worker.give_back(lent, failed=True)
        raise
    resident = ResidentCopy(copier, window, progress, lambda failed: worker.give_back(lent, failed=failed))
    handover.register(lease.key, resident)
    resident.start()
    while tail.open() and not resident.ended.is_set():
        time.sleep(WAIT_STEP_S)
    rows = resident.snapshot()
    resident.raise_failure()
    if tail.stop is not None and tail.stop.raised():  # the run stops: all of it commits with this task
        return rows + handover.release_here(lease.key, resident.tps, lease.timeout_s)[0]
    window.until = max(window.until, time.monotonic() + lease.grace_s)
    return rows
